//! The relay's life: graceful shutdown, connection limits, many idle connections, and a
//! SIGKILL right after a reply.

use std::time::{Duration, Instant};

use crate::util::*;

#[test]
fn sigterm_finishes_requests_in_flight_and_exits_zero() {
    skip_if_unavailable!();
    let core = Core::start(&["--slow-ms", "1000"]);
    let db = temp_ledger();
    let mut relay = start_relay(&db, &core.url(), &[]);
    let mut idle = Channel::connect(&relay.addr);
    let m = msg("G-TERM", 5, "SLOW");
    let in_flight = send_in_background(&relay.addr, &m);
    assert!(eventually(WAIT, || db.state("G-TERM") == Some(State::Sent)));

    relay.signal("-TERM");
    assert_eq!(code(&in_flight.join().unwrap()), "0000");
    assert!(idle.closed_within(Duration::from_secs(5)));
    let status = relay
        .wait_exit(Duration::from_secs(10))
        .expect("relay exits");
    assert_eq!(status.code(), Some(i32::from(EXIT_SETTLED)), "{status:?}");
    assert_eq!(db.state("G-TERM"), Some(State::Done));
    let sent = db.rows().iter().filter(|r| r.state == State::Sent).count();
    assert_eq!(sent, 0);
    assert!(relay.stderr().contains("shut down cleanly"));
}

#[test]
fn sigint_on_an_idle_relay_exits_zero_at_once() {
    skip_if_unavailable!();
    let core = Core::start(&[]);
    let db = temp_ledger();
    let mut relay = start_relay(&db, &core.url(), &[]);
    let _idle = Channel::connect(&relay.addr);
    relay.signal("-INT");
    let status = relay
        .wait_exit(Duration::from_secs(5))
        .expect("relay exits");
    assert_eq!(status.code(), Some(i32::from(EXIT_SETTLED)), "{status:?}");
}

#[test]
fn connections_beyond_the_limit_are_closed_at_once_and_logged() {
    skip_if_unavailable!();
    let s = Scene::new()
        .core(&[])
        .relay(&["--max-connections", "3"])
        .build();
    let mut held: Vec<Channel> = (0..3)
        .map(|i| {
            let mut c = Channel::connect(s.addr());
            assert_eq!(code(&c.call(&msg(&format!("G-LIM-{i}"), 5, ""))), "0000");
            c
        })
        .collect();
    let mut extra = Channel::connect(s.addr());
    assert!(extra.closed_within(Duration::from_secs(5)));
    assert!(eventually(Duration::from_secs(5), || s
        .relay()
        .stderr()
        .contains("connection limit 3 reached")));
    // A freed place is taken again.
    drop(held.pop());
    assert!(eventually(Duration::from_secs(5), || try_call(
        s.addr(),
        &msg("G-LIM-AGAIN", 5, ""),
        Duration::from_secs(2)
    )
    .is_some()));
}

#[test]
fn a_thousand_idle_connections_do_not_slow_a_new_one() {
    skip_if_unavailable!();
    // All from 127.0.0.1: the per-peer limit (default 256) is raised for this test.
    let s = Scene::new()
        .core(&[])
        .relay(&["--max-connections-per-peer", "1024"])
        .build();
    let idle: Vec<Channel> = (0..1000).map(|_| Channel::connect(s.addr())).collect();
    let t = Instant::now();
    assert_eq!(code(&s.call(&msg("G-BUSY", 5, ""))), "0000");
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    let rss_kb = std::fs::read_to_string(format!("/proc/{}/status", s.relay().pid()))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:").map(|v| v.trim().to_string()));
    eprintln!("relay RSS with {} idle connections: {rss_kb:?}", idle.len());
}

#[test]
fn sigkill_right_after_a_reply_keeps_the_done_row() {
    skip_if_unavailable!();
    let core = Core::start(&[]);
    let db = temp_ledger();
    let mut relay = start_relay(&db, &core.url(), &[]);
    let m = msg("G-KILL", 5, "");
    let reply = call(&relay.addr, &m);
    relay.kill();
    let row = db.row("G-KILL").unwrap();
    assert_eq!(row.state, State::Done);
    assert_eq!(row.response.as_deref(), Some(&reply[..]));
    let again = start_relay(&db, &core.url(), &[]);
    assert_eq!(call(&again.addr, &m), reply);
    assert_eq!(core.bookings("G-KILL"), 1);
}
