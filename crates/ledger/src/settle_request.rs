//! Dual control of manual settlement (contract §12): a settlement by hand is a **request**
//! that one person makes and another carries out. `inspect settle` records it with the state
//! and attempts the row had and the change it asks for; `inspect approve` makes that change by
//! one guarded UPDATE naming the recorded state and attempts (so a row that changed meanwhile
//! is left alone), in the same transaction as the request's decision; `inspect reject` closes
//! it without a change. The ledger itself refuses a decision by the request's maker (both
//! backends: a trigger, which on PostgreSQL takes the person from `session_user`, on SQLite
//! from the tools' own `txrelay_identity()`), so neither a tool nor a hand-written statement
//! can approve its own request.

use serde::Serialize;

use crate::state::State;

/// How long a request may be approved unless `--expires` says otherwise: 24 hours.
pub const DEFAULT_EXPIRY_SECS: u64 = 24 * 3600;

/// The SQL function through which an SQLite connection of our tools tells the ledger's
/// triggers who it acts for; a session without it (sqlite3 by hand) can neither make nor
/// decide a request.
pub const SQLITE_IDENTITY_FUNCTION: &str = "txrelay_identity";

/// A request as `inspect settle` makes it: the change it asks for, and what it rests on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewRequest {
    pub guid: String,
    /// The row's state and attempts when the request was made: the approval's guard.
    pub seen_state: State,
    pub seen_attempts: i64,
    /// `booked` or `not-booked`.
    pub outcome: &'static str,
    /// DONE (booked) or FAILED (not booked), with the code and the reply the row gets.
    pub to: State,
    pub rsp_code: String,
    pub response: Vec<u8>,
    /// The booking given (`core_ref …, amount …, booked_at …`), or what the inquiry said.
    pub evidence: String,
    /// `--force`: settled not booked without a 404 that proves it.
    pub forced: bool,
    /// The row must have been unchanged this long when the change is made.
    pub min_age_secs: Option<u64>,
    pub reason: String,
    /// Seconds from now until it can no longer be approved.
    pub expires_in_secs: u64,
}

/// Where a request stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Pending,
    /// Pending no more: past its expiry, undecided.
    Expired,
    Approved,
    Rejected,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::Expired => "expired",
            Status::Approved => "approved",
            Status::Rejected => "rejected",
        }
    }

    /// The status as stored (`pending`, `approved`, `rejected`) and whether its expiry has
    /// passed (`expired`: only an undecided request expires).
    pub fn of(stored: &str, expired: bool) -> Status {
        match stored {
            "approved" => Status::Approved,
            "rejected" => Status::Rejected,
            _ if expired => Status::Expired,
            _ => Status::Pending,
        }
    }
}

/// A request as the ledger holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SettleRequest {
    pub id: i64,
    pub guid: String,
    pub seen_state: State,
    pub seen_attempts: i64,
    pub outcome: String,
    pub to_state: State,
    pub rsp_code: String,
    #[serde(skip)]
    pub response: Vec<u8>,
    pub evidence: String,
    pub forced: bool,
    pub min_age_secs: Option<u64>,
    pub reason: String,
    pub maker: String,
    /// RFC 3339, UTC, to the second; so are `expires_at` and `decided_at`.
    pub made_at: String,
    pub expires_at: String,
    pub status: Status,
    pub checker: Option<String>,
    pub decided_at: Option<String>,
    pub decision_reason: Option<String>,
}

/// Which requests a listing gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listed<'a> {
    /// The pending ones (undecided, not expired), oldest first, at most `limit`.
    Pending,
    /// The newest `limit`, whatever their status, oldest first.
    All,
    /// Those of one GUID, oldest first, at most `limit`.
    Of(&'a str),
}

/// The requests still undecided, for `inspect summary` and the relay's metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Undecided {
    /// Pending: undecided and not expired.
    pub pending: u64,
    /// Seconds since the oldest pending request was made (`None`: none pending).
    pub oldest_pending_secs: Option<f64>,
    /// Undecided past their expiry: no longer approvable, and nobody closed them
    /// (`inspect reject` does); each is a GUID someone asked to settle and nobody did.
    pub expired: u64,
}

/// What an approval or a rejection came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decided {
    /// Done: the request as it now is (approved: the row changed as it asked).
    Done(SettleRequest),
    /// No request has this id.
    NoSuchRequest,
    /// The request is no longer pending: expired, approved or rejected.
    NotPending(SettleRequest),
    /// Approval only: the row is no longer in the state and attempts the request saw (or not
    /// yet unchanged for its `min_age_secs`); nothing written, the request still pending.
    RowChanged(SettleRequest),
}

/// What the history of the GUID says of an approval: both people, the request and its reason.
pub fn approval_reason(r: &SettleRequest, checker: &str, why: Option<&str>) -> String {
    let mut s = format!(
        "settlement request {} ({}) made by {} at {}, approved by {checker}: {}",
        r.id, r.outcome, r.maker, r.made_at, r.reason
    );
    if let Some(why) = why {
        s.push_str("; approval: ");
        s.push_str(why);
    }
    s
}
