//! One transfer (`engine::transfer`) against a scripted core and a real SQLite ledger: each
//! outcome of the call as reply bytes, row state and attempt; resends; late answers; and
//! results that find their row moved by another writer during the call.

// The tests play the process around the engine (a core that answers late, the waiter that
// hears it) on the system's time; the engine itself reads it only through its clock.
#![allow(clippy::disallowed_methods)]

mod channels;
mod record_window;
mod recovery;
mod scripted;

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use engine::core::Outcome;
use engine::events::NoEvents;
use engine::transfer::{Handled, handle};
use ledger::sqlite::Ledger;
use ledger::state::State;
use ledger::store::prelude::*;
use scripted::{C1, Call, Recorder, Scripted, booking, ledger, reply, request, settle, state};

#[test]
fn booked_and_its_resend_gets_the_stored_reply_without_a_call() {
    let (_d, store) = ledger();
    let core = Scripted::new([Call::answers(Outcome::Booked(booking("C1")))]);
    let msg = request("G-BOOKED");
    let h = handle(store.as_ref(), &core, &NoEvents, None, &msg);
    assert_eq!(h.reply, reply("G-BOOKED", "0000", C1));
    assert_eq!((h.code, h.state), (*b"0000", Some(State::Done)));
    assert_eq!(state(&*store, "G-BOOKED"), (State::Done, Some(1)));

    let again = handle(store.as_ref(), &core, &NoEvents, None, &msg);
    assert!(!h.replayed);
    assert_eq!(
        again,
        Handled {
            replayed: true,
            ..h
        }
    );
    assert_eq!(core.posted(), ["G-BOOKED"]);
}

#[test]
fn a_business_rejection_is_done_with_its_code() {
    let (_d, store) = ledger();
    let core = Scripted::new([Call::answers(Outcome::Rejected(*b"B001"))]);
    let msg = request("G-REJECTED");
    let h = handle(store.as_ref(), &core, &NoEvents, None, &msg);
    assert_eq!(h.reply, reply("G-REJECTED", "B001", ""));
    assert_eq!((h.code, h.state), (*b"B001", Some(State::Done)));
    assert_eq!(state(&*store, "G-REJECTED"), (State::Done, Some(1)));
    let replay = Handled {
        replayed: true,
        ..h
    };
    assert_eq!(handle(store.as_ref(), &core, &NoEvents, None, &msg), replay);
    assert_eq!(core.posted().len(), 1);
}

#[test]
fn not_sent_is_failed_and_a_resend_claims_it_again() {
    let (_d, store) = ledger();
    let core = Scripted::new([
        Call::answers(Outcome::NotSent("connection refused".into())),
        Call::answers(Outcome::Booked(booking("C1"))),
    ]);
    let msg = request("G-REFUSED");
    let h = handle(store.as_ref(), &core, &NoEvents, None, &msg);
    assert_eq!(h.reply, reply("G-REFUSED", "E902", ""));
    assert_eq!((h.code, h.state), (*b"E902", Some(State::Failed)));
    assert_eq!(state(&*store, "G-REFUSED"), (State::Failed, Some(1)));

    let h = handle(store.as_ref(), &core, &NoEvents, None, &msg);
    assert_eq!(h.reply, reply("G-REFUSED", "0000", C1));
    assert_eq!(h.state, Some(State::Done));
    assert_eq!(state(&*store, "G-REFUSED"), (State::Done, Some(2)));
    assert_eq!(core.posted(), ["G-REFUSED", "G-REFUSED"]);
}

#[test]
fn a_timeout_is_unknown_and_its_resend_is_never_sent() {
    let (_d, store) = ledger();
    let core = Scripted::new([Call::times_out().0]);
    let msg = request("G-TIMEOUT");
    let h = handle(store.as_ref(), &core, &NoEvents, None, &msg);
    assert_eq!(h.reply, reply("G-TIMEOUT", "E901", ""));
    assert_eq!((h.code, h.state), (*b"E901", Some(State::Unknown)));
    assert_eq!(state(&*store, "G-TIMEOUT"), (State::Unknown, Some(1)));

    let again = handle(store.as_ref(), &core, &NoEvents, None, &msg);
    assert_eq!(again.reply, reply("G-TIMEOUT", "E901", ""));
    assert_eq!(again.state, Some(State::Unknown));
    assert_eq!(core.posted().len(), 1);
}

