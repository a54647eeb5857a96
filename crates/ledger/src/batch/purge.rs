//! `purge`: forgets finished (DONE) rows past their retention, nothing else.

use serde::Serialize;

use crate::error::LedgerError;
use crate::store::{PURGE_CHUNK, Store};

#[derive(Debug, Default, Serialize)]
pub struct PurgeSummary {
    pub days: u64,
    pub deleted: usize,
    /// Transactions it took, each deleting at most `PURGE_CHUNK` rows.
    pub chunks: usize,
}

/// Deletes DONE rows older than `days` in chunks of `PURGE_CHUNK`, each its own short
/// transaction, so that the relay's claims and results never wait behind one long DELETE.
pub fn purge(ledger: &dyn Store, days: u64) -> Result<PurgeSummary, LedgerError> {
    let mut sum = PurgeSummary {
        days,
        ..PurgeSummary::default()
    };
    loop {
        let n = ledger.purge_chunk(days, PURGE_CHUNK)?;
        sum.deleted += n;
        sum.chunks += 1;
        if n < PURGE_CHUNK {
            return Ok(sum);
        }
    }
}
