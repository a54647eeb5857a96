//! A result that comes back after `resolve --stale-sent` settled the row under it (as if
//! the relay had been paused past the floor): a booking never leaves the row FAILED, an
//! unknown outcome never says "not sent".

use std::thread::JoinHandle;

use wire::E_UNKNOWN;

use crate::util::*;

/// Sends `m` through the scene's relay and, while the slow core still works on it, has
/// `resolve --stale-sent` settle its row: as if the relay had been paused past the floor.
/// The core's inquiry answers 404, so the row becomes FAILED/E902. Join for the reply.
fn send_and_let_stale_sent_settle_it_failed(s: &Scene, m: &[u8]) -> JoinHandle<Vec<u8>> {
    let g = guid_of(m);
    let pending = send_in_background(s.addr(), m);
    assert!(eventually(WAIT, || s.db.state(&g) == Some(State::Sent)));
    s.db.age(&g, OLD);

    let r = s.resolve(&["--min-age", "60", "--stale-sent", "60", "--json"]);
    r.expect_code(EXIT_SETTLED);
    let j = r.json();
    assert_eq!(
        (&j["examined"], &j["failed"], &j["done"]),
        (&1.into(), &1.into(), &0.into()),
        "resolve ran while the core was still working: {j}"
    );
    pending
}

/// A reprocess run that finds nothing to send.
fn assert_nothing_to_reprocess(s: &Scene) {
    let r = s.reprocess(&["--max-attempts", "5"]);
    r.expect_code(EXIT_SETTLED);
    assert!(
        r.stdout().starts_with("reprocess: 0 examined, 0 sent"),
        "{}",
        r.stdout()
    );
}

#[test]
fn a_booking_that_arrives_after_stale_sent_moved_the_row_to_failed_is_recorded_done() {
    skip_if_unavailable!();
    let s = Scene::new().core(&["--slow-ms", "2000"]).relay(&[]).build();
    let g = "G-LATE-DONE";
    let m = msg(g, 4100, "SLOW late booking");
    // The core is still sleeping on the request when resolve asks.
    let pending = send_and_let_stale_sent_settle_it_failed(&s, &m);

    // Then the core books, and the relay's result must not leave the row FAILED.
    let reply = pending.join().unwrap();
    assert_code(&reply, "0000");
    assert_done_with(&s.db, s.core(), &m, &reply);

    // Nothing for reprocess to send; a resend replays the stored reply.
    assert_nothing_to_reprocess(&s);
    assert_eq!(s.call(&m), reply);
    assert_eq!(s.core().bookings(g), 1);
}

#[test]
fn an_unknown_outcome_after_stale_sent_moved_the_row_to_failed_is_recorded_unknown() {
    skip_if_unavailable!();
    let s = Scene::new()
        .core(&["--slow-ms", "2500"])
        // Without late replies: the row must stay UNKNOWN until an inquiry (the late-reply
        // twin of this test is in late_replies.rs).
        .relay(&["--read-timeout-ms", "2000", "--late-reply-ms", "0"])
        .build();
    let g = "G-LATE-UNKNOWN";
    let m = msg(g, 4200, "SLOW late unknown");
    let pending = send_and_let_stale_sent_settle_it_failed(&s, &m);

    // The relay times out before the core answers: the outcome is unknown, never "not sent".
    let reply = pending.join().unwrap();
    assert_eq!(reply, short(&m, &E_UNKNOWN));
    assert_settled_short(&s.db, &m, State::Unknown, &E_UNKNOWN, 1);
    assert_eq!(s.db.row(g).unwrap().request.as_deref(), Some(&m[..]));

    assert_nothing_to_reprocess(&s);
    assert_eq!(s.call(&m), short(&m, &E_UNKNOWN));

    // The core has booked by now; an inquiry settles the row.
    assert!(eventually(WAIT, || s.core().bookings(g) == 1));
    let r = s.resolve(&["--min-age", "0"]);
    r.expect_code(EXIT_SETTLED);
    assert!(
        r.stdout().starts_with("resolve: 1 examined, 1 DONE"),
        "{}",
        r.stdout()
    );
    let settled = s.db.row(g).unwrap().response.unwrap();
    assert_done_with(&s.db, s.core(), &m, &settled);
    assert_eq!(s.call(&m), settled);
    assert_eq!(s.core().bookings(g), 1);
}