#[test]
fn a_late_answer_settles_unknown_as_done() {
    let (_d, store) = ledger();
    let late = Recorder::default();
    let (call, answer) = Call::times_out();
    let core = Scripted::new([call]);
    let msg = request("G-LATE");
    let h = handle(store.as_ref(), &core, &late, None, &msg);
    assert_eq!(h.reply, reply("G-LATE", "E901", ""));
    assert_eq!(state(&*store, "G-LATE"), (State::Unknown, Some(1)));
    assert_eq!(late.waiting(), 1);

    answer.send(Some(Outcome::Booked(booking("C1")))).unwrap();
    late.settle_late(store.as_ref());
    assert_eq!(state(&*store, "G-LATE"), (State::Done, Some(1)));
    let row = store.read("G-LATE").unwrap().unwrap();
    assert_eq!(row.response, Some(reply("G-LATE", "0000", C1)));
    let last = store.history("G-LATE").unwrap().pop().unwrap();
    assert_eq!(last.reason.as_deref(), Some("late reply"));
    assert_eq!(late.late_counts(), (1, 1));

    let again = handle(store.as_ref(), &core, &late, None, &msg);
    assert_eq!(again.reply, reply("G-LATE", "0000", C1));
    assert_eq!(core.posted().len(), 1);
}

#[test]
fn a_late_answer_that_is_no_answer_leaves_unknown() {
    let (_d, store) = ledger();
    let late = Recorder::default();
    let (first, silent) = Call::times_out();
    let (second, garbage) = Call::times_out();
    let core = Scripted::new([first, second]);
    handle(store.as_ref(), &core, &late, None, &request("G-SILENT"));
    handle(store.as_ref(), &core, &late, None, &request("G-GARBAGE"));
    silent.send(None).unwrap();
    garbage
        .send(Some(Outcome::Unknown("HTTP 500".into())))
        .unwrap();
    late.settle_late(store.as_ref());
    assert_eq!(state(&*store, "G-SILENT"), (State::Unknown, Some(1)));
    assert_eq!(state(&*store, "G-GARBAGE"), (State::Unknown, Some(1)));
    assert_eq!(late.late_counts(), (1, 0));
}

