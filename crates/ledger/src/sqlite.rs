//! The SQLite ledger: schema, and every state change and selection as SQL (the PostgreSQL
//! twin is `postgres`).
//!
//! Every transition is ONE statement whose WHERE clause names the state it leaves; its row
//! count says whether it happened. Nothing here reads a row to decide a write: two threads
//! (or two processes) racing for the same GUID are arbitrated by SQLite, not by us.

use std::cell::Cell;
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, ToSqlOutput, ValueRef};
use rusqlite::{Connection, OpenFlags, OptionalExtension, ToSql, params};

pub use crate::error::{LedgerError, Result};
pub use crate::state::{Change, Evidence, HistoryRow, Row, State};
pub use crate::store::{Durability, HEALTH_PROBE_GUID, InquiryRecord, PURGE_CHUNK, Store};
use crate::store::{backoff_base_secs, backoff_cap_secs, last_error_text};

/// The schema file at the repository root, built into every binary.
pub const SCHEMA: &str = include_str!("../../../schema.sql");

/// Bumped whenever `SCHEMA` changes; `PRAGMA user_version` records what a file has seen.
/// 2: `tx_history`, its triggers and `tx_actor`; 3: `relay_health` (`/healthz`); 4:
/// `tx_inquiry` (resolve's backoff); 5: the insert trigger records a row replaced by `INSERT
/// OR REPLACE`. The schema is idempotent: a file at any earlier version gets whatever it
/// lacks.
const SCHEMA_VERSION: i64 = 5;

// The transitions. Each names, in its WHERE, the state it leaves; its row count decides.
const CLAIM_NEW: &str = "\
    INSERT INTO tx (guid, tx_code, state, request, attempts, updated_at) \
    VALUES (?1, ?2, 'SENT', ?3, 1, datetime('now')) \
    ON CONFLICT (guid) DO NOTHING";
const RECLAIM_FAILED: &str = "\
    UPDATE tx SET state = 'SENT', attempts = attempts + 1, updated_at = datetime('now') \
    WHERE guid = ?1 AND state = 'FAILED' AND request = ?2 \
    RETURNING attempts";
const RECLAIM_FOR_RESEND: &str = "\
    UPDATE tx SET state = 'SENT', attempts = attempts + 1, updated_at = datetime('now') \
    WHERE guid = ?1 AND state = 'FAILED' AND rsp_code = 'E902' AND attempts < ?2 \
    RETURNING attempts";
const TRANSITION: &str = "\
    UPDATE tx SET state = ?3, rsp_code = ?4, response = ?5, updated_at = datetime('now') \
    WHERE guid = ?1 AND state = ?2 AND (?6 IS NULL OR attempts = ?6) \
    AND (?7 IS NULL OR updated_at <= datetime('now', ?7))";
/// History has its own retention: old rows go in chunks, like purge's, but only those of
/// GUIDs no longer in doubt (the row gone, or DONE past purge's own retention `?3`); the
/// guard is in the subselect and again on the rows deleted.
const PURGE_HISTORY_CHUNK: &str = "\
    DELETE FROM tx_history WHERE id IN ( \
        SELECT id FROM tx_history h \
        WHERE at < strftime('%Y-%m-%d %H:%M:%f', 'now', ?1) \
        AND NOT EXISTS (SELECT 1 FROM tx WHERE tx.guid = h.guid \
            AND NOT (tx.state = 'DONE' AND tx.updated_at < datetime('now', ?3))) \
        ORDER BY id LIMIT ?2) \
    AND NOT EXISTS (SELECT 1 FROM tx WHERE tx.guid = tx_history.guid \
        AND NOT (tx.state = 'DONE' AND tx.updated_at < datetime('now', ?3)))";
/// Who is writing, for the history triggers (see schema.sql); present only during our own
/// write transactions.
/// A history row that records evidence, not a change: from- and to-state are the row's state
/// as it is (NULL if there is no row).
const RECORD_EVIDENCE: &str = "\
    INSERT INTO tx_history (guid, from_state, to_state, rsp_code, attempts, who, reason) \
    VALUES (?1, (SELECT state FROM tx WHERE guid = ?1), (SELECT state FROM tx WHERE guid = ?1), \
            ?2, ?3, ?4, ?5)";
const ACTOR_IN: &str = "INSERT INTO tx_actor (who, reason) VALUES (?1, ?2)";
const ACTOR_OUT: &str = "DELETE FROM tx_actor WHERE rowid = ?1";
const PURGE_CHUNK_SQL: &str = "\
    DELETE FROM tx WHERE guid IN ( \
        SELECT guid FROM tx WHERE state = 'DONE' AND updated_at < datetime('now', ?1) \
        ORDER BY updated_at LIMIT ?2) \
    AND state = 'DONE' AND updated_at < datetime('now', ?1)";

