//! The ledger's interface by role: each trait is what one kind of caller uses, and
//! [`Store`](super::Store) is all of them. A function that needs one role asks for it
//! (`S: Retention`), and the compiler keeps it to that; `&dyn Store` calls any of them.
//! A role's writes are its supertraits, one file each in `crate::writes` (the statement on
//! both backends with its binding); its own methods are reads. Every change is ONE guarded
//! statement whose row count decides.

use crate::page::{Counted, Cursor, Page, PageQuery, page_of};
use crate::recovery::{LedgerEvent, Recovery};
use crate::settle_request::{Listed, SettleRequest, Undecided};
use crate::state::{HistoryRow, Row, State};

use super::{Durability, InquiryRecord, Result};
use crate::writes::{
    ApproveSettleRequest, BeginRecovery, ClaimNew, ClearInquiry, EndRecovery, MakeSettleRequest,
    PruneInquiries, PurgeChunk, PurgeHistoryChunk, ReclaimFailed, ReclaimForResend, RecordBooked,
    RecordEvidence, RecordInquiryFailure, RecordLedgerEvent, RejectSettleRequest, Transition,
};

/// The relay's path (`engine::transfer`): one transfer's claim, its result, and evidence.
pub trait Transfers: ClaimNew + ReclaimFailed + Transition + RecordEvidence {
    /// The row for `guid`, if any.
    fn read(&self, guid: &str) -> Result<Option<Row>>;
    /// Whether the relay should try the claim before reading the row: cheaper where a write
    /// that finds its row costs nothing (PostgreSQL), dearer where every write queues for
    /// one lock (SQLite).
    fn claims_first(&self) -> bool {
        false
    }
}

/// resolve and reprocess: what is due, the inquiries' back-off, re-claims to resend, the
/// canary.
pub trait Inquiries:
    ReclaimForResend + RecordInquiryFailure + ClearInquiry + PruneInquiries
{
    /// resolve's selection: rows in `state` unchanged for at least `min_age_secs` whose next
    /// inquiry is due (no failure record, or one whose `next_at` has passed) and that have
    /// failed fewer than `max_inquiries` inquiries, oldest first.
    fn select_due(&self, state: State, min_age_secs: u64, max_inquiries: u32) -> Result<Vec<Row>>;
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
pub trait Retention: PurgeChunk + PurgeHistoryChunk {
    /// `DONE` rows older than `days`, oldest first.
    fn select_purgeable(&self, days: u64) -> Result<Vec<Row>>;
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
pub trait Recovering: BeginRecovery + EndRecovery + RecordBooked + RecordLedgerEvent {
    /// The recovery mark (contract §11), if the ledger is recovering.
    fn recovery(&self) -> Result<Option<Recovery>>;
    /// The newest `limit` events of the ledger as a whole, oldest first.
    fn ledger_events(&self, limit: u64) -> Result<Vec<LedgerEvent>>;
}

/// Dual control of manual settlement (contract §12).
pub trait Settling: MakeSettleRequest + ApproveSettleRequest + RejectSettleRequest {
    /// One settlement request by id.
    fn settle_request(&self, id: i64) -> Result<Option<SettleRequest>>;
    /// The settlement requests `which` names, at most `limit` (see [`Listed`]).
    fn settle_requests(&self, which: Listed<'_>, limit: u64) -> Result<Vec<SettleRequest>>;
    /// How many requests are pending and since when, and how many expired undecided.
    fn undecided_settle_requests(&self) -> Result<Undecided>;
    /// Who this process acts for, as the ledger records a maker or a checker: the session's
    /// role on PostgreSQL, the login (else real) user on SQLite.
    fn identity(&self) -> Result<String>;
}
