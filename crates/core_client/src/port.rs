//! The HTTP client as the decisions' port to the core (`core_api::Core`): its POST, the
//! answer it may still read after the read timeout (`capture::LateCall`), its inquiry.

use std::time::{Duration, Instant};

use core_api::{Core, InquiryDetail, Outcome, PendingAnswer};
use wire::Transfer;

use crate::CoreClient;
use crate::capture::LateCall;

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
