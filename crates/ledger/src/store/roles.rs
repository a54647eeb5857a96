//! The ledger's interface by role: each trait is what one kind of caller uses, and
//! [`Store`](super::Store) is all of them. A function that needs one role asks for it
//! (`S: Retention`), and the compiler keeps it to that; `&dyn Store` calls any of them.
//! Every change is ONE guarded statement whose row count decides.

use crate::page::{Counted, Cursor, Page, PageQuery, page_of};
use crate::recovery::{Booked, LedgerEvent, Recovery};
use crate::settle_request::{Decided, Listed, NewRequest, SettleRequest, Undecided};
use crate::state::{Change, Evidence, HistoryRow, Row, State};

use super::{Durability, InquiryRecord, Result};

/// The relay's path (`engine::transfer`): one transfer's claim, its result, and evidence.
pub trait Transfers {
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
    /// Makes `change` iff the row is still in its `from` state (and on its attempt).
    fn transition(&self, change: &Change) -> Result<bool>;
    /// Adds `evidence` to its GUID's history (one row, the `tx` row untouched), named after
    /// this store's tool.
    fn record_evidence(&self, evidence: &Evidence) -> Result<()>;
    /// Whether the relay should try the claim before reading the row: cheaper where a write
    /// that finds its row costs nothing (PostgreSQL), dearer where every write queues for
    /// one lock (SQLite).
    fn claims_first(&self) -> bool {
        false
    }
}

/// resolve and reprocess: what is due, the inquiries' back-off, re-claims to resend, the
/// canary.
pub trait Inquiries {
    /// reprocess's re-claim: only a `FAILED`/`E902` row below `max_attempts`.
    fn reclaim_for_resend(&self, guid: &str, max_attempts: i64) -> Result<Option<i64>>;
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
    /// `FAILED`/`E902` rows below `max_attempts`, oldest first, at most `limit`.
    fn select_resendable(&self, max_attempts: i64, limit: Option<u64>) -> Result<Vec<Row>>;
    /// The newest `DONE`/`0000` rows, newest first (resolve's canary).
    fn recent_bookings(&self, limit: usize) -> Result<Vec<Row>>;
}

/// purge: finished rows and old history.
pub trait Retention {
    /// `DONE` rows older than `days`, oldest first.
    fn select_purgeable(&self, days: u64) -> Result<Vec<Row>>;
    /// Deletes at most `limit` `DONE` rows older than `days` in one short transaction.
    fn purge_chunk(&self, days: u64, limit: usize) -> Result<usize>;
    /// Deletes at most `limit` history rows older than `days` (its own retention), only of
    /// GUIDs no longer in doubt: whose row is gone (purged) or DONE and older than `tx_days`
    /// (purge's retention of rows). A row in doubt (UNKNOWN, SENT, FAILED, RECEIVED) and a
    /// DONE row still kept keep all their history, whatever its age.
    fn purge_history_chunk(&self, days: u64, tx_days: u64, limit: usize) -> Result<usize>;
}

/// Reading the ledger whole: inspect's pages and counts, reconcile's scan, the relay's
/// samples and health.
pub trait Reports {
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
}

/// Recovery mode (contract §11): the mark, a booking the core reports, the ledger's own
/// events.
pub trait Recovering {
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
}

/// Dual control of manual settlement (contract §12).
pub trait Settling {
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
}

/// What only the tests read (the ledger suite holds every backend to it).
pub trait Probes {
    /// Rows in `state` unchanged for at least `min_age_secs`, oldest first.
    fn select_aged(&self, state: State, min_age_secs: u64) -> Result<Vec<Row>>;
    /// Every failure record, by GUID (empty without the side table).
    fn inquiry_records(&self) -> Result<Vec<InquiryRecord>>;
}
