//! The ledger: schema, states and every state change. All SQL of the project lives here.
//!
//! Every transition is ONE statement whose WHERE clause names the state it leaves; its row
//! count says whether it happened. Nothing here reads a row to decide a write: two threads
//! (or two processes) racing for the same GUID are arbitrated by SQLite, not by us.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Mutex;
use std::time::Duration;

use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, ToSqlOutput, ValueRef};
use rusqlite::{Connection, OpenFlags, OptionalExtension, ToSql, params};

/// The schema file at the repository root, built into every binary.
pub const SCHEMA: &str = include_str!("../../../schema.sql");

/// Bumped whenever `SCHEMA` changes; `PRAGMA user_version` records what a file has seen.
const SCHEMA_VERSION: i64 = 1;

// The transitions. Each names, in its WHERE, the state it leaves; its row count decides.
const CLAIM_NEW: &str = "\
    INSERT INTO tx (guid, tx_code, state, request, attempts, updated_at) \
    VALUES (?1, ?2, 'SENT', ?3, 1, datetime('now')) \
    ON CONFLICT (guid) DO NOTHING";
const RECLAIM_FAILED: &str = "\
    UPDATE tx SET state = 'SENT', attempts = attempts + 1, updated_at = datetime('now') \
    WHERE guid = ?1 AND state = 'FAILED' AND request = ?2";
const RECLAIM_FOR_RESEND: &str = "\
    UPDATE tx SET state = 'SENT', attempts = attempts + 1, updated_at = datetime('now') \
    WHERE guid = ?1 AND state = 'FAILED' AND rsp_code = 'E902' AND attempts < ?2";
const TRANSITION: &str = "\
    UPDATE tx SET state = ?3, rsp_code = ?4, response = ?5, updated_at = datetime('now') \
    WHERE guid = ?1 AND state = ?2";

/// How long a statement waits for another writer before giving up (then: E905).
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// The life of a GUID in the ledger. `RECEIVED` is never written by our tools but is part of
/// the contract's schema (another tool may insert it), and is treated like `SENT`: in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum State {
    Received,
    Sent,
    Done,
    Unknown,
    Failed,
}

impl State {
    pub const ALL: [State; 5] = [
        State::Received,
        State::Sent,
        State::Done,
        State::Unknown,
        State::Failed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            State::Received => "RECEIVED",
            State::Sent => "SENT",
            State::Done => "DONE",
            State::Unknown => "UNKNOWN",
            State::Failed => "FAILED",
        }
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for State {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        State::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| format!("unknown ledger state {s:?}"))
    }
}

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

/// Errors of the ledger, typed so that callers can tell "cannot open" from "statement failed".
#[derive(Debug)]
pub enum LedgerError {
    /// The file could not be created, opened or prepared.
    Open {
        path: PathBuf,
        source: rusqlite::Error,
    },
    /// A batch tool was pointed at a file that does not exist (a mistyped --db would
    /// otherwise create an empty ledger and report that nothing needed doing).
    Missing(PathBuf),
    /// A pragma the durability of claims depends on did not take effect.
    Pragma {
        path: PathBuf,
        pragma: &'static str,
        got: String,
    },
    /// A statement failed (busy past the timeout, disk full, read-only file, ...).
    Sql(rusqlite::Error),
    /// A write gathered by the `Writer` was not committed.
    Writer(String),
}

impl fmt::Display for LedgerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LedgerError::Open { path, source } => {
                write!(f, "cannot open ledger {}: {source}", path.display())
            }
            LedgerError::Pragma { path, pragma, got } => write!(
                f,
                "ledger {}: cannot set {pragma} (SQLite answered {got:?})",
                path.display()
            ),
            LedgerError::Missing(path) => write!(
                f,
                "ledger {} does not exist (the relay creates it; check --db)",
                path.display()
            ),
            LedgerError::Sql(e) => write!(f, "ledger statement failed: {e}"),
            LedgerError::Writer(msg) => write!(f, "ledger write failed: {msg}"),
        }
    }
}

impl std::error::Error for LedgerError {
    /// None: `Display` already says the cause, and error chains printed in one line (anyhow's
    /// `{:#}`) would say it twice.
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        None
    }
}

