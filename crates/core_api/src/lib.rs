//! The core's API as the decisions see it, with no I/O: what a POST of a transfer or an
//! inquiry came to (`Outcome`, `Inquiry`, `InquiryDetail`, contract §3) and the port the
//! transfer logic, recovery mode and the batch tools call the core through (`Core`,
//! `PendingAnswer`). The HTTP client (`core_client`) implements the port; tests and the
//! simulator script their own. Below both `engine` and `core_client`, so that the engine
//! links no HTTP client and the client no ledger.

use std::time::{Duration, Instant};

use wire::{BOOKING_BODY_LEN, Code, Transfer};

/// The most calls to the core at once that each keep a connection alive (the HTTP client's
/// idle pool): the batch tools' `--parallel` at most.
pub const MAX_PARALLEL: usize = 256;

/// How many calls to the core a batch tool (resolve, reprocess) makes at once unless told
/// otherwise (their `--parallel`).
pub const DEFAULT_PARALLEL: usize = 8;

/// What a POST of a transfer came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Booked: the 45-byte reply body built from the core's JSON.
    Booked([u8; BOOKING_BODY_LEN]),
    /// A definitive business rejection: not booked.
    Rejected(Code),
    /// The request never left: safe to send again.
    NotSent(String),
    /// The core may or may not have booked it.
    Unknown(String),
}

/// What an inquiry (`GET /v1/transfers/{guid}`) came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inquiry {
    Booked([u8; BOOKING_BODY_LEN]),
    /// The core says it never booked this GUID.
    NotFound,
    /// No usable answer: settle nothing.
    Error(String),
}

/// What an inquiry came to, with one case of [`Inquiry::Error`] told apart: a booking of our
/// GUID for another amount. Settling a row, that is no answer like any other (resolve leaves
/// the row); before a claim in recovery mode (contract §11) it is an answer: the GUID was
/// used for a different request, and the channel is told `E904` rather than "not sent".
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InquiryDetail {
    Booked([u8; BOOKING_BODY_LEN]),
    /// The core booked this GUID for `amount`, not ours; `why` is what [`Inquiry::Error`]
    /// says about it.
    BookedOther {
        amount: u64,
        why: String,
    },
    NotFound,
    Error(String),
}

impl InquiryDetail {
    /// Its name in the relay's metrics (`txrelay_recovery_inquiries_total{outcome=…}`).
    pub fn label(&self) -> &'static str {
        match self {
            InquiryDetail::Booked(_) => "booked",
            InquiryDetail::BookedOther { .. } => "other_amount",
            InquiryDetail::NotFound => "not_found",
            InquiryDetail::Error(_) => "error",
        }
    }
}

impl From<InquiryDetail> for Inquiry {
    fn from(d: InquiryDetail) -> Inquiry {
        match d {
            InquiryDetail::Booked(body) => Inquiry::Booked(body),
            InquiryDetail::BookedOther { why, .. } | InquiryDetail::Error(why) => {
                Inquiry::Error(why)
            }
            InquiryDetail::NotFound => Inquiry::NotFound,
        }
    }
}

impl Outcome {
    /// Its name in the relay's metrics (`txrelay_core_call_duration_seconds{outcome=…}`).
    pub fn label(&self) -> &'static str {
        match self {
            Outcome::Booked(_) => "booked",
            Outcome::Rejected(_) => "rejected",
            Outcome::NotSent(_) => "not_sent",
            Outcome::Unknown(_) => "unknown",
        }
    }
}

/// What the decisions need of the core.
pub trait Core: Sync {
    /// The longest a call can take, name lookup to last byte.
    fn deadline(&self) -> Duration;

    /// POSTs a transfer once. Never retried.
    fn post_transfer(&self, t: &Transfer) -> Outcome;

    /// POSTs a transfer once; if the call timed out waiting for the answer, also the answer
    /// still to come, for a late reply.
    fn post_transfer_keeping_late(&self, t: &Transfer)
    -> (Outcome, Option<Box<dyn PendingAnswer>>);

    /// Asks whether the core booked `t` (`GET /v1/transfers/{guid}`), telling a booking of
    /// its GUID for another amount apart. Never POSTs.
    fn inquire_detail(&self, t: &Transfer) -> InquiryDetail;

    /// Asks whether the core booked `t`: a booking counts only if it names `t`'s GUID and
    /// amount. Never POSTs.
    fn inquire(&self, t: &Transfer) -> Inquiry {
        self.inquire_detail(t).into()
    }
}

/// The answer to a call given up at its read timeout, which may still come.
pub trait PendingAnswer: Send {
    /// The GUID of the transfer the call posted.
    fn guid(&self) -> &str;

    /// Waits for the answer until `until`. `None`: nothing usable came.
    fn wait(self: Box<Self>, until: Instant) -> Option<Outcome>;
}
