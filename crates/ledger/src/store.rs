//! The one interface to the ledger, whatever holds it: everything the relay and the batch
//! tools need (claims, guarded transitions, selections, counts, purge). Implemented for
//! SQLite (`sqlite`, once over whatever holds its connections: one connection under a lock,
//! for the tools; `group_commit`: the relay's writer thread and read pool) and PostgreSQL
//! (`postgres`: a pool of connections, each operation with a client-side deadline). The
//! transfer path and the batch tools are written once against it.
//!
//! Every change is ONE guarded statement whose row count decides; no implementation reads a
//! row to decide a write.

use std::time::Duration;

use serde::Serialize;

use crate::error::{LedgerError, Result};
use crate::page::{Counted, Cursor, Page, PageQuery, page_of};
use crate::recovery::{Booked, LedgerEvent, Recovery};
use crate::settle_request::{Decided, Listed, NewRequest, SettleRequest, Undecided};
use crate::state::{Change, Evidence, HistoryRow, Row, State};

/// The GUID of `/healthz`'s probe row: spaces and a slash, so no channel can ever send it
/// (CONTRACT §2: 1–36 of `[0-9A-Za-z._-]`; §9's Idempotency-Key obeys the same rule). The
/// row is inserted and rolled back in the same transaction, never committed.
pub const HEALTH_PROBE_GUID: &str = "txrelay /healthz probe";

/// purge deletes at most this many rows per transaction, so that the write lock is never
/// held long enough for a claim or a result to wait out its busy timeout.
pub const PURGE_CHUNK: usize = 1000;

/// After this many failed inquiries about one GUID, resolve stops asking and leaves it to an
/// operator (`resolve --max-inquiries`, `inspect --max-inquiries`).
pub const DEFAULT_MAX_INQUIRIES: u32 = 20;

/// reprocess's usual `--max-attempts` (its wrapper's default): a FAILED/E902 row with this
/// many attempts is left to an operator (the relay's gauge and `inspect` count it so).
pub const DEFAULT_MAX_ATTEMPTS: i64 = 3;

/// The longest wait between two inquiries about one GUID. After its n-th failed inquiry a
/// GUID is not asked about again for `min(min_age × 2^(n-1), INQUIRY_BACKOFF_CAP)`, where
/// `min_age` is the `--min-age` of the run that recorded the failure.
pub const INQUIRY_BACKOFF_CAP: Duration = Duration::from_secs(3600);

/// The longest doubling exponent the backoff computes with (the cap is reached long before:
/// 1 s × 2^20 is 12 days), so that the arithmetic can never overflow.
pub const INQUIRY_BACKOFF_MAX_DOUBLINGS: i64 = 20;

/// How much of an inquiry's error text a record keeps.
pub const LAST_ERROR_MAX_CHARS: usize = 500;

/// One GUID's failed inquiries, as the side table `tx_inquiry` holds them (the `tx` table
/// keeps the contract's columns only). A successful inquiry deletes the record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InquiryRecord {
    pub guid: String,
    /// Inquiries that failed in a row.
    pub failures: i64,
    /// The last failure's error.
    pub last_error: Option<String>,
    /// The next inquiry is not made before this (UTC, `YYYY-MM-DD HH:MM:SS`, the database's
    /// clock).
    pub next_at: String,
}

/// `error` cut to `LAST_ERROR_MAX_CHARS` characters.
pub fn last_error_text(error: &str) -> &str {
    match error.char_indices().nth(LAST_ERROR_MAX_CHARS) {
        Some((at, _)) => &error[..at],
        None => error,
    }
}

/// The backoff cap in whole seconds, as the SQL binds it.
pub(crate) fn backoff_cap_secs() -> i64 {
    INQUIRY_BACKOFF_CAP.as_secs() as i64
}

