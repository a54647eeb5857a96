//! The one interface to the ledger, whatever holds it: everything the relay and the batch
//! tools need (claims, guarded transitions, selections, counts, purge). Implemented for
//! SQLite (`sqlite`: one connection under a lock, for the tools; `group_commit`: the relay's
//! writer thread and read pool) and PostgreSQL (`postgres`: a pool of connections, each
//! operation with a client-side deadline). The transfer path and the batch tools are written
//! once against it.
//!
//! Every change is ONE guarded statement whose row count decides; no implementation reads a
//! row to decide a write.

use crate::error::Result;
use crate::state::{Change, HistoryRow, Row, State};

/// purge deletes at most this many rows per transaction, so that the write lock is never
/// held long enough for a claim or a result to wait out its busy timeout.
pub const PURGE_CHUNK: usize = 1000;

pub trait Store: Send + Sync {
    /// The row for `guid`, if any.
    fn read(&self, guid: &str) -> Result<Option<Row>>;
    /// The relay's claim: true iff this inserted the row (`SENT`, attempt 1).
    fn claim_new(&self, guid: &str, tx_code: &str, request: &[u8]) -> Result<bool>;
    /// The relay's re-claim of a `FAILED` row for the very request stored with it; the
    /// attempt the caller now owns, if the guarded UPDATE changed the row.
    fn reclaim_failed(&self, guid: &str, request: &[u8]) -> Result<Option<i64>>;
    /// reprocess's re-claim: only a `FAILED`/`E902` row below `max_attempts`.
    fn reclaim_for_resend(&self, guid: &str, max_attempts: i64) -> Result<Option<i64>>;
    /// Makes `change` iff the row is still in its `from` state (and on its attempt).
    fn transition(&self, change: &Change) -> Result<bool>;
    /// Rows in `state` unchanged for at least `min_age_secs`, oldest first.
    fn select_aged(&self, state: State, min_age_secs: u64) -> Result<Vec<Row>>;
    /// `FAILED`/`E902` rows below `max_attempts`, oldest first, at most `limit`.
    fn select_resendable(&self, max_attempts: i64, limit: Option<u64>) -> Result<Vec<Row>>;
    /// `DONE` rows older than `days`, oldest first.
    fn select_purgeable(&self, days: u64) -> Result<Vec<Row>>;
    /// Deletes at most `limit` `DONE` rows older than `days` in one short transaction.
    fn purge_chunk(&self, days: u64, limit: usize) -> Result<usize>;
    /// The newest `DONE`/`0000` rows, newest first (resolve's canary).
    fn recent_bookings(&self, limit: usize) -> Result<Vec<Row>>;
    /// Every row, oldest change first.
    fn all_rows(&self) -> Result<Vec<Row>>;
    /// Row counts by state.
    fn count_by_state(&self) -> Result<Vec<(State, i64)>>;
    /// The history of `guid`, oldest change first (it outlives the row).
    fn history(&self, guid: &str) -> Result<Vec<HistoryRow>>;
    /// Deletes at most `limit` history rows older than `days` (its own retention).
    fn purge_history_chunk(&self, days: u64, limit: usize) -> Result<usize>;
    /// Seconds since the oldest row in `state` last changed (`None`: no such row); for the
    /// relay's metrics.
    fn oldest_age_secs(&self, state: State) -> Result<Option<f64>>;
    /// The relay's `/healthz`: a write through the path claims and results take (the group
    /// commit on SQLite), then a read through the path requests read from, both on the
    /// `relay_health` side table: never on a `tx` row.
    fn health_round_trip(&self) -> Result<()>;
    /// The durability settings of every connection this store writes or reads with.
    fn durability(&self) -> Result<Vec<Durability>>;
    /// Whether the relay should try the claim before reading the row: cheaper where a write
    /// that finds its row costs nothing (PostgreSQL), dearer where every write queues for
    /// one lock (SQLite).
    fn claims_first(&self) -> bool {
        false
    }
}

/// What one connection's durability rests on, as its database reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Durability {
    Sqlite {
        journal_mode: String,
        /// `PRAGMA synchronous`: 2 is FULL.
        synchronous: i64,
    },
    Postgres {
        synchronous_commit: String,
    },
}

impl Durability {
    /// A commit is on disk (and on a synchronous standby, if one is configured) before it
    /// returns: SQLite in WAL mode with `synchronous=FULL`; PostgreSQL with
    /// `synchronous_commit` anything but `off`.
    pub fn is_durable(&self) -> bool {
        match self {
            Durability::Sqlite {
                journal_mode,
                synchronous,
            } => journal_mode.eq_ignore_ascii_case("wal") && *synchronous >= 2,
            Durability::Postgres { synchronous_commit } => {
                DURABLE_COMMIT.contains(&synchronous_commit.as_str())
            }
        }
    }
}

/// The `synchronous_commit` values that flush the commit to disk before it returns.
pub const DURABLE_COMMIT: [&str; 4] = ["on", "remote_apply", "remote_write", "local"];
