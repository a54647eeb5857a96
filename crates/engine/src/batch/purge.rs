//! `purge`: forgets finished (DONE) rows past their retention, nothing else; and, on its own
//! retention, old history.

use serde::Serialize;

use ledger::error::LedgerError;
use ledger::store::{PURGE_CHUNK, Retention};

#[derive(Debug, Default, Serialize)]
pub struct PurgeSummary {
    pub days: u64,
    pub deleted: usize,
    /// Transactions it took, each deleting at most `PURGE_CHUNK` rows.
    pub chunks: usize,
    /// `--history-days`, if given.
    pub history_days: Option<u64>,
    /// History rows deleted (older than `history_days`, of GUIDs whose row is gone or DONE
    /// past `days`).
    pub history_deleted: usize,
}

/// Deletes DONE rows older than `days` in chunks of `PURGE_CHUNK`, each its own short
/// transaction, so that the relay's claims and results never wait behind one long DELETE.
/// With `history_days`, then deletes history rows older than that, in chunks too, but only
/// of GUIDs no longer in doubt: whose row is gone, or DONE and older than `days` (an UNKNOWN,
/// SENT or FAILED row, never purged, keeps its claim and its E901 for the investigator).
pub fn purge(
    ledger: &dyn Retention,
    days: u64,
    history_days: Option<u64>,
) -> Result<PurgeSummary, LedgerError> {
    let mut sum = PurgeSummary {
        days,
        history_days,
        ..PurgeSummary::default()
    };
    (sum.deleted, sum.chunks) = in_chunks(|| ledger.purge_chunk(days, PURGE_CHUNK))?;
    if let Some(h) = history_days {
        (sum.history_deleted, _) = in_chunks(|| ledger.purge_history_chunk(h, days, PURGE_CHUNK))?;
    }
    Ok(sum)
}

/// Runs `chunk` until it deletes fewer than `PURGE_CHUNK`: (rows deleted, chunks run).
fn in_chunks(
    mut chunk: impl FnMut() -> Result<usize, LedgerError>,
) -> Result<(usize, usize), LedgerError> {
    let (mut deleted, mut chunks) = (0, 0);
    loop {
        let n = chunk()?;
        deleted += n;
        chunks += 1;
        if n < PURGE_CHUNK {
            return Ok((deleted, chunks));
        }
    }
}