/// `/healthz`'s probe of the claim path: the claim's INSERT of the probe row, which fires
/// the `tx` triggers; always rolled back.
const HEALTH_PROBE: &str = "\
    INSERT INTO tx (guid, tx_code, state, request, attempts, updated_at) \
    VALUES (?1, 'TRNF', 'SENT', x'', 1, datetime('now'))";
/// `/healthz`'s committed write: the one row of `relay_health`.
const TOUCH_HEALTH: &str = "\
    INSERT INTO relay_health (id, at) VALUES (1, datetime('now')) \
    ON CONFLICT (id) DO UPDATE SET at = excluded.at";
const READ_HEALTH: &str = "SELECT at FROM relay_health WHERE id = 1";
const OLDEST_AGE: &str = "\
    SELECT (julianday('now') - julianday(min(updated_at))) * 86400.0 FROM tx WHERE state = ?1";
// The side table of failed inquiries. The record of a GUID's n-th failure says when the
// next inquiry is due: now + min(min_age × 2^(n-1), cap), by the database's clock. In the
// DO UPDATE, `tx_inquiry.failures` is the count before this failure, n-1. ?3 is --min-age
// (at most the cap, so that the shift cannot overflow), ?4 the cap, ?5 the largest shift.
const RECORD_INQUIRY_FAILURE: &str = "\
    INSERT INTO tx_inquiry (guid, failures, last_error, next_at) \
    VALUES (?1, 1, ?2, datetime('now', '+' || ?3 || ' seconds')) \
    ON CONFLICT (guid) DO UPDATE SET \
        failures = tx_inquiry.failures + 1, \
        last_error = excluded.last_error, \
        next_at = datetime('now', '+' || \
            min(?3 << max(0, min(tx_inquiry.failures, ?5)), ?4) || ' seconds') \
    RETURNING guid, failures, last_error, next_at";
const CLEAR_INQUIRY: &str = "DELETE FROM tx_inquiry WHERE guid = ?1";
const PRUNE_INQUIRIES: &str = "\
    DELETE FROM tx_inquiry WHERE NOT EXISTS ( \
        SELECT 1 FROM tx WHERE tx.guid = tx_inquiry.guid AND tx.state IN ('UNKNOWN', 'SENT'))";
const INQUIRY_COLUMNS: &str = "i.guid, i.failures, i.last_error, i.next_at";

/// How long a statement waits for another writer before giving up (then: E905).
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

impl ToSql for State {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::from(self.as_str()))
    }
}

impl FromSql for State {
    fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
        let s = value.as_str()?;
        s.parse().map_err(|e: String| FromSqlError::Other(e.into()))
    }
}

const ROW_COLUMNS: &str = "guid, tx_code, state, rsp_code, request, response, attempts, updated_at";
/// The same, where `tx` is joined with `tx_inquiry`.
const TX_COLUMNS: &str = "tx.guid, tx.tx_code, tx.state, tx.rsp_code, tx.request, tx.response, tx.attempts, \
     tx.updated_at";

fn lenient_text(v: ValueRef<'_>) -> Option<String> {
    match v {
        ValueRef::Null => None,
        ValueRef::Integer(i) => Some(i.to_string()),
        ValueRef::Real(r) => Some(r.to_string()),
        ValueRef::Text(b) | ValueRef::Blob(b) => Some(String::from_utf8_lossy(b).into_owned()),
    }
}

fn lenient_bytes(v: ValueRef<'_>) -> Option<Vec<u8>> {
    match v {
        ValueRef::Text(b) | ValueRef::Blob(b) => Some(b.to_vec()),
        _ => None,
    }
}

impl Row {
    fn from_sql(r: &rusqlite::Row<'_>) -> rusqlite::Result<Row> {
        Ok(Row {
            guid: lenient_text(r.get_ref(0)?).unwrap_or_default(),
            tx_code: lenient_text(r.get_ref(1)?),
            state: r.get(2)?,
            rsp_code: lenient_text(r.get_ref(3)?),
            request: lenient_bytes(r.get_ref(4)?),
            response: lenient_bytes(r.get_ref(5)?),
            attempts: match r.get_ref(6)? {
                ValueRef::Integer(i) => Some(i),
                _ => None,
            },
            updated_at: lenient_text(r.get_ref(7)?).unwrap_or_default(),
        })
    }
}

impl InquiryRecord {
    fn from_sql(r: &rusqlite::Row<'_>) -> rusqlite::Result<InquiryRecord> {
        Ok(InquiryRecord {
            guid: lenient_text(r.get_ref(0)?).unwrap_or_default(),
            failures: match r.get_ref(1)? {
                ValueRef::Integer(i) => i,
                _ => 0,
            },
            last_error: lenient_text(r.get_ref(2)?),
            next_at: lenient_text(r.get_ref(3)?).unwrap_or_default(),
        })
    }
}

