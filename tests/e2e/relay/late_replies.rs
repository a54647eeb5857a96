//! Late replies: the core's answer to a call the relay gave up on at its read timeout is
//! still listened for (`--late-reply-ms`); a booking or a rejection settles the UNKNOWN row,
//! so that the next resend gets the booking instead of E901.

use std::time::{Duration, Instant};

use ledger::wire::E_UNKNOWN;

use crate::util::*;

/// The relay's threads that serve calls: connection threads and late-reply waiters (the
/// ledger's own threads, a PostgreSQL pool's included, come and go with its connections).
fn threads(relay: &Server) -> usize {
    std::fs::read_dir(format!("/proc/{}/task", relay.pid()))
        .unwrap()
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
        .filter(|name| matches!(name.trim(), "conn" | "late-reply"))
        .count()
}

#[test]
fn a_booking_after_the_read_timeout_settles_the_row_and_a_resend_gets_it() {
    skip_if_unavailable!();
    let s = Scene::new()
        .core(&["--slow-ms", "1500"])
        .relay(&["--read-timeout-ms", "500"])
        .build();
    let g = "G-LR-BOOKED";
    let m = msg(g, 777, "SLOW but booked");
    // The channel hears E901 at the read timeout, as always...
    assert_eq!(s.call(&m), short(&m, &E_UNKNOWN));
    assert_eq!(s.db.state(g), Some(State::Unknown));
    // ...and when the core's answer comes, the row becomes DONE with that booking.
    assert!(eventually(WAIT, || s.db.state(g) == Some(State::Done)));
    let booking = s.core().inquiry(g).expect("booked");
    let reply = booked_reply(&m, &booking);
    assert_done_with(&s.db, s.core(), &m, &reply);
    assert_eq!(s.db.row(g).unwrap().attempts, Some(1));
    assert_eq!(s.call(&m), reply, "the resend gets the booking, not E901");
    assert_eq!(s.core().bookings(g), 1);
    assert!(
        s.relay().stderr().contains("late reply 0000"),
        "{}",
        s.relay().stderr()
    );
}

#[test]
fn without_late_replies_the_row_stays_unknown_for_resolve() {
    skip_if_unavailable!();
    let s = Scene::new()
        .core(&["--slow-ms", "800"])
        .relay(&["--read-timeout-ms", "300", "--late-reply-ms", "0"])
        .build();
    let g = "G-LR-OFF";
    let m = msg(g, 5, "SLOW");
    assert_eq!(s.call(&m), short(&m, &E_UNKNOWN));
    assert!(eventually(WAIT, || s.core().bookings(g) == 1));
    // Give a late reply every chance to arrive; none must be taken.
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(s.db.state(g), Some(State::Unknown));
    assert_eq!(s.call(&m), short(&m, &E_UNKNOWN));
}

#[test]
fn a_core_that_never_answers_leaks_no_thread_and_does_not_hold_up_shutdown() {
    skip_if_unavailable!();
    let s = Scene::new().core(&["--slow-ms", "600000"]).build();
    let mut relay = s.start_relay(&["--read-timeout-ms", "300", "--late-reply-ms", "1500"]);
    let before = threads(&relay);
    let pending: Vec<_> = (0..4)
        .map(|i| send_in_background(&relay.addr, &msg(&format!("G-LR-SILENT-{i}"), 5, "SLOW")))
        .collect();
    for (i, p) in pending.into_iter().enumerate() {
        let m = msg(&format!("G-LR-SILENT-{i}"), 5, "SLOW");
        assert_eq!(p.join().unwrap(), short(&m, &E_UNKNOWN));
    }
    // The waiters end by their deadline; the connection threads ended with their channels.
    assert!(
        eventually(WAIT, || threads(&relay) <= before),
        "threads {} > {before} after the late deadline",
        threads(&relay)
    );
    for i in 0..4 {
        assert_eq!(
            s.db.state(&format!("G-LR-SILENT-{i}")),
            Some(State::Unknown)
        );
    }
    // A shutdown with a late call waiting ends by that call's deadline, not later.
    let m = msg("G-LR-SILENT-LAST", 5, "SLOW");
    assert_eq!(call(&relay.addr, &m), short(&m, &E_UNKNOWN));
    let stopped = Instant::now();
    relay.signal("-TERM");
    let status = relay.wait_exit(WAIT).expect("the relay exits");
    assert!(status.success(), "{status:?}");
    assert!(
        stopped.elapsed() < Duration::from_millis(1500 + 1000),
        "shutdown took {:?}",
        stopped.elapsed()
    );
}

#[test]
fn beyond_max_late_replies_a_timed_out_call_is_dropped_as_before() {
    skip_if_unavailable!();
    let s = Scene::new()
        .core(&["--slow-ms", "1200"])
        .relay(&["--read-timeout-ms", "300", "--max-late-replies", "1"])
        .build();
    let a = msg("G-LR-CAP-A", 5, "SLOW");
    let b = msg("G-LR-CAP-B", 6, "SLOW");
    let pa = send_in_background(s.addr(), &a);
    let pb = send_in_background(s.addr(), &b);
    assert_eq!(pa.join().unwrap(), short(&a, &E_UNKNOWN));
    assert_eq!(pb.join().unwrap(), short(&b, &E_UNKNOWN));
    assert!(eventually(WAIT, || s.core().bookings("G-LR-CAP-A") == 1
        && s.core().bookings("G-LR-CAP-B") == 1));
    // One was waited for and settled; the other was dropped and stays UNKNOWN.
    assert!(eventually(WAIT, || {
        let states = [s.db.state("G-LR-CAP-A"), s.db.state("G-LR-CAP-B")];
        states.contains(&Some(State::Done)) && states.contains(&Some(State::Unknown))
    }));
    assert!(
        s.relay().stderr().contains("late reply not awaited"),
        "{}",
        s.relay().stderr()
    );
}

#[test]
fn a_late_booking_after_resolve_took_a_404_puts_the_failed_row_right() {
    skip_if_unavailable!();
    // resolve asks while the core is still working (a --min-age far too short: the hazard
    // the README warns about) and marks the row FAILED; the late booking must not leave it
    // saying "never sent".
    let s = Scene::new()
        .core(&["--slow-ms", "2000"])
        .relay(&["--read-timeout-ms", "300"])
        .build();
    let g = "G-LR-404";
    let m = msg(g, 5, "SLOW");
    assert_eq!(s.call(&m), short(&m, &E_UNKNOWN));
    let r = s.resolve(&["--min-age", "0"]);
    r.expect_code(EXIT_SETTLED);
    assert!(r.stdout().contains("1 FAILED"), "{}", r.stdout());
    assert!(eventually(WAIT, || s.db.state(g) == Some(State::Done)));
    let r = s.reprocess(&["--max-attempts", "5"]);
    r.expect_code(EXIT_SETTLED);
    assert!(
        r.stdout().starts_with("reprocess: 0 examined"),
        "{}",
        r.stdout()
    );
    assert_eq!(s.core().bookings(g), 1);
}
