//! The ledger's writes, one file each, in one place: the write's interface (a trait of one
//! method, which a role of `store::roles` names among its supertraits), its statement on
//! SQLite and on PostgreSQL, and the binding and decoding of each. Each file implements its
//! write for both backends: the SQLite `Ledger` (one connection) and every holder of one
//! (`sqlite::Hold`: the tools' lock, the relay's group commit, which run the write where
//! their writes run), and `PgStore` (a statement on its pool, or, for the relay's hot path,
//! a batch of its group commit: `postgres::claims`, `reclaims`, `results`).
//!
//! A new write is a new file here, its trait named in its role, and its test in the ledger
//! suite (`tests/suite`), which holds every backend to it.
//!
//! Every write is ONE guarded statement whose row count (or RETURNING) decides; none reads
//! a row to decide a write.

pub mod begin_recovery;
pub mod claim_new;
pub mod clear_inquiry;
pub mod decide_settle_request;
pub mod end_recovery;
pub mod make_settle_request;
pub mod prune_inquiries;
pub mod purge_chunk;
pub mod purge_history_chunk;
pub mod reclaim_failed;
pub mod reclaim_for_resend;
pub mod record_booked;
pub mod record_evidence;
pub mod record_inquiry_failure;
pub mod record_ledger_event;
pub mod transition;

pub use begin_recovery::BeginRecovery;
pub use claim_new::ClaimNew;
pub use clear_inquiry::ClearInquiry;
pub use decide_settle_request::{ApproveSettleRequest, RejectSettleRequest};
pub use end_recovery::EndRecovery;
pub use make_settle_request::MakeSettleRequest;
pub use prune_inquiries::PruneInquiries;
pub use purge_chunk::PurgeChunk;
pub use purge_history_chunk::PurgeHistoryChunk;
pub use reclaim_failed::ReclaimFailed;
pub use reclaim_for_resend::ReclaimForResend;
pub use record_booked::RecordBooked;
pub use record_evidence::RecordEvidence;
pub use record_inquiry_failure::RecordInquiryFailure;
pub use record_ledger_event::RecordLedgerEvent;
pub use transition::Transition;
