//! Recovery mode (contract §11). A ledger put back to an earlier state (a restore, a
//! point-in-time recovery, a failover that lost commits) no longer knows the GUIDs claimed
//! after that point, and a resend of one of them would be booked a second time. While the
//! ledger is marked recovering, a claim of a GUID without a row, or a re-claim of a FAILED
//! row, is made only once the core has said it never booked that GUID (`ask`); what it did
//! book is written DONE from its answer instead of being sent again. A row `restore
//! --journal` wrote from the core's journal has no stored request: a resend is answered from
//! its booking when the amounts agree (`journal`).
//!
//! The relay learns of the mark from its `server::RecoveryWatch`: read once before the relay
//! says `listening on`, then every [`POLL`], so that a mark begun or ended by `inspect
//! recovery` (or a restore) is seen within seconds without a restart, and a request costs one
//! atomic load, never a ledger read, to know it; here it is the request's [`Mode`].

mod ask;
mod journal;

pub(crate) use ask::{Before, Resend, before_claim, before_resend};
pub(crate) use journal::answer_without_request;

use std::time::Duration;

/// How often the relay reads the mark: a change is seen within this (the contract allows 5 s),
/// at the cost of one small query per period.
pub const POLL: Duration = Duration::from_secs(1);

/// The `outcome` labels of `txrelay_recovery_inquiries_total` (`InquiryDetail::label`).
pub const INQUIRY_OUTCOMES: [&str; 4] = ["booked", "not_found", "other_amount", "error"];

/// The reason the history gives for a row written DONE from recovery mode's inquiry.
pub const BOOKED_BEFORE: &str =
    "recovery: the core booked it before the ledger was put back (inquiry 200)";

/// How a request is handled: as always, or asking the core before a claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Ordinary,
    Recovering,
}