impl From<rusqlite::Error> for LedgerError {
    fn from(e: rusqlite::Error) -> Self {
        LedgerError::Sql(e)
    }
}

pub type Result<T> = std::result::Result<T, LedgerError>;

/// One ledger row as stored. Every column but guid, state and updated_at may be NULL in a
/// row inserted by hand, so they are `Option`s, and values of an unexpected SQL type are
/// read leniently (text as bytes, bytes as text) rather than failing the whole query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub guid: String,
    pub tx_code: Option<String>,
    pub state: State,
    pub rsp_code: Option<String>,
    pub request: Option<Vec<u8>>,
    pub response: Option<Vec<u8>>,
    pub attempts: Option<i64>,
    pub updated_at: String,
}

const ROW_COLUMNS: &str = "guid, tx_code, state, rsp_code, request, response, attempts, updated_at";

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

/// One SQLite connection to the ledger, configured for durable claims.
/// A `Ledger` is used by one thread at a time (it is `Send`, not `Sync`).
pub struct Ledger {
    conn: Connection,
}

impl Ledger {
    /// Opens a ledger that must already exist: for the tools that work on the relay's ledger.
    pub fn open_existing(path: &Path) -> Result<Ledger> {
        if !path.exists() {
            return Err(LedgerError::Missing(path.to_path_buf()));
        }
        Ledger::open(path)
    }

    /// Opens (creating if needed) the ledger at `path`, sets and verifies WAL and
    /// `synchronous=FULL`, and brings the schema up to date.
    pub fn open(path: &Path) -> Result<Ledger> {
        let open_err = |source| LedgerError::Open {
            path: path.to_path_buf(),
            source,
        };
        create_private(path);
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX
                | OpenFlags::SQLITE_OPEN_URI,
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
        migrate(&conn).map_err(open_err)?;
        Ok(Ledger { conn })
    }

    /// Step 1 of the relay: the GUID is ours iff this inserts the row. Durable on return.
    pub fn claim_new(&self, guid: &str, tx_code: &str, request: &[u8]) -> Result<bool> {
        let n = self
            .conn
            .prepare_cached(CLAIM_NEW)?
            .execute(params![guid, tx_code, request])?;
        Ok(n == 1)
    }

    /// The relay's re-claim of a GUID whose earlier send provably never left, for the very
    /// request stored with it (the row was read before; this makes the read irrelevant).
    pub fn reclaim_failed(&self, guid: &str, request: &[u8]) -> Result<bool> {
        let n = self
            .conn
            .prepare_cached(RECLAIM_FAILED)?
            .execute(params![guid, request])?;
        Ok(n == 1)
    }

    /// reprocess's re-claim: the same move, but only for rows its selection rule admits, so
    /// that a row changed since it was listed (or listed by a buggy caller) is never resent.
    pub fn reclaim_for_resend(&self, guid: &str, max_attempts: i64) -> Result<bool> {
        let n = self
            .conn
            .prepare_cached(RECLAIM_FOR_RESEND)?
            .execute(params![guid, max_attempts])?;
        Ok(n == 1)
    }

