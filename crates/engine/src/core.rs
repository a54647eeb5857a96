//! The core as the transfer logic sees it: a deadline, a POST of a transfer whose call, if it
//! timed out waiting for the answer, may be kept for a late reply, and the inquiry that
//! recovery mode makes before a claim (contract §11). The HTTP client
//! (`core_client::CoreClient`) is the one implementation the relay and the tools use; tests
//! script their own, so that `transfer`, `late` and recovery mode are checked without a
//! socket.

use std::time::{Duration, Instant};

use core_client::capture::LateCall;
use core_client::{CoreClient, InquiryDetail, Outcome};
use wire::Transfer;

/// What `transfer` needs of the core.
pub trait Core: Sync {
    /// The longest a call can take, name lookup to last byte.
    fn deadline(&self) -> Duration;

    /// POSTs a transfer once. Never retried.
    fn post_transfer(&self, t: &Transfer) -> Outcome;

    /// POSTs a transfer once; if the call timed out waiting for the answer, also the answer
    /// still to come, for a late reply (`late`).
    fn post_transfer_keeping_late(&self, t: &Transfer)
    -> (Outcome, Option<Box<dyn PendingAnswer>>);

    /// Asks whether the core booked `t` (`GET /v1/transfers/{guid}`). Never POSTs.
    fn inquire_detail(&self, t: &Transfer) -> InquiryDetail;
}

/// The answer to a call given up at its read timeout, which may still come.
pub trait PendingAnswer: Send {
    /// The GUID of the transfer the call posted.
    fn guid(&self) -> &str;

    /// Waits for the answer until `until`. `None`: nothing usable came.
    fn wait(self: Box<Self>, until: Instant) -> Option<Outcome>;
}

impl Core for CoreClient {
    fn deadline(&self) -> Duration {
        CoreClient::deadline(self)
    }

    fn post_transfer(&self, t: &Transfer) -> Outcome {
        CoreClient::post_transfer(self, t)
    }

    fn post_transfer_keeping_late(
        &self,
        t: &Transfer,
    ) -> (Outcome, Option<Box<dyn PendingAnswer>>) {
        let (outcome, call) = CoreClient::post_transfer_keeping_late(self, t);
        (outcome, call.map(|c| Box::new(c) as Box<dyn PendingAnswer>))
    }

    fn inquire_detail(&self, t: &Transfer) -> InquiryDetail {
        CoreClient::inquire_detail(self, t)
    }
}

impl PendingAnswer for LateCall {
    fn guid(&self) -> &str {
        &self.ours.guid
    }

    fn wait(self: Box<Self>, until: Instant) -> Option<Outcome> {
        LateCall::wait(*self, until)
    }
}