/// Handles `guid`'s request, whose call comes to `outcome` after another writer moved the
/// row from SENT (attempt 1) to `to`, with `code` and `body`, while it was in flight.
fn settled_during_the_call(
    guid: &'static str,
    (to, code, body): (State, &'static str, String),
    outcome: Outcome,
) -> (tempfile::TempDir, Arc<Mutex<Ledger>>, Handled) {
    let (d, store) = ledger();
    let writer = store.clone();
    let core = Scripted::new([Call::answers(outcome).during(move || {
        settle(&*writer, guid, (State::Sent, 1), to, code, &body);
    })]);
    let h = handle(store.as_ref(), &core, &NoEvents, None, &request(guid));
    (d, store, h)
}

/// During the call, resolve settled the row DONE with its inquiry's booking: the call's own
/// result (in doubt) lands on nothing, and the channel gets the stored booking.
#[test]
fn a_result_after_the_row_was_settled_done_answers_what_the_ledger_says() {
    let c2 = C1.replacen("C1", "C2", 1);
    let unknown = Outcome::Unknown("read timed out".into());
    let settled = (State::Done, "0000", c2.clone());
    let (_d, store, h) = settled_during_the_call("G-SETTLED", settled, unknown);
    assert_eq!(h.reply, reply("G-SETTLED", "0000", &c2));
    assert_eq!((h.code, h.state), (*b"0000", Some(State::Done)));
    assert_eq!(state(&*store, "G-SETTLED"), (State::Done, Some(1)));
}

/// During the call, an operator settled the row FAILED; the core booked it: the ledger must
/// not say "never sent", so the booking moves FAILED → DONE.
#[test]
fn a_booking_after_the_row_was_settled_failed_moves_it_to_done() {
    let booked = Outcome::Booked(booking("C1"));
    let settled = (State::Failed, "E902", String::new());
    let (_d, store, h) = settled_during_the_call("G-FAILED", settled, booked);
    assert_eq!(h.reply, reply("G-FAILED", "0000", C1));
    assert_eq!((h.code, h.state), (*b"0000", Some(State::Done)));
    assert_eq!(state(&*store, "G-FAILED"), (State::Done, Some(1)));
    let last = store.history("G-FAILED").unwrap().pop().unwrap();
    let why = "result of attempt 1 after the row was settled";
    assert_eq!(
        (last.from_state.as_deref(), last.reason.as_deref()),
        (Some("FAILED"), Some(why))
    );
}

/// During the call, resolve gave up on the row (stale SENT, inquiry failed: UNKNOWN); the
/// call never left: the row stays UNKNOWN, never FAILED, and the channel gets E901.
#[test]
fn not_sent_after_the_row_was_settled_unknown_stays_unknown() {
    let refused = Outcome::NotSent("connection refused".into());
    let settled = (State::Unknown, "E901", String::new());
    let (_d, store, h) = settled_during_the_call("G-DOUBT", settled, refused);
    assert_eq!(h.reply, reply("G-DOUBT", "E901", ""));
    assert_eq!((h.code, h.state), (*b"E901", None));
    assert_eq!(state(&*store, "G-DOUBT"), (State::Unknown, Some(1)));
}

/// Attempt 1 timed out (UNKNOWN), resolve's inquiry found nothing (404: FAILED), a resend
/// claimed attempt 2 — and while attempt 2 is in flight, attempt 1's late booking comes:
/// it cannot settle the row, and it is the evidence of a possible double booking.
#[test]
fn a_late_booking_of_attempt_1_while_attempt_2_holds_the_row_is_evidence() {
    let (_d, store) = ledger();
    let late = Arc::new(Recorder::default());
    let (first, answer) = Call::times_out();
    let core = Scripted::new([first]);
    let msg = request("G-TWICE");
    handle(store.as_ref(), &core, &*late, None, &msg);
    settle(
        &*store,
        "G-TWICE",
        (State::Unknown, 1),
        State::Failed,
        "E902",
        "",
    );

    let waiters = Arc::clone(&late);
    let (writer, seen) = (store.clone(), Arc::new(Mutex::new(None)));
    let seen_during = Arc::clone(&seen);
    core.then([Call::answers(Outcome::Rejected(*b"B001")).during(move || {
        *seen_during.lock().unwrap() = Some(state(&*writer, "G-TWICE"));
        answer.send(Some(Outcome::Booked(booking("C1")))).unwrap();
        waiters.settle_late(writer.as_ref());
    })]);
    let h = handle(store.as_ref(), &core, &*late, None, &msg);
    assert_eq!(*seen.lock().unwrap(), Some((State::Sent, Some(2))));
    assert_eq!(h.reply, reply("G-TWICE", "B001", ""));
    assert_eq!(state(&*store, "G-TWICE"), (State::Done, Some(2)));
    assert_eq!(late.double_bookings.load(Ordering::Relaxed), 1);
    assert_eq!(late.late_counts(), (1, 0));

    let history = store.history("G-TWICE").unwrap();
    let evidence: Vec<_> = history
        .iter()
        .filter(|h| h.from_state == h.to_state)
        .collect();
    assert_eq!(evidence.len(), 1, "{history:#?}");
    let e = evidence[0];
    assert_eq!(
        (e.from_state.as_deref(), e.attempts, e.rsp_code.as_deref()),
        (Some("SENT"), Some(1), Some("0000"))
    );
    assert_eq!(
        e.reason.as_deref(),
        Some(
            "possible double booking: attempt 1 booked: core_ref C1, amount 1500, booked_at \
             20261202093012; it came after attempt 2 claimed the row"
        )
    );
}