/// `--min-age` as the backoff's SQL binds it: never above the cap, so that doubling it
/// cannot overflow.
pub(crate) fn backoff_base_secs(min_age_secs: u64) -> i64 {
    i64::try_from(min_age_secs)
        .unwrap_or(i64::MAX)
        .min(backoff_cap_secs())
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

pub trait Store: Send + Sync {
    /// The row for `guid`, if any.
    fn read(&self, guid: &str) -> Result<Option<Row>>;
    /// The relay's claim: true iff this inserted the row (`SENT`, attempt 1), naming the
    /// `channel` that claims it (contract §8; `None`: anonymous) in the same statement.
    fn claim_new(
        &self,
        guid: &str,
        tx_code: &str,
        request: &[u8],
        channel: Option<&str>,
    ) -> Result<bool>;
    /// The relay's re-claim of a `FAILED` row for the very request stored with it, by
    /// `channel`: only a row of its own or one with no channel (which the re-claim then
    /// gives it), the ownership part of the same guarded UPDATE; the attempt the caller now
    /// owns, if that UPDATE changed the row.
    fn reclaim_failed(
        &self,
        guid: &str,
        request: &[u8],
        channel: Option<&str>,
    ) -> Result<Option<i64>>;
    /// reprocess's re-claim: only a `FAILED`/`E902` row below `max_attempts`.
    fn reclaim_for_resend(&self, guid: &str, max_attempts: i64) -> Result<Option<i64>>;
    /// Makes `change` iff the row is still in its `from` state (and on its attempt).
    fn transition(&self, change: &Change) -> Result<bool>;
    /// Rows in `state` unchanged for at least `min_age_secs`, oldest first.
    fn select_aged(&self, state: State, min_age_secs: u64) -> Result<Vec<Row>>;
    /// resolve's selection: rows in `state` unchanged for at least `min_age_secs` whose next
    /// inquiry is due (no failure record, or one whose `next_at` has passed) and that have
    /// failed fewer than `max_inquiries` inquiries, oldest first.
    fn select_due(&self, state: State, min_age_secs: u64, max_inquiries: u32) -> Result<Vec<Row>>;
    /// Counts one more failed inquiry about `guid` (creating its record at 1) with `error`,
    /// and sets its next inquiry `min(min_age × 2^(failures-1), INQUIRY_BACKOFF_CAP)` from
    /// now by the database's clock; one statement. Returns the record as it now is.
    fn record_inquiry_failure(
        &self,
        guid: &str,
        error: &str,
        min_age_secs: u64,
    ) -> Result<InquiryRecord>;
    /// Deletes `guid`'s failure record (an inquiry succeeded). True iff there was one.
    fn clear_inquiry(&self, guid: &str) -> Result<bool>;
    /// Deletes the records of GUIDs no longer in doubt (settled by the relay, by hand, or
    /// purged), one statement. Returns how many went.
    fn prune_inquiries(&self) -> Result<usize>;
    /// The GUIDs resolve has given up on: still `UNKNOWN` or `SENT`, with at least
    /// `max_inquiries` failed inquiries; by GUID. Empty on a ledger that has no side table
    /// yet (`inspect` opens any ledger read-only, as it is).
    fn needs_operator(&self, max_inquiries: u32) -> Result<Vec<InquiryRecord>>;
    /// Every failure record, by GUID (empty without the side table).
    fn inquiry_records(&self) -> Result<Vec<InquiryRecord>>;
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
    /// Every row as `reconcile` needs it, from one consistent snapshot (one statement on
    /// SQLite, one REPEATABLE READ transaction on PostgreSQL), handed to `f` one at a time.
    fn scan_for_reconcile(&self, f: &mut dyn FnMut(crate::reconcile::ReconcileRow)) -> Result<()>;
    /// Rows in `state` (unchanged for at least `older_than_secs`, if given) after `after`
    /// by `(updated_at, guid)`, oldest change first, at most `limit`, each with its key; on
    /// the index `tx_state_updated`, reading no more than that (see `crate::page`).
    fn state_page(
        &self,
        state: State,
        older_than_secs: Option<u64>,
        after: Option<&Cursor>,
        limit: u64,
    ) -> Result<Vec<(Cursor, Row)>>;
    /// One page of rows as `q` asks (every state: a page of each, merged), and where the
    /// next page starts.
    fn page(&self, q: &PageQuery) -> Result<Page> {
        page_of(q, |state, n| {
            self.state_page(state, q.older_than_secs, q.after.as_ref(), n)
        })
    }
    /// Seconds since `guid`'s row last changed, by the database's clock (`None`: no row).
    fn row_age_secs(&self, guid: &str) -> Result<Option<f64>>;
    /// `guid`'s failure record, if it has one (`None` too without the side table).
    fn inquiry_record(&self, guid: &str) -> Result<Option<InquiryRecord>>;
    /// How many rows are in `state` (unchanged for at least `older_than_secs`, if given).
    fn count_aged(&self, state: State, older_than_secs: Option<u64>) -> Result<i64>;
    /// `FAILED`/`E902` rows with at least `max_attempts` attempts (reprocess no longer resends
    /// them): how many, and the oldest `limit`.
    fn at_attempt_cap(&self, max_attempts: i64, limit: u64) -> Result<Counted<Row>>;
    /// The GUIDs resolve has given up on (as `needs_operator`): how many, and the first
    /// `limit` by GUID.
    fn needs_operator_first(
        &self,
        max_inquiries: u32,
        limit: u64,
    ) -> Result<Counted<InquiryRecord>>;
    /// Row counts by state.
    fn count_by_state(&self) -> Result<Vec<(State, i64)>>;
    /// The history of `guid`, oldest change first (it outlives the row).
    fn history(&self, guid: &str) -> Result<Vec<HistoryRow>>;
    /// Adds `evidence` to its GUID's history (one row, the `tx` row untouched), named after
    /// this store's tool.
    fn record_evidence(&self, evidence: &Evidence) -> Result<()>;
    /// Deletes at most `limit` history rows older than `days` (its own retention), only of
    /// GUIDs no longer in doubt: whose row is gone (purged) or DONE and older than `tx_days`
    /// (purge's retention of rows). A row in doubt (UNKNOWN, SENT, FAILED, RECEIVED) and a
    /// DONE row still kept keep all their history, whatever its age.
    fn purge_history_chunk(&self, days: u64, tx_days: u64, limit: usize) -> Result<usize>;
    /// Seconds since the oldest row in `state` last changed (`None`: no such row); for the
    /// relay's metrics.
    fn oldest_age_secs(&self, state: State) -> Result<Option<f64>>;
    /// The relay's `/healthz`, through the path claims and results take (the group commit on
    /// SQLite): a claim-like INSERT of the row [`HEALTH_PROBE_GUID`] into `tx`, firing its
    /// triggers, rolled back at once (nothing of it is ever committed); then a committed
    /// write of the `relay_health` side table's one row, read back through the path requests
    /// read from.
    fn health_round_trip(&self) -> Result<()>;
    /// The durability settings of every connection this store writes or reads with.
    fn durability(&self) -> Result<Vec<Durability>>;
    /// The recovery mark (contract §11), if the ledger is recovering.
    fn recovery(&self) -> Result<Option<Recovery>>;
    /// Marks the ledger recovering since `since` (RFC 3339 UTC; an older mark's `since` is
    /// kept), recording `who` and `detail` in the ledger's events; the mark as it now is.
    fn begin_recovery(&self, since: &str, who: &str, detail: &str) -> Result<Recovery>;
    /// Ends recovery, recorded in the ledger's events; the mark ended, if there was one.
    fn end_recovery(&self, who: &str, detail: &str) -> Result<Option<Recovery>>;
    /// Writes a booking the core reports as a DONE/`0000` row iff the GUID has no row (one
    /// `INSERT … ON CONFLICT DO NOTHING`); true iff it did.
    fn record_booked(&self, b: &Booked) -> Result<bool>;
    /// Adds an event to the history of the ledger as a whole (`who` did `event`: `detail`).
    fn record_ledger_event(&self, who: &str, event: &str, detail: &str) -> Result<()>;
    /// The newest `limit` events of the ledger as a whole, oldest first.
    fn ledger_events(&self, limit: u64) -> Result<Vec<LedgerEvent>>;
    /// Records a settlement request (contract §12) made by the person this process acts
    /// for (the system's identity: `session_user` on PostgreSQL); its id.
    fn make_settle_request(&self, request: &NewRequest) -> Result<i64>;
    /// One settlement request by id.
    fn settle_request(&self, id: i64) -> Result<Option<SettleRequest>>;
    /// The settlement requests `which` names, at most `limit` (see [`Listed`]).
    fn settle_requests(&self, which: Listed<'_>, limit: u64) -> Result<Vec<SettleRequest>>;
    /// How many requests are pending and since when, and how many expired undecided.
    fn undecided_settle_requests(&self) -> Result<Undecided>;
    /// Who this process acts for, as the ledger records a maker or a checker: the session's
    /// role on PostgreSQL, the login (else real) user on SQLite.
    fn identity(&self) -> Result<String>;
    /// Approves request `id` as the person this process acts for, and makes its change by
    /// one guarded UPDATE from the state and attempts it recorded, in one transaction: both,
    /// or neither. The ledger refuses it if that person made the request (an error).
    fn approve_settle_request(&self, id: i64, why: Option<&str>) -> Result<Decided>;
    /// Rejects request `id` as the person this process acts for (not its maker), pending or
    /// expired: closed without a change.
    fn reject_settle_request(&self, id: i64, why: &str) -> Result<Decided>;
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
    /// `synchronous_commit` `on` or `remote_apply` (`DURABLE_COMMIT`).
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

/// The `synchronous_commit` values whose commit returns only once it is flushed to disk and,
/// where `synchronous_standby_names` names standbys, flushed (`on`) or applied
/// (`remote_apply`) on them too. `local` never waits for a standby and `remote_write` only
/// for the standby's operating system: a primary lost then can take with it a claim the
/// relay already acted on. Every other value is set to `on` in our sessions.
pub const DURABLE_COMMIT: [&str; 2] = ["on", "remote_apply"];
