//! The recovery mark and the ledger's own events on SQLite (see `crate::recovery`), as they
//! are read; the writes (recovery begun and ended, a booking, an event) are in `crate::writes`.

use rusqlite::OptionalExtension;

use super::Ledger;
use crate::error::Result;
use crate::recovery::{LedgerEvent, Recovery};

const HAS_TABLE: &str =
    "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'ledger_recovery'";
const MARK: &str = "SELECT since, who, at FROM ledger_recovery WHERE id = 1";
const HAS_EVENTS: &str =
    "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'ledger_events'";
const EVENTS: &str = "\
    SELECT at, who, event, detail FROM ( \
        SELECT id, at, who, event, detail FROM ledger_events ORDER BY id DESC LIMIT ?1) \
    ORDER BY id";

pub(crate) fn mark(r: &rusqlite::Row<'_>) -> rusqlite::Result<Recovery> {
    Ok(Recovery {
        since: r.get(0)?,
        who: r.get(1)?,
        at: r.get(2)?,
    })
}

impl Ledger {
    /// The recovery mark, if the ledger is recovering (`None` too on a file older than the
    /// mark's table, opened read-only as it is).
    pub fn recovery(&self) -> Result<Option<Recovery>> {
        let has: i64 = self
            .conn
            .prepare_cached(HAS_TABLE)?
            .query_row([], |r| r.get(0))?;
        if has == 0 {
            return Ok(None);
        }
        Ok(self
            .conn
            .prepare_cached(MARK)?
            .query_row([], mark)
            .optional()?)
    }

    /// The newest `limit` ledger events, oldest first (none on a file without the table).
    pub fn events(&self, limit: u64) -> Result<Vec<LedgerEvent>> {
        let has: i64 = self
            .conn
            .prepare_cached(HAS_EVENTS)?
            .query_row([], |r| r.get(0))?;
        if has == 0 {
            return Ok(Vec::new());
        }
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut st = self.conn.prepare_cached(EVENTS)?;
        let rows = st.query_map([limit], |r| {
            Ok(LedgerEvent {
                at: r.get(0)?,
                who: r.get(1)?,
                event: r.get(2)?,
                detail: r.get(3)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Runs `f` in a write transaction of its own (or in the caller's, if one is open).
    pub(crate) fn in_transaction<T>(&self, f: impl FnOnce() -> Result<T>) -> Result<T> {
        if !self.conn.is_autocommit() {
            return f();
        }
        self.conn.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
        let r = f();
        let end = if r.is_ok() { "COMMIT" } else { "ROLLBACK" };
        if let Err(e) = self.conn.execute_batch(end) {
            let _ = self.conn.execute_batch("ROLLBACK");
            return Err(e.into());
        }
        r
    }
}
