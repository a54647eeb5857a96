//! Late replies: the core's answer to a call the relay gave up on at its read timeout is
//! still listened for (`--late-reply-ms`); a booking or a rejection settles the UNKNOWN row,
//! so that the next resend gets the booking instead of E901.

use std::time::{Duration, Instant};

use wire::E_UNKNOWN;

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

#[test]
fn a_rejection_after_the_read_timeout_settles_the_row_with_its_code() {
    skip_if_unavailable!();
    let s = Scene::new()
        .core(&["--slow-ms", "1500"])
        .relay(&["--read-timeout-ms", "500"])
        .build();
    let g = "G-LR-REJECTED";
    let m = msg(g, 778, "SLOWREJECT");
    assert_eq!(s.call(&m), short(&m, &E_UNKNOWN));
    assert_eq!(s.db.state(g), Some(State::Unknown));
    assert!(eventually(WAIT, || s.db.state(g) == Some(State::Done)));
    let row = s.db.row(g).unwrap();
    assert_eq!(
        (row.rsp_code.as_deref(), row.attempts),
        (Some("B001"), Some(1))
    );
    assert_eq!(
        s.call(&m),
        short(&m, b"B001"),
        "the resend gets the rejection"
    );
    assert_eq!(s.core().bookings(g), 0);
    assert!(
        s.relay().stderr().contains("late reply B001"),
        "{}",
        s.relay().stderr()
    );
}

#[test]
fn attempt_1s_late_booking_while_attempt_2_holds_the_row_changes_nothing_and_is_evidence() {
    skip_if_unavailable!();
    // resolve takes a 404 from a core still at work (--min-age 0: the hazard) and the channel
    // resends at once: attempt 2 is sent, and attempt 1's booking comes back while attempt 2
    // holds the row. The core has now booked the GUID twice; the ledger keeps attempt 2 and
    // must keep attempt 1's booking as evidence, in the history, the log and a metric.
    let db = temp_ledger();
    let core = Core::start(&["--slow-ms", "3000"]);
    let mut cmd = relay_command(&db, &core.url(), &["--admin", "127.0.0.1:0"]);
    cmd.args(["--read-timeout-ms", "300", "--late-reply-ms", "5000"]);
    let relay = Server::start(cmd);
    let admin = admin_addr(&relay);
    let g = "G-LR-TWICE";
    let m = msg(g, 4242, "SLOW");
    assert_eq!(call(&relay.addr, &m), short(&m, &E_UNKNOWN));
    resolve(&db, &core.url(), &["--min-age", "0"]).expect_code(EXIT_SETTLED);
    assert_eq!(db.state(g), Some(State::Failed));
    assert_eq!(call(&relay.addr, &m), short(&m, &E_UNKNOWN), "attempt 2");
    assert_eq!(db.row(g).unwrap().attempts, Some(2));

    // Attempt 2's booking settles the row, and attempt 1's is recorded as evidence. Attempt
    // 1's usually comes back first (it was sent first), but not always on a loaded machine
    // (once, in a full test run, the row was DONE before attempt 1's waiter had written):
    // the wait is for both, in either order.
    let is_evidence = |h: &ledger::state::HistoryRow| {
        h.reason
            .as_deref()
            .is_some_and(|r| r.contains("double booking"))
    };
    assert!(eventually(WAIT, || core.bookings(g) == 2));
    assert!(eventually(WAIT, || {
        db.state(g) == Some(State::Done) && db.store().history(g).unwrap().iter().any(is_evidence)
    }));
    let row = db.row(g).unwrap();
    assert_eq!(
        (row.rsp_code.as_deref(), row.attempts),
        (Some("0000"), Some(2))
    );
    let first = core.inquiry(g).expect("booked");
    let ours = wire::parse_reply(row.response.as_deref().unwrap())
        .unwrap()
        .booking
        .unwrap();
    assert_ne!(
        Some(ours.core_ref.as_str()),
        first["core_ref"].as_str(),
        "the row holds attempt 2's booking"
    );

    let history = db.store().history(g).unwrap();
    let evidence: Vec<_> = history.iter().filter(|h| is_evidence(h)).collect();
    assert_eq!(evidence.len(), 1, "{history:#?}");
    let e = evidence[0];
    let reason = e.reason.as_deref().unwrap();
    assert!(
        reason.contains(&format!(
            "attempt 1 booked: core_ref {}, amount 4242, booked_at ",
            first["core_ref"].as_str().unwrap()
        )) && reason.contains("after attempt 2 claimed the row"),
        "{reason}"
    );
    assert_eq!(
        (e.attempts, e.rsp_code.as_deref(), e.who.as_str()),
        (Some(1), Some("0000"), "relay")
    );
    assert_eq!(e.from_state, e.to_state, "evidence, not a change");
    let (_, text) = http_get(&admin, "/metrics");
    assert_eq!(sample(&text, "txrelay_possible_double_bookings_total"), 1.0);
    // The warning is logged just after the evidence is written.
    assert!(
        eventually(WAIT, || relay
            .stderr()
            .contains("may have booked this GUID twice")),
        "{}",
        relay.stderr()
    );
}
