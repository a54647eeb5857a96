//! Recovery mode (contract §11) ends: the mark deleted, with the ledger's event saying who
//! ended it and why, together.

use rusqlite::OptionalExtension;

use crate::error::Result;
use crate::postgres::PgStore;
use crate::postgres::recovery::mark as pg_mark;
use crate::postgres::utc;
use crate::recovery::Recovery;
use crate::sqlite::recovery::mark;
use crate::sqlite::{Hold, Ledger};
use crate::writes::record_ledger_event::SQLITE as SQLITE_EVENT;

/// With the event (`SQLITE_EVENT`), in one transaction.
const SQLITE: &str = "DELETE FROM ledger_recovery WHERE id = 1 RETURNING since, who, at";

/// The mark and its event, one statement (a data-modifying WITH).
const POSTGRES: &str = concat!(
    "WITH m AS (DELETE FROM ledger_recovery WHERE id = 1 RETURNING since, who, at), \
     e AS (INSERT INTO ledger_events (who, event, detail) \
         SELECT $1, 'recovery ended', 'had been recovering since ' || ",
    utc!("m.since"),
    " || ': ' || $2::text FROM m) \
     SELECT ",
    utc!("since"),
    ", who, ",
    utc!("at"),
    " FROM m"
);

pub trait EndRecovery {
    /// Ends recovery, recorded in the ledger's events; the mark ended, if there was one.
    fn end_recovery(&self, who: &str, detail: &str) -> Result<Option<Recovery>>;
}

impl Ledger {
    /// Ends recovery; the mark it ended, if there was one (recorded in the ledger's events).
    pub fn end_recovery(&self, who: &str, detail: &str) -> Result<Option<Recovery>> {
        self.in_transaction(|| {
            let ended = self
                .conn
                .prepare_cached(SQLITE)?
                .query_row([], mark)
                .optional()?;
            if let Some(m) = &ended {
                self.conn
                    .prepare_cached(SQLITE_EVENT)?
                    .execute(rusqlite::params![
                        who,
                        "recovery ended",
                        format!("had been recovering since {}: {detail}", m.since)
                    ])?;
            }
            Ok(ended)
        })
    }
}

impl<H: Hold> EndRecovery for H {
    fn end_recovery(&self, who: &str, detail: &str) -> Result<Option<Recovery>> {
        let (who, detail) = (who.to_string(), detail.to_string());
        self.write_with(move |l| l.end_recovery(&who, &detail))
    }
}

impl EndRecovery for PgStore {
    fn end_recovery(&self, who: &str, detail: &str) -> Result<Option<Recovery>> {
        let (who, detail) = (who.to_string(), detail.to_string());
        self.pool.run("ending recovery", move |c| {
            let st = c.prepared(POSTGRES)?;
            c.client
                .query_opt(&st, &[&who, &detail])?
                .as_ref()
                .map(pg_mark)
                .transpose()
        })
    }
}
