//! Forgets the failed inquiries of GUIDs no longer in doubt: settled by the relay, by hand,
//! or purged.

use crate::error::Result;
use crate::postgres::{PgStore, params};
use crate::sqlite::{Hold, Ledger};

const SQLITE: &str = "\
    DELETE FROM tx_inquiry WHERE NOT EXISTS ( \
        SELECT 1 FROM tx WHERE tx.guid = tx_inquiry.guid AND tx.state IN ('UNKNOWN', 'SENT'))";
const POSTGRES: &str = "\
    DELETE FROM tx_inquiry i WHERE NOT EXISTS ( \
        SELECT 1 FROM tx WHERE tx.guid = i.guid AND tx.state IN ('UNKNOWN', 'SENT'))";

pub trait PruneInquiries {
    /// Deletes the records of GUIDs no longer in doubt (settled by the relay, by hand, or
    /// purged), one statement. Returns how many went.
    fn prune_inquiries(&self) -> Result<usize>;
}

impl Ledger {
    /// Forgets the failed inquiries of GUIDs no longer in doubt.
    pub fn prune_inquiries(&self) -> Result<usize> {
        Ok(self.conn.prepare_cached(SQLITE)?.execute([])?)
    }
}

impl<H: Hold> PruneInquiries for H {
    fn prune_inquiries(&self) -> Result<usize> {
        self.write_with(|l| l.prune_inquiries())
    }
}

impl PruneInquiries for PgStore {
    fn prune_inquiries(&self) -> Result<usize> {
        let n = self.execute("pruning failed inquiries", POSTGRES, params![])?;
        Ok(usize::try_from(n).unwrap_or(usize::MAX))
    }
}
