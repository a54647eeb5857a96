//! What the decisions tell the process around them: the port through which a transfer, a
//! late reply or recovery mode's inquiry reports what happened (for the relay's metrics) and
//! hands over a core call whose answer is late (for the relay's waiters). The engine keeps
//! no counters and starts no threads of its own: the relay's `server` crate implements this
//! with its metrics and its late-reply waiters; the batch tools, tests and the simulator use
//! [`NoEvents`] or a sink of their own, so that each run's counts are its own.

use std::time::Duration;

use crate::clock::{Clock, SystemClock};
use crate::core::PendingAnswer;

/// What became of a late reply (`late::settle`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LateReply {
    /// An answer came, whatever it was.
    Arrived,
    /// It moved the UNKNOWN row to DONE.
    Settled,
}

/// The receiver of what the decisions report. Every method has a default that ignores it.
pub trait Events: Sync {
    /// The clock the decisions read and pause on while they serve this process: the
    /// system's, unless the process runs on one of its own (the simulator, tests).
    fn clock(&self) -> &dyn Clock {
        &SystemClock
    }

    /// Whether a core call that times out waiting for its answer is to be kept and handed to
    /// [`Events::late_call`] once its row is recorded UNKNOWN.
    fn keeps_late_calls(&self) -> bool {
        false
    }

    /// A call given up at its read timeout, whose row is UNKNOWN on `attempt` with request
    /// `msg`: the process may wait for its answer and settle the row (`late::settle`).
    fn late_call(&self, call: Box<dyn PendingAnswer>, attempt: i64, msg: Vec<u8>) {
        let _ = (call, attempt, msg);
    }

    /// A POST to the core came to `outcome` (`Outcome::label`) after `took`.
    fn core_call(&self, outcome: &'static str, took: Duration) {
        let _ = (outcome, took);
    }

    /// An earlier attempt's result that may be a booking came after a later attempt claimed
    /// the row: a possible double booking (`double_booking`).
    fn possible_double_booking(&self) {}

    /// Recovery mode asked the core about a GUID before a claim: the answer's label
    /// (`InquiryDetail::label`).
    fn recovery_inquiry(&self, outcome: &'static str) {
        let _ = outcome;
    }

    /// A late reply came, or settled its row.
    fn late_reply(&self, what: LateReply) {
        let _ = what;
    }
}

/// Reports go nowhere: the batch tools (whose run's summary is their report) and tests.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoEvents;

impl Events for NoEvents {}

/// Reports go nowhere, and the decisions read the clock given: a batch tool's run on a clock
/// of its caller's (the system's for the tools, the run's in the simulator).
#[derive(Clone, Copy)]
pub struct NoEventsOn<'a>(pub &'a dyn Clock);

impl Events for NoEventsOn<'_> {
    fn clock(&self) -> &dyn Clock {
        self.0
    }
}