    /// Moves `guid` from `from` to `to` with its result code and reply, iff it is still in
    /// `from`. Used for the relay's result (from SENT) and resolve's settlements (from UNKNOWN,
    /// or from SENT with --stale-sent).
    pub fn transition(
        &self,
        guid: &str,
        from: State,
        to: State,
        rsp_code: &str,
        response: &[u8],
    ) -> Result<bool> {
        let n = self
            .conn
            .prepare_cached(TRANSITION)?
            .execute(params![guid, from, to, rsp_code, response])?;
        Ok(n == 1)
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

    /// Deletes DONE rows older than `days`; no other state is ever deleted.
    pub fn purge(&self, days: u64) -> Result<usize> {
        Ok(self.conn.execute(
            "DELETE FROM tx WHERE state = 'DONE' AND updated_at < datetime('now', ?1)",
            params![age_modifier(days, "days")],
        )?)
    }

    /// Every row, oldest change first (for `inspect`; ledgers are kept small by purge).
    pub fn all_rows(&self) -> Result<Vec<Row>> {
        let sql = format!("SELECT {ROW_COLUMNS} FROM tx ORDER BY updated_at, guid");
        self.rows(&sql, [])
    }

    /// Row counts by state, for summaries and checks.
    pub fn count_by_state(&self) -> Result<Vec<(State, i64)>> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT state, count(*) FROM tx GROUP BY state ORDER BY state")?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
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

/// What handling a transfer needs of the ledger: reading a GUID's row and the three guarded
/// writes. `Ledger` does it all on one connection (the batch tools); `GroupCommit` reads on
/// pooled connections and gathers writes of many threads into one commit (the relay).
pub trait Store {
    fn read(&self, guid: &str) -> Result<Option<Row>>;
    fn claim_new(&self, guid: &str, tx_code: &str, request: &[u8]) -> Result<bool>;
    fn reclaim_failed(&self, guid: &str, request: &[u8]) -> Result<bool>;
    fn transition(
        &self,
        guid: &str,
        from: State,
        to: State,
        rsp_code: &str,
        response: &[u8],
    ) -> Result<bool>;
}

impl Store for Ledger {
    fn read(&self, guid: &str) -> Result<Option<Row>> {
        self.get(guid)
    }
    fn claim_new(&self, guid: &str, tx_code: &str, request: &[u8]) -> Result<bool> {
        Ledger::claim_new(self, guid, tx_code, request)
    }
    fn reclaim_failed(&self, guid: &str, request: &[u8]) -> Result<bool> {
        Ledger::reclaim_failed(self, guid, request)
    }
    fn transition(
        &self,
        guid: &str,
        from: State,
        to: State,
        rsp_code: &str,
        response: &[u8],
    ) -> Result<bool> {
        Ledger::transition(self, guid, from, to, rsp_code, response)
    }
}

/// One write waiting for the writer thread.
enum Op {
    Claim {
        guid: String,
        tx_code: String,
        request: Vec<u8>,
    },
    ReclaimFailed {
        guid: String,
        request: Vec<u8>,
    },
    Transition {
        guid: String,
        from: State,
        to: State,
        rsp_code: String,
        response: Vec<u8>,
    },
}

impl Op {
    fn run(&self, l: &Ledger) -> Result<bool> {
        match self {
            Op::Claim {
                guid,
                tx_code,
                request,
            } => l.claim_new(guid, tx_code, request),
            Op::ReclaimFailed { guid, request } => l.reclaim_failed(guid, request),
            Op::Transition {
                guid,
                from,
                to,
                rsp_code,
                response,
            } => l.transition(guid, *from, *to, rsp_code, response),
        }
    }
}

type Reply = std::sync::mpsc::SyncSender<Result<bool>>;

/// Most statements one commit carries; bounds how long the first waiter waits for the rest.
const MAX_BATCH: usize = 1024;

/// Group commit: one thread owns the ledger's write connection and runs the writes of many
/// connection threads in one transaction and one fsync. Each write is still its own guarded
/// statement whose row count decides, and each waiting thread is released only after the
/// commit that holds its statement. Batches form by themselves: whatever queued while the
/// previous commit was syncing goes into the next one.
pub struct Writer {
    queue: std::sync::mpsc::Sender<(Op, Reply)>,
}

impl Writer {
    /// Opens the write connection and starts the writer thread; it ends when the `Writer`
    /// is dropped.
    pub fn start(path: &Path) -> Result<Writer> {
        let ledger = Ledger::open(path)?;
        let (tx, rx) = std::sync::mpsc::channel::<(Op, Reply)>();
        std::thread::Builder::new()
            .name("ledger-writer".into())
            .spawn(move || {
                while let Ok(first) = rx.recv() {
                    let mut batch = vec![first];
                    while batch.len() < MAX_BATCH {
                        match rx.try_recv() {
                            Ok(job) => batch.push(job),
                            Err(_) => break,
                        }
                    }
                    let ops: Vec<&Op> = batch.iter().map(|(op, _)| op).collect();
                    let results = run_batch(&ledger, &ops);
                    for ((_, reply), result) in batch.into_iter().zip(results) {
                        let _ = reply.send(result);
                    }
                }
            })
            .map_err(|e| LedgerError::Writer(format!("cannot start the writer thread: {e}")))?;
        Ok(Writer { queue: tx })
    }

    fn submit(&self, op: Op) -> Result<bool> {
        let (reply, answer) = std::sync::mpsc::sync_channel(1);
        if self.queue.send((op, reply)).is_err() {
            return Err(writer_gone());
        }
        answer.recv().unwrap_or_else(|_| Err(writer_gone()))
    }
}

fn writer_gone() -> LedgerError {
    LedgerError::Writer("the writer thread has stopped".into())
}

/// Runs `ops` in one transaction. A statement's own error fails only that statement, unless
/// SQLite rolled the whole transaction back (busy, I/O, full disk): then, as when the commit
/// fails, every statement of the batch fails, since none of them is durable.
fn run_batch(l: &Ledger, ops: &[&Op]) -> Vec<Result<bool>> {
    let conn = l.connection();
    let all_fail = |e: &dyn fmt::Display| {
        let msg = format!("transaction not committed: {e}");
        ops.iter()
            .map(|_| Err(LedgerError::Writer(msg.clone())))
            .collect()
    };
    let run = |sql| conn.prepare_cached(sql).and_then(|mut st| st.execute([]));
    if let Err(e) = run("BEGIN IMMEDIATE") {
        return all_fail(&e);
    }
    let mut results = Vec::with_capacity(ops.len());
    for op in ops {
        let r = op.run(l);
        if let Err(e) = &r
            && conn.is_autocommit()
        {
            return all_fail(e);
        }
        results.push(r);
    }
    if let Err(e) = run("COMMIT") {
        let _ = conn.execute_batch("ROLLBACK");
        return all_fail(&e);
    }
    results
}

/// The relay's store: reads never queue behind writes, writes share commits.
pub struct GroupCommit {
    writer: Writer,
    reads: Pool,
}

impl GroupCommit {
    pub fn open(path: &Path) -> Result<GroupCommit> {
        Ok(GroupCommit {
            reads: Pool::open(path)?,
            writer: Writer::start(path)?,
        })
    }
}

impl Store for GroupCommit {
    fn read(&self, guid: &str) -> Result<Option<Row>> {
        self.reads.get()?.get(guid)
    }
    fn claim_new(&self, guid: &str, tx_code: &str, request: &[u8]) -> Result<bool> {
        self.writer.submit(Op::Claim {
            guid: guid.to_string(),
            tx_code: tx_code.to_string(),
            request: request.to_vec(),
        })
    }
    fn reclaim_failed(&self, guid: &str, request: &[u8]) -> Result<bool> {
        self.writer.submit(Op::ReclaimFailed {
            guid: guid.to_string(),
            request: request.to_vec(),
        })
    }
    fn transition(
        &self,
        guid: &str,
        from: State,
        to: State,
        rsp_code: &str,
        response: &[u8],
    ) -> Result<bool> {
        self.writer.submit(Op::Transition {
            guid: guid.to_string(),
            from,
            to,
            rsp_code: rsp_code.to_string(),
            response: response.to_vec(),
        })
    }
}

/// Ledger connections shared by the relay's connection threads: each request borrows one
/// and gives it back, so a thousand idle channel connections do not hold a thousand files.
pub struct Pool {
    path: PathBuf,
    idle: Mutex<Vec<Ledger>>,
}

impl Pool {
    /// Opens one connection at once, so that a bad path or pragma fails at start-up.
    pub fn open(path: &Path) -> Result<Pool> {
        let first = Ledger::open(path)?;
        Ok(Pool {
            path: path.to_path_buf(),
            idle: Mutex::new(vec![first]),
        })
    }

    pub fn get(&self) -> Result<Pooled<'_>> {
        let idle = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let ledger = match idle {
            Some(l) => l,
            None => Ledger::open(&self.path)?,
        };
        Ok(Pooled {
            pool: self,
            ledger: Some(ledger),
        })
    }
}

/// A borrowed connection; returns to the pool when dropped.
pub struct Pooled<'a> {
    pool: &'a Pool,
    ledger: Option<Ledger>,
}

