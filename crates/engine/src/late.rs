//! Late replies: the core's answer to a call the relay gave up on at its read timeout.
//!
//! The relay answers `E901` and records UNKNOWN at the read timeout, as always. But the
//! connection to the core is not thrown away (`core_client::capture` caught it): it is handed
//! to the process (`Events::late_call`), which goes on reading it for up to `--late-reply-ms`
//! and brings the answer here. If it is a booking or a business rejection, the row moves
//! UNKNOWN → DONE with the reply the channel would have got — one guarded statement that
//! names the attempt — and the next resend gets it instead of `E901`.

use crate::core::Outcome;
use ledger::state::{Change, State};
use ledger::store::Transfers;
use log::info;

use crate::events::{Events, LateReply};
use crate::record::{RECORD_WINDOW, record_result};

/// Settles the UNKNOWN row of `guid` on `attempt` (request `msg`) from the late `outcome`
/// (`None`: none came in time). Returns whether this call wrote the result.
pub fn settle<S: Transfers + ?Sized>(
    store: &S,
    events: &dyn Events,
    guid: &str,
    outcome: Outcome,
    attempt: i64,
    msg: &[u8],
) -> bool {
    events.late_reply(LateReply::Arrived);
    let (code, body) = match &outcome {
        Outcome::Booked(body) => (wire::OK, Some(body)),
        Outcome::Rejected(code) => (*code, None),
        Outcome::NotSent(why) | Outcome::Unknown(why) => {
            info!(guid:% = guid; "late reply settles nothing: {why}");
            return false;
        }
    };
    let change = Change::new(
        guid,
        State::Unknown,
        Some(attempt),
        State::Done,
        code,
        wire::reply_to(msg, &code, body),
    )
    .because("late reply");
    // Recorded like any result: retried while the ledger fails, and if the row moved on
    // (resolve took a 404 from the core still at work: FAILED), put right.
    let by = events.clock().now() + RECORD_WINDOW;
    // Nobody waits for this answer: only whether the result was written matters.
    let (_, made) = record_result(store, events, msg, None, change, by);
    if made {
        events.late_reply(LateReply::Settled);
        info!(guid:% = guid; "late reply {}: settled DONE (attempt {attempt})",
            String::from_utf8_lossy(&code)
        );
    } else {
        info!(guid:% = guid; "late reply {} came after the row moved on; left to it",
            String::from_utf8_lossy(&code)
        );
    }
    made
}