/// One SQLite connection to the ledger, configured for durable claims.
/// A `Ledger` is used by one thread at a time (it is `Send`, not `Sync`).
pub struct Ledger {
    conn: Connection,
    /// Who the history names for this connection's changes.
    who: String,
    /// The `tx_actor` row naming `who` for a whole group-commit transaction, while one is
    /// open (see [`Ledger::begin_batch`]).
    batch_actor: Cell<Option<i64>>,
}

impl Ledger {
    /// Opens a ledger that must already exist: for the tools that work on the relay's ledger.
    pub fn open_existing(path: &Path) -> Result<Ledger> {
        if !plain_path(path)?.exists() {
            return Err(LedgerError::Missing(path.to_path_buf()));
        }
        Ledger::open(path)
    }

    /// Opens an existing ledger read-only, as it is: no pragma, no schema change (`inspect`).
    pub fn open_read_only(path: &Path) -> Result<Ledger> {
        if !plain_path(path)?.exists() {
            return Err(LedgerError::Missing(path.to_path_buf()));
        }
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|source| LedgerError::Open {
            path: path.to_path_buf(),
            source,
        })?;
        crate::migrate::refuse_if_moved(&conn, path)?;
        Ok(Ledger {
            conn,
            who: "inspect".into(),
            batch_actor: Cell::new(None),
        })
    }

    /// Opens (creating if needed) the ledger at `path`, sets and verifies WAL and
    /// `synchronous=FULL`, and brings the schema up to date.
    pub fn open(path: &Path) -> Result<Ledger> {
        let open_err = |source| LedgerError::Open {
            path: path.to_path_buf(),
            source,
        };
        create_private(plain_path(path)?);
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(open_err)?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(open_err)?;

        let mode: String = conn
            .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
            .map_err(open_err)?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(LedgerError::Pragma {
                path: path.to_path_buf(),
                pragma: "journal_mode=WAL",
                got: mode,
            });
        }
        conn.execute_batch("PRAGMA synchronous=FULL")
            .map_err(open_err)?;
        let sync: i64 = conn
            .query_row("PRAGMA synchronous", [], |r| r.get(0))
            .map_err(open_err)?;
        if sync != 2 {
            return Err(LedgerError::Pragma {
                path: path.to_path_buf(),
                pragma: "synchronous=FULL",
                got: sync.to_string(),
            });
        }
        // Before the schema is brought up to date: a moved ledger is not touched.
        crate::migrate::refuse_if_moved(&conn, path)?;
        migrate(&conn).map_err(open_err)?;
        Ok(Ledger {
            conn,
            who: "ledger".into(),
            batch_actor: Cell::new(None),
        })
    }

    /// The name the history gives to this connection's changes (`relay`, `resolve`, …).
    pub fn acting_as(mut self, who: &str) -> Ledger {
        self.who = who.to_string();
        self
    }

    /// Opens a group-commit transaction whose changes the history names after this
    /// connection (`who`): the actor row is written once for the batch, not once per
    /// statement. [`Ledger::end_batch`] must run before the COMMIT.
    pub fn begin_batch(&self) -> Result<()> {
        self.conn.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
        let row = self.set_actor(&self.who, None);
        if row.is_err() {
            let _ = self.conn.execute_batch("ROLLBACK");
        }
        self.batch_actor.set(Some(row?));
        Ok(())
    }

    /// Takes the batch's actor row out again, so that nothing committed names an actor a
    /// later change by hand could inherit. An error here means the batch must not commit.
    pub fn end_batch(&self) -> Result<()> {
        match self.batch_actor.take() {
            Some(row) => self.unset_actor(row),
            None => Ok(()),
        }
    }

    /// Forgets the batch's actor row after a ROLLBACK (which took it out already).
    pub fn abandon_batch(&self) {
        self.batch_actor.take();
    }

    fn set_actor(&self, who: &str, reason: Option<&str>) -> Result<i64> {
        self.conn
            .prepare_cached(ACTOR_IN)?
            .execute(params![who, reason])?;
        Ok(self.conn.last_insert_rowid())
    }

    fn unset_actor(&self, row: i64) -> Result<()> {
        self.conn.prepare_cached(ACTOR_OUT)?.execute([row])?;
        Ok(())
    }

    /// Runs one change `f` as `who` (default: this connection's name) for `reason`: the
    /// actor is set for the history triggers, in the caller's transaction (the relay's group
    /// commit, where the batch's actor row already names this connection) or in one of its
    /// own (the tools, autocommit). The triggers read the newest `tx_actor` row.
    fn as_actor<T>(
        &self,
        who: Option<&str>,
        reason: Option<&str>,
        f: impl FnOnce() -> Result<T>,
    ) -> Result<T> {
        let own = self.conn.is_autocommit();
        if !own && who.is_none() && reason.is_none() && self.batch_actor.get().is_some() {
            return f();
        }
        if own {
            self.conn.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
        }
        // The actor row goes out again even when `f` fails; `f`'s error comes first.
        let r = self
            .set_actor(who.unwrap_or(&self.who), reason)
            .and_then(|row| {
                let v = f();
                let out = self.unset_actor(row);
                v.and_then(|v| out.map(|()| v))
            });
        if own {
            let end = if r.is_ok() { "COMMIT" } else { "ROLLBACK" };
            if let Err(e) = self.conn.execute_batch(end) {
                let _ = self.conn.execute_batch("ROLLBACK");
                return Err(e.into());
            }
        }
        r
    }

    /// What this connection's durability rests on.
    pub fn durability(&self) -> Result<Durability> {
        Ok(Durability::Sqlite {
            journal_mode: self
                .conn
                .query_row("PRAGMA journal_mode", [], |r| r.get(0))?,
            synchronous: self
                .conn
                .query_row("PRAGMA synchronous", [], |r| r.get(0))?,
        })
    }

    /// Step 1 of the relay: the GUID is ours iff this inserts the row (attempt 1).
    pub fn claim_new(&self, guid: &str, tx_code: &str, request: &[u8]) -> Result<bool> {
        self.as_actor(None, None, || {
            let n = self
                .conn
                .prepare_cached(CLAIM_NEW)?
                .execute(params![guid, tx_code, request])?;
            Ok(n == 1)
        })
    }

    /// The relay's re-claim of a GUID whose earlier send provably never left, for the very
    /// request stored with it (the row was read before; this makes the read irrelevant).
    /// Returns the attempt claimed, if the row was ours to claim.
    pub fn reclaim_failed(&self, guid: &str, request: &[u8]) -> Result<Option<i64>> {
        self.claim_returning(RECLAIM_FAILED, params![guid, request])
    }

    /// reprocess's re-claim: the same move, but only for rows its selection rule admits, so
    /// that a row changed since it was listed (or listed by a buggy caller) is never resent.
    pub fn reclaim_for_resend(&self, guid: &str, max_attempts: i64) -> Result<Option<i64>> {
        self.claim_returning(RECLAIM_FOR_RESEND, params![guid, max_attempts])
    }

    /// A guarded UPDATE with `RETURNING attempts`: a row back means the claim was won (SQLite
    /// makes the whole change in the first step).
    fn claim_returning(&self, sql: &str, p: impl rusqlite::Params) -> Result<Option<i64>> {
        self.as_actor(None, None, || {
            Ok(self
                .conn
                .prepare_cached(sql)?
                .query_row(p, |r| r.get::<_, i64>(0))
                .optional()?)
        })
    }

    /// Makes `change` iff the row is still in its `from` state (and on its attempt, when it
    /// names one). Used for the relay's result (from SENT) and resolve's settlements (from
    /// UNKNOWN, or from SENT with --stale-sent).
    pub fn transition(&self, c: &Change) -> Result<bool> {
        self.as_actor(c.who.as_deref(), c.reason.as_deref(), || {
            let n = self.conn.prepare_cached(TRANSITION)?.execute(params![
                c.guid,
                c.from,
                c.to,
                c.code_str(),
                c.response,
                c.attempt,
                c.min_age_secs.map(|s| age_modifier(s, "seconds")),
            ])?;
            Ok(n == 1)
        })
    }

    /// The row for `guid`, if any.
    pub fn get(&self, guid: &str) -> Result<Option<Row>> {
        let sql = format!("SELECT {ROW_COLUMNS} FROM tx WHERE guid = ?1");
        Ok(self
            .conn
            .prepare_cached(&sql)?
            .query_row(params![guid], Row::from_sql)
            .optional()?)
    }

    /// resolve's selection: UNKNOWN rows (or, with `State::Sent`, orphaned SENT rows) whose
    /// last change is at least `min_age_secs` old, oldest first.
    pub fn select_aged(&self, state: State, min_age_secs: u64) -> Result<Vec<Row>> {
        let sql = format!(
            "SELECT {ROW_COLUMNS} FROM tx WHERE state = ?1 \
             AND updated_at <= datetime('now', ?2) ORDER BY updated_at, guid"
        );
        self.rows(&sql, params![state, age_modifier(min_age_secs, "seconds")])
    }

    /// resolve's selection with its backoff: rows as `select_aged` finds them, less those
    /// whose next inquiry is not due yet and those it has given up on (`max_inquiries`
    /// failures or more).
    pub fn select_due(
        &self,
        state: State,
        min_age_secs: u64,
        max_inquiries: u32,
    ) -> Result<Vec<Row>> {
        let sql = format!(
            "SELECT {TX_COLUMNS} FROM tx LEFT JOIN tx_inquiry i ON i.guid = tx.guid \
             WHERE tx.state = ?1 AND tx.updated_at <= datetime('now', ?2) \
             AND (i.guid IS NULL OR (i.failures < ?3 AND i.next_at <= datetime('now'))) \
             ORDER BY tx.updated_at, tx.guid"
        );
        self.rows(
            &sql,
            params![
                state,
                age_modifier(min_age_secs, "seconds"),
                i64::from(max_inquiries)
            ],
        )
    }

    /// One more failed inquiry about `guid`, and when the next one is due (one statement).
    pub fn record_inquiry_failure(
        &self,
        guid: &str,
        error: &str,
        min_age_secs: u64,
    ) -> Result<InquiryRecord> {
        Ok(self
            .conn
            .prepare_cached(RECORD_INQUIRY_FAILURE)?
            .query_row(
                params![
                    guid,
                    last_error_text(error),
                    backoff_base_secs(min_age_secs),
                    backoff_cap_secs(),
                    crate::store::INQUIRY_BACKOFF_MAX_DOUBLINGS
                ],
                InquiryRecord::from_sql,
            )?)
    }

    /// Forgets `guid`'s failed inquiries. True iff it had a record.
    pub fn clear_inquiry(&self, guid: &str) -> Result<bool> {
        Ok(self
            .conn
            .prepare_cached(CLEAR_INQUIRY)?
            .execute(params![guid])?
            == 1)
    }

    /// Forgets the failed inquiries of GUIDs no longer in doubt.
    pub fn prune_inquiries(&self) -> Result<usize> {
        Ok(self.conn.prepare_cached(PRUNE_INQUIRIES)?.execute([])?)
    }

    /// The GUIDs still in doubt with at least `max_inquiries` failed inquiries, by GUID.
    pub fn needs_operator(&self, max_inquiries: u32) -> Result<Vec<InquiryRecord>> {
        if !self.has_inquiry_table()? {
            return Ok(Vec::new());
        }
        let sql = format!(
            "SELECT {INQUIRY_COLUMNS} FROM tx_inquiry i JOIN tx ON tx.guid = i.guid \
             WHERE i.failures >= ?1 AND tx.state IN ('UNKNOWN', 'SENT') ORDER BY i.guid"
        );
        self.records(&sql, params![i64::from(max_inquiries)])
    }

    /// Every failure record, by GUID.
    pub fn inquiry_records(&self) -> Result<Vec<InquiryRecord>> {
        if !self.has_inquiry_table()? {
            return Ok(Vec::new());
        }
        let sql = format!("SELECT {INQUIRY_COLUMNS} FROM tx_inquiry i ORDER BY i.guid");
        self.records(&sql, [])
    }

    /// A ledger opened as it is (`inspect`) may predate the side table.
    fn has_inquiry_table(&self) -> Result<bool> {
        Ok(self
            .conn
            .prepare_cached(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'tx_inquiry'",
            )?
            .query_row([], |r| r.get::<_, i64>(0))?
            > 0)
    }

    fn records(&self, sql: &str, params: impl rusqlite::Params) -> Result<Vec<InquiryRecord>> {
        let mut stmt = self.conn.prepare_cached(sql)?;
        let rows = stmt.query_map(params, InquiryRecord::from_sql)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// reprocess's selection: only what the ledger proves was never sent, below the attempt
    /// cap, oldest first, at most `limit` rows.
    pub fn select_resendable(&self, max_attempts: i64, limit: Option<u64>) -> Result<Vec<Row>> {
        let sql = format!(
            "SELECT {ROW_COLUMNS} FROM tx WHERE state = 'FAILED' AND rsp_code = 'E902' \
             AND attempts < ?1 ORDER BY updated_at, guid LIMIT ?2"
        );
        let limit = limit.map_or(-1, |l| i64::try_from(l).unwrap_or(i64::MAX));
        self.rows(&sql, params![max_attempts, limit])
    }

    /// purge's selection, for --dry-run: DONE rows older than `days`.
    pub fn select_purgeable(&self, days: u64) -> Result<Vec<Row>> {
        let sql = format!(
            "SELECT {ROW_COLUMNS} FROM tx WHERE state = 'DONE' \
             AND updated_at < datetime('now', ?1) ORDER BY updated_at, guid"
        );
        self.rows(&sql, params![age_modifier(days, "days")])
    }

    /// Deletes at most `limit` DONE rows older than `days`, in one short transaction; no
    /// other state is ever deleted. Returns how many went.
    pub fn purge_chunk(&self, days: u64, limit: usize) -> Result<usize> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let reason = format!("retention {days} days");
        self.as_actor(None, Some(&reason), || {
            Ok(self
                .conn
                .prepare_cached(PURGE_CHUNK_SQL)?
                .execute(params![age_modifier(days, "days"), limit])?)
        })
    }

    /// The most recent DONE/0000 rows, newest first: `resolve`'s canary candidates.
    pub fn recent_bookings(&self, limit: usize) -> Result<Vec<Row>> {
        let sql = format!(
            "SELECT {ROW_COLUMNS} FROM tx WHERE state = 'DONE' AND rsp_code = '0000' \
             ORDER BY updated_at DESC, guid DESC LIMIT ?1"
        );
        self.rows(&sql, params![i64::try_from(limit).unwrap_or(i64::MAX)])
    }

    /// Every row, oldest change first (for `inspect`; ledgers are kept small by purge).
    pub fn all_rows(&self) -> Result<Vec<Row>> {
        let sql = format!("SELECT {ROW_COLUMNS} FROM tx ORDER BY updated_at, guid");
        self.rows(&sql, [])
    }

    /// The history of `guid`, oldest first.
    pub fn history(&self, guid: &str) -> Result<Vec<HistoryRow>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT id, guid, from_state, to_state, rsp_code, attempts, at, who, reason \
             FROM tx_history WHERE guid = ?1 ORDER BY id",
        )?;
        let rows = stmt.query_map(params![guid], |r| {
            Ok(HistoryRow {
                id: r.get(0)?,
                guid: r.get(1)?,
                from_state: r.get(2)?,
                to_state: r.get(3)?,
                rsp_code: lenient_text(r.get_ref(4)?),
                attempts: r.get_ref(5)?.as_i64().ok(),
                at: r.get(6)?,
                who: r.get(7)?,
                reason: r.get(8)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Adds `e` to its GUID's history, the `tx` row untouched (see `Evidence`).
    pub fn record_evidence(&self, e: &Evidence) -> Result<()> {
        self.conn
            .prepare_cached(RECORD_EVIDENCE)?
            .execute(params![e.guid, e.rsp_code, e.attempt, self.who, e.reason])?;
        Ok(())
    }

    /// Deletes at most `limit` history rows older than `days` of GUIDs whose row is gone or
    /// DONE past `tx_days`.
    pub fn purge_history_chunk(&self, days: u64, tx_days: u64, limit: usize) -> Result<usize> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        Ok(self
            .conn
            .prepare_cached(PURGE_HISTORY_CHUNK)?
            .execute(params![
                format!("-{days} days"),
                limit,
                format!("-{tx_days} days")
            ])?)
    }

    /// Row counts by state, for summaries and checks.
    pub fn count_by_state(&self) -> Result<Vec<(State, i64)>> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT state, count(*) FROM tx GROUP BY state ORDER BY state")?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Seconds since the oldest row in `state` last changed; `None` if there is none.
    pub fn oldest_age_secs(&self, state: State) -> Result<Option<f64>> {
        Ok(self
            .conn
            .prepare_cached(OLDEST_AGE)?
            .query_row(params![state], |r| r.get::<_, Option<f64>>(0))?)
    }

    /// `/healthz`'s write: the probe row inserted into `tx` as a claim is (its triggers,
    /// the history's among them, fire) and rolled back at once to a savepoint of its own, so
    /// that it works alone or inside the group commit's batch, whose other statements it
    /// leaves as they are; then the one `relay_health` row stamped (committed with the rest).
    /// An error that rolled the whole transaction back is returned as it is (the group commit
    /// then fails its batch).
    pub fn touch_health(&self) -> Result<()> {
        self.conn.execute_batch("SAVEPOINT health_probe")?;
        let probed = self.as_actor(None, None, || {
            self.conn
                .prepare_cached(HEALTH_PROBE)?
                .execute([HEALTH_PROBE_GUID])?;
            Ok(())
        });
        if self.conn.is_autocommit() {
            return probed;
        }
        let undone = self
            .conn
            .execute_batch("ROLLBACK TO health_probe; RELEASE health_probe");
        probed.and(undone.map_err(LedgerError::from))?;
        self.conn.prepare_cached(TOUCH_HEALTH)?.execute([])?;
        Ok(())
    }

    /// `/healthz`'s read: the `relay_health` row's stamp, if it was ever written.
    pub fn read_health(&self) -> Result<Option<String>> {
        Ok(self
            .conn
            .prepare_cached(READ_HEALTH)?
            .query_row([], |r| r.get(0))
            .optional()?)
    }

    fn rows(&self, sql: &str, params: impl rusqlite::Params) -> Result<Vec<Row>> {
        let mut stmt = self.conn.prepare_cached(sql)?;
        let rows = stmt.query_map(params, Row::from_sql)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// The raw connection, for tests and tools that inspect the file (never for transitions).
    pub fn connection(&self) -> &Connection {
        &self.conn
    }
}

/// A `datetime('now', ?)` modifier, bound as a parameter: no SQL is built from input.
fn age_modifier(n: u64, unit: &str) -> String {
    format!("-{n} {unit}")
}

/// `path`, refused if it is an SQLite URI (`file:...`): URI parameters such as `nolock=1`,
/// `immutable=1` or `vfs=` could quietly weaken how claims are arbitrated.
fn plain_path(path: &Path) -> Result<&Path> {
    if path.to_string_lossy().starts_with("file:") {
        return Err(LedgerError::NotAPath(path.display().to_string()));
    }
    Ok(path)
}

/// Creates a new ledger file readable by its owner only: it holds account numbers and
/// amounts. SQLite gives the -wal and -shm files the same mode. An existing file is left as
/// it is; any error here resurfaces, with a better message, when SQLite opens the path.
fn create_private(path: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        let _ = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path);
    }
    #[cfg(not(unix))]
    let _ = path;
}

/// Applies the schema when the file's `user_version` says it has not seen this version.
/// The schema is idempotent, so a file made by hand from schema.sql (version 0) is fine.
fn migrate(conn: &Connection) -> rusqlite::Result<()> {
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if version >= SCHEMA_VERSION {
        return Ok(());
    }
    conn.execute_batch(&format!(
        "BEGIN IMMEDIATE; {SCHEMA}; PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;"
    ))
    .inspect_err(|_| {
        let _ = conn.execute_batch("ROLLBACK");
    })
}

/// One connection, shared under a lock: the batch tools' and `inspect`'s store.
impl Store for Mutex<Ledger> {
    fn read(&self, guid: &str) -> Result<Option<Row>> {
        lock(self).get(guid)
    }
    fn claim_new(&self, guid: &str, tx_code: &str, request: &[u8]) -> Result<bool> {
        lock(self).claim_new(guid, tx_code, request)
    }
    fn reclaim_failed(&self, guid: &str, request: &[u8]) -> Result<Option<i64>> {
        lock(self).reclaim_failed(guid, request)
    }
    fn reclaim_for_resend(&self, guid: &str, max_attempts: i64) -> Result<Option<i64>> {
        lock(self).reclaim_for_resend(guid, max_attempts)
    }
    fn transition(&self, change: &Change) -> Result<bool> {
        lock(self).transition(change)
    }
    fn select_aged(&self, state: State, min_age_secs: u64) -> Result<Vec<Row>> {
        lock(self).select_aged(state, min_age_secs)
    }
    fn select_due(&self, state: State, min_age_secs: u64, max_inquiries: u32) -> Result<Vec<Row>> {
        lock(self).select_due(state, min_age_secs, max_inquiries)
    }
    fn record_inquiry_failure(
        &self,
        guid: &str,
        error: &str,
        min_age_secs: u64,
    ) -> Result<InquiryRecord> {
        lock(self).record_inquiry_failure(guid, error, min_age_secs)
    }
    fn clear_inquiry(&self, guid: &str) -> Result<bool> {
        lock(self).clear_inquiry(guid)
    }
    fn prune_inquiries(&self) -> Result<usize> {
        lock(self).prune_inquiries()
    }
    fn needs_operator(&self, max_inquiries: u32) -> Result<Vec<InquiryRecord>> {
        lock(self).needs_operator(max_inquiries)
    }
    fn inquiry_records(&self) -> Result<Vec<InquiryRecord>> {
        lock(self).inquiry_records()
    }
    fn select_resendable(&self, max_attempts: i64, limit: Option<u64>) -> Result<Vec<Row>> {
        lock(self).select_resendable(max_attempts, limit)
    }
    fn select_purgeable(&self, days: u64) -> Result<Vec<Row>> {
        lock(self).select_purgeable(days)
    }
    fn purge_chunk(&self, days: u64, limit: usize) -> Result<usize> {
        lock(self).purge_chunk(days, limit)
    }
    fn recent_bookings(&self, limit: usize) -> Result<Vec<Row>> {
        lock(self).recent_bookings(limit)
    }
    fn all_rows(&self) -> Result<Vec<Row>> {
        lock(self).all_rows()
    }
    fn count_by_state(&self) -> Result<Vec<(State, i64)>> {
        lock(self).count_by_state()
    }
    fn history(&self, guid: &str) -> Result<Vec<HistoryRow>> {
        lock(self).history(guid)
    }
    fn record_evidence(&self, e: &Evidence) -> Result<()> {
        lock(self).record_evidence(e)
    }
    fn purge_history_chunk(&self, days: u64, tx_days: u64, limit: usize) -> Result<usize> {
        lock(self).purge_history_chunk(days, tx_days, limit)
    }
    fn oldest_age_secs(&self, state: State) -> Result<Option<f64>> {
        lock(self).oldest_age_secs(state)
    }
    fn health_round_trip(&self) -> Result<()> {
        let l = lock(self);
        l.touch_health()?;
        health_read_back(l.read_health()?)
    }
    fn durability(&self) -> Result<Vec<Durability>> {
        Ok(vec![lock(self).durability()?])
    }
}

/// The read half of the health round trip: the row the write just stamped must be there.
pub(crate) fn health_read_back(at: Option<String>) -> Result<()> {
    match at {
        Some(_) => Ok(()),
        None => Err(LedgerError::Writer(
            "the health row written was not read back".into(),
        )),
    }
}

fn lock(l: &Mutex<Ledger>) -> std::sync::MutexGuard<'_, Ledger> {
    l.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp() -> (tempfile::TempDir, Ledger) {
        let dir = tempfile::tempdir().unwrap();
        let l = Ledger::open(&dir.path().join("l.db")).unwrap();
        (dir, l)
    }

    #[test]
    fn an_sqlite_uri_is_refused_as_a_ledger_path() {
        let dir = tempfile::tempdir().unwrap();
        for db in [
            "file:l.db?nolock=1",
            "file:l.db?immutable=1",
            "file:l.db?vfs=unix-none",
        ] {
            let p = dir.path().join(db);
            // Relative, as an operator would type it; joined paths keep the prefix.
            for path in [Path::new(db), p.as_path()] {
                let e = Ledger::open(path).err();
                if path.is_relative() {
                    assert!(matches!(e, Some(LedgerError::NotAPath(_))), "{db}: {e:?}");
                }
            }
            assert!(matches!(
                Ledger::open_existing(Path::new(db)).err(),
                Some(LedgerError::NotAPath(_))
            ));
        }
    }

    #[test]
    fn read_only_open_changes_nothing_in_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("hand.db");
        {
            // A ledger made by hand from the contract's columns: rollback journal, no index,
            // user_version 0.
            let c = Connection::open(&p).unwrap();
            c.execute_batch(
                "CREATE TABLE tx (guid TEXT PRIMARY KEY, tx_code TEXT, state TEXT NOT NULL,
                 rsp_code TEXT, request BLOB, response BLOB, attempts INTEGER NOT NULL DEFAULT 0,
                 updated_at TEXT NOT NULL DEFAULT (datetime('now')));
                 INSERT INTO tx (guid, state) VALUES ('H', 'UNKNOWN');",
            )
            .unwrap();
        }
        let before = std::fs::read(&p).unwrap();
        let l = Ledger::open_read_only(&p).unwrap();
        assert_eq!(l.get("H").unwrap().unwrap().state, State::Unknown);
        assert_eq!(l.count_by_state().unwrap(), vec![(State::Unknown, 1)]);
        assert!(l.claim_new("G", "TRNF", b"x").is_err(), "read-only");
        drop(l);
        assert_eq!(std::fs::read(&p).unwrap(), before, "file unchanged");
        assert!(
            !dir.path().join("hand.db-wal").exists(),
            "not switched to WAL"
        );
    }

    /// The batch tools (resolve, reprocess, purge) open the ledger with `open_existing`: their
    /// writes must be as durable as the relay's.
    #[test]
    fn every_batch_tool_connection_is_wal_and_full() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("l.db");
        drop(Ledger::open(&p).unwrap());
        let d = Ledger::open_existing(&p).unwrap().durability().unwrap();
        assert!(d.is_durable(), "{d:?}");
        assert!(
            matches!(d, Durability::Sqlite { synchronous: 2, .. }),
            "FULL, not NORMAL: {d:?}"
        );
    }

    #[test]
    fn state_round_trips() {
        for s in State::ALL {
            assert_eq!(s.as_str().parse::<State>().unwrap(), s);
        }
        assert!("DONEX".parse::<State>().is_err());
    }

    #[test]
    fn a_ledger_of_schema_version_1_gets_the_health_table() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("l.db");
        Ledger::open(&p)
            .unwrap()
            .connection()
            .execute_batch("DROP TABLE relay_health; PRAGMA user_version = 1;")
            .unwrap();
        let l = Ledger::open(&p).unwrap();
        l.touch_health().unwrap();
        assert!(l.read_health().unwrap().is_some());
    }

    #[test]
    fn open_sets_wal_full_and_is_idempotent() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("l.db");
        let a = Ledger::open(&p).unwrap();
        let b = Ledger::open(&p).unwrap();
        for l in [&a, &b] {
            let mode: String = l
                .connection()
                .query_row("PRAGMA journal_mode", [], |r| r.get(0))
                .unwrap();
            assert_eq!(mode, "wal");
        }
        // The schema text itself is harmless twice.
        a.connection().execute_batch(SCHEMA).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&p).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }

    #[test]
    fn hand_made_rows_read_leniently() {
        let (_d, l) = temp();
        l.connection()
            .execute_batch(
                "INSERT INTO tx (guid, state, updated_at) VALUES ('H','DONE','2020-01-01 00:00:00');
                 INSERT INTO tx (guid, state, request, attempts) VALUES ('T','FAILED','text', 'x');",
            )
            .unwrap();
        let h = l.get("H").unwrap().unwrap();
        assert_eq!((h.request, h.response, h.rsp_code), (None, None, None));
        let t = l.get("T").unwrap().unwrap();
        assert_eq!(t.request.as_deref(), Some(&b"text"[..]));
        assert_eq!(t.attempts, None);
    }
}
