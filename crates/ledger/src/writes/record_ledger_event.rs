//! An event in the history of the ledger as a whole (`who` did `event`: `detail`): a backup,
//! a restore, recovery begun or ended, a journal applied.

use crate::error::Result;
use crate::postgres::{PgStore, params};
use crate::sqlite::{Hold, Ledger};

/// Also the event that `begin_recovery` and `end_recovery` write on SQLite.
pub(crate) const SQLITE: &str =
    "INSERT INTO ledger_events (who, event, detail) VALUES (?1, ?2, ?3)";
const POSTGRES: &str = "INSERT INTO ledger_events (who, event, detail) VALUES ($1, $2, $3)";

pub trait RecordLedgerEvent {
    /// Adds an event to the history of the ledger as a whole (`who` did `event`: `detail`).
    fn record_ledger_event(&self, who: &str, event: &str, detail: &str) -> Result<()>;
}

impl Ledger {
    /// Adds an event to the ledger's own history.
    pub fn record_event(&self, who: &str, event: &str, detail: &str) -> Result<()> {
        self.conn
            .prepare_cached(SQLITE)?
            .execute(rusqlite::params![who, event, detail])?;
        Ok(())
    }
}

impl<H: Hold> RecordLedgerEvent for H {
    fn record_ledger_event(&self, who: &str, event: &str, detail: &str) -> Result<()> {
        let (who, event, detail) = (who.to_string(), event.to_string(), detail.to_string());
        self.write_with(move |l| l.record_event(&who, &event, &detail))
    }
}

impl RecordLedgerEvent for PgStore {
    fn record_ledger_event(&self, who: &str, event: &str, detail: &str) -> Result<()> {
        let p = params![who.to_string(), event.to_string(), detail.to_string()];
        self.execute("recording a ledger event", POSTGRES, p)
            .map(|_| ())
    }
}
