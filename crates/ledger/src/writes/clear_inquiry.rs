//! Forgets a GUID's failed inquiries: an inquiry about it succeeded (resolve), or an
//! operator settled it (`inspect approve`).

use crate::error::Result;
use crate::postgres::{PgStore, params};
use crate::sqlite::{Hold, Ledger};

const SQLITE: &str = "DELETE FROM tx_inquiry WHERE guid = ?1";
const POSTGRES: &str = "DELETE FROM tx_inquiry WHERE guid = $1";

pub trait ClearInquiry {
    /// Deletes `guid`'s failure record (an inquiry succeeded). True iff there was one.
    fn clear_inquiry(&self, guid: &str) -> Result<bool>;
}

impl Ledger {
    /// Forgets `guid`'s failed inquiries. True iff it had a record.
    pub fn clear_inquiry(&self, guid: &str) -> Result<bool> {
        Ok(self
            .conn
            .prepare_cached(SQLITE)?
            .execute(rusqlite::params![guid])?
            == 1)
    }
}

impl<H: Hold> ClearInquiry for H {
    fn clear_inquiry(&self, guid: &str) -> Result<bool> {
        let guid = guid.to_string();
        self.write_with(move |l| l.clear_inquiry(&guid))
    }
}

impl ClearInquiry for PgStore {
    fn clear_inquiry(&self, guid: &str) -> Result<bool> {
        let p = params![guid.to_string()];
        Ok(self.execute("clearing failed inquiries", POSTGRES, p)? == 1)
    }
}
