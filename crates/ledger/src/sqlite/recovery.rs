//! The recovery mark and the ledger's own events on SQLite (see `crate::recovery`).

use rusqlite::{OptionalExtension, params};

use super::Ledger;
use crate::error::Result;
use crate::recovery::{Booked, LedgerEvent, Recovery};

const HAS_TABLE: &str =
    "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'ledger_recovery'";
const MARK: &str = "SELECT since, who, at FROM ledger_recovery WHERE id = 1";
/// A mark already there keeps the earlier `since`: the ledger may have forgotten claims since
/// whichever instant is older.
const BEGIN: &str = "\
    INSERT INTO ledger_recovery (id, since, who, at) \
    VALUES (1, ?1, ?2, strftime('%Y-%m-%dT%H:%M:%SZ', 'now')) \
    ON CONFLICT (id) DO UPDATE SET since = min(since, excluded.since), who = excluded.who, \
        at = excluded.at \
    RETURNING since, who, at";
const END: &str = "DELETE FROM ledger_recovery WHERE id = 1 RETURNING since, who, at";
const EVENT: &str = "INSERT INTO ledger_events (who, event, detail) VALUES (?1, ?2, ?3)";
const HAS_EVENTS: &str =
    "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'ledger_events'";
const EVENTS: &str = "\
    SELECT at, who, event, detail FROM ( \
        SELECT id, at, who, event, detail FROM ledger_events ORDER BY id DESC LIMIT ?1) \
    ORDER BY id";
/// A booking the core reports, written DONE/`0000` for a GUID without a row, never sent by us
/// (attempts 0).
const RECORD_BOOKED: &str = "\
    INSERT INTO tx (guid, tx_code, state, rsp_code, request, response, attempts, updated_at, \
                    channel) \
    VALUES (?1, ?2, 'DONE', '0000', ?3, ?4, 0, datetime('now'), ?5) \
    ON CONFLICT (guid) DO NOTHING";

fn mark(r: &rusqlite::Row<'_>) -> rusqlite::Result<Recovery> {
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

    /// Marks the ledger recovering since `since` (RFC 3339 UTC; an earlier mark's `since` is
    /// kept if older), and records who did it and why in the ledger's events, in one
    /// transaction.
    pub fn begin_recovery(&self, since: &str, who: &str, detail: &str) -> Result<Recovery> {
        let since = crate::recovery::stored_since(since)?;
        self.in_transaction(|| {
            let m = self
                .conn
                .prepare_cached(BEGIN)?
                .query_row(params![since, who], mark)?;
            self.conn.prepare_cached(EVENT)?.execute(params![
                who,
                "recovery begun",
                format!("recovering since {}: {detail}", m.since)
            ])?;
            Ok(m)
        })
    }

    /// Ends recovery; the mark it ended, if there was one (recorded in the ledger's events).
    pub fn end_recovery(&self, who: &str, detail: &str) -> Result<Option<Recovery>> {
        self.in_transaction(|| {
            let ended = self
                .conn
                .prepare_cached(END)?
                .query_row([], mark)
                .optional()?;
            if let Some(m) = &ended {
                self.conn.prepare_cached(EVENT)?.execute(params![
                    who,
                    "recovery ended",
                    format!("had been recovering since {}: {detail}", m.since)
                ])?;
            }
            Ok(ended)
        })
    }

    /// Adds an event to the ledger's own history.
    pub fn record_event(&self, who: &str, event: &str, detail: &str) -> Result<()> {
        self.conn
            .prepare_cached(EVENT)?
            .execute(params![who, event, detail])?;
        Ok(())
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

    /// Writes `b` as a DONE/`0000` row iff the GUID has no row; true iff it did.
    pub fn record_booked(&self, b: &Booked) -> Result<bool> {
        self.as_actor(b.who.as_deref(), Some(&b.reason), || {
            let n = self
                .conn
                .prepare_cached(RECORD_BOOKED)?
                .execute(params![b.guid, b.tx_code, b.request, b.response, b.channel])?;
            Ok(n == 1)
        })
    }

    /// Runs `f` in a write transaction of its own (or in the caller's, if one is open).
    fn in_transaction<T>(&self, f: impl FnOnce() -> Result<T>) -> Result<T> {
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