impl std::ops::Deref for Pooled<'_> {
    type Target = Ledger;
    fn deref(&self) -> &Ledger {
        self.ledger.as_ref().expect("present until drop")
    }
}

impl Drop for Pooled<'_> {
    fn drop(&mut self) {
        if let Some(l) = self.ledger.take() {
            self.pool
                .idle
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(l);
        }
    }
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
    fn state_round_trips() {
        for s in State::ALL {
            assert_eq!(s.as_str().parse::<State>().unwrap(), s);
        }
        assert!("DONEX".parse::<State>().is_err());
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
    fn claim_once_then_transitions_are_guarded() {
        let (_d, l) = temp();
        assert!(l.claim_new("G1", "TRNF", b"req").unwrap());
        assert!(!l.claim_new("G1", "TRNF", b"req").unwrap());
        assert!(
            !l.reclaim_failed("G1", b"req").unwrap(),
            "SENT is not FAILED"
        );
        assert!(
            l.transition("G1", State::Sent, State::Failed, "E902", b"r")
                .unwrap()
        );
        assert!(
            !l.transition("G1", State::Sent, State::Done, "0000", b"x")
                .unwrap(),
            "left SENT already"
        );
        assert!(
            !l.reclaim_failed("G1", b"other").unwrap(),
            "another request"
        );
        assert!(l.reclaim_failed("G1", b"req").unwrap());
        assert!(!l.reclaim_failed("G1", b"req").unwrap());
        let row = l.get("G1").unwrap().unwrap();
        assert_eq!(row.state, State::Sent);
        assert_eq!(row.attempts, Some(2));
        assert_eq!(row.request.as_deref(), Some(&b"req"[..]));
    }

    #[test]
    fn reclaim_for_resend_checks_code_and_attempts() {
        let (_d, l) = temp();
        l.connection()
            .execute_batch(
                "INSERT INTO tx (guid, state, rsp_code, attempts) VALUES
                 ('A','FAILED','E902',1), ('B','FAILED','E901',1), ('C','FAILED','E902',3),
                 ('D','UNKNOWN','E902',1);",
            )
            .unwrap();
        assert!(l.reclaim_for_resend("A", 3).unwrap());
        assert!(!l.reclaim_for_resend("B", 3).unwrap());
        assert!(!l.reclaim_for_resend("C", 3).unwrap());
        assert!(!l.reclaim_for_resend("D", 3).unwrap());
    }

    #[test]
    fn selections_follow_the_contract() {
        let (_d, l) = temp();
        l.connection()
            .execute_batch(
                "INSERT INTO tx (guid, state, rsp_code, attempts, updated_at) VALUES
                 ('U-old','UNKNOWN','E901',1, datetime('now','-120 seconds')),
                 ('U-new','UNKNOWN','E901',1, datetime('now')),
                 ('S-old','SENT',NULL,1, datetime('now','-120 seconds')),
                 ('F-ok','FAILED','E902',1, datetime('now','-1 days')),
                 ('F-max','FAILED','E902',3, datetime('now','-1 days')),
                 ('F-other','FAILED','E901',1, datetime('now','-1 days')),
                 ('D-old','DONE','0000',1, datetime('now','-10 days')),
                 ('D-new','DONE','0000',1, datetime('now','-1 days')),
                 ('U-ancient','UNKNOWN','E901',1, datetime('now','-100 days')),
                 ('F-ancient','FAILED','E902',9, datetime('now','-100 days'));",
            )
            .unwrap();
        let guids = |rows: Vec<Row>| rows.into_iter().map(|r| r.guid).collect::<Vec<_>>();
        assert_eq!(
            guids(l.select_aged(State::Unknown, 60).unwrap()),
            ["U-ancient", "U-old"]
        );
        assert_eq!(guids(l.select_aged(State::Sent, 60).unwrap()), ["S-old"]);
        assert_eq!(guids(l.select_resendable(3, None).unwrap()), ["F-ok"]);
        assert_eq!(
            guids(l.select_resendable(3, Some(0)).unwrap()),
            Vec::<String>::new()
        );
        assert_eq!(guids(l.select_purgeable(7).unwrap()), ["D-old"]);
        assert_eq!(l.purge(7).unwrap(), 1);
        assert_eq!(l.purge(7).unwrap(), 0);
        assert!(l.get("U-ancient").unwrap().is_some());
        assert!(l.get("F-ancient").unwrap().is_some());
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
