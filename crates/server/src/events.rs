//! The relay's side of the engine's `Events` port: what a transfer, a late reply or recovery
//! mode's inquiry reports goes to the metrics ([`Metrics`] is a sink on its own, which the
//! late-reply waiters use), and a call whose answer is late goes to the waiters
//! ([`RelayEvents`], what the doors hand to `engine::transfer`).

use std::sync::Arc;
use std::time::Duration;

use engine::core::PendingAnswer;
use engine::events::{Events, LateReply};

use crate::late::LateReplies;
use crate::metrics::Metrics;

impl Events for Metrics {
    fn core_call(&self, outcome: &'static str, took: Duration) {
        Metrics::core_call(self, outcome, took);
    }

    fn possible_double_booking(&self) {
        self.possible_double_bookings.inc();
    }

    fn recovery_inquiry(&self, outcome: &'static str) {
        self.recovery_inquiries.with_label_values(&[outcome]).inc();
    }

    fn late_reply(&self, what: LateReply) {
        match what {
            LateReply::Arrived => self.late_arrived.inc(),
            LateReply::Settled => self.late_settled.inc(),
        }
    }
}

/// The metrics, and the late-reply waiters when `--late-reply-ms` is above 0.
pub struct RelayEvents {
    pub metrics: Arc<Metrics>,
    pub late: Option<Arc<LateReplies>>,
}

impl Events for RelayEvents {
    fn keeps_late_calls(&self) -> bool {
        self.late.is_some()
    }

    fn late_call(&self, call: Box<dyn PendingAnswer>, attempt: i64, msg: Vec<u8>) {
        if let Some(late) = &self.late {
            late.adopt(call, attempt, msg);
        }
    }

    fn core_call(&self, outcome: &'static str, took: Duration) {
        self.metrics.core_call(outcome, took);
    }

    fn possible_double_booking(&self) {
        Events::possible_double_booking(self.metrics.as_ref());
    }

    fn recovery_inquiry(&self, outcome: &'static str) {
        Events::recovery_inquiry(self.metrics.as_ref(), outcome);
    }

    fn late_reply(&self, what: LateReply) {
        Events::late_reply(self.metrics.as_ref(), what);
    }
}
