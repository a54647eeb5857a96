//! The relay's life: graceful shutdown, connection limits, many idle connections, and a
//! SIGKILL right after a reply.

mod common;

use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use common::*;
use ledger::State;

fn signal(server: &Server, sig: &str) {
    let st = Command::new("kill")
        .args([sig, &server.pid().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
}

#[test]
fn sigterm_finishes_requests_in_flight_and_exits_zero() {
    let core = coresim(&["--slow-ms", "1000"]);
    let db = Db::new();
    let mut relay = relay(&db, &core.url(), &[]);
    let mut idle = Chan::connect(&relay.addr);
    let addr = relay.addr.clone();
    let m = msg("G-TERM", 5, "SLOW");
    let m2 = m.clone();
    let in_flight = thread::spawn(move || call(&addr, &m2));
    assert!(eventually(Duration::from_secs(10), || db.state("G-TERM")
        == Some(State::Sent)));

    signal(&relay, "-TERM");
    assert_eq!(code(&in_flight.join().unwrap()), "0000");
    assert!(idle.closed_within(Duration::from_secs(5)));
    let status = relay
        .wait_exit(Duration::from_secs(10))
        .expect("relay exits");
    assert!(status.success(), "{status:?}");
    assert_eq!(db.state("G-TERM"), Some(State::Done));
    let sent: i64 = ledger::Ledger::open(&db.path)
        .unwrap()
        .connection()
        .query_row("SELECT count(*) FROM tx WHERE state='SENT'", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(sent, 0);
    assert!(relay.stderr().contains("shut down cleanly"));
}

#[test]
fn sigint_on_an_idle_relay_exits_zero_at_once() {
    let core = coresim(&[]);
    let db = Db::new();
    let mut relay = relay(&db, &core.url(), &[]);
    let _idle = Chan::connect(&relay.addr);
    signal(&relay, "-INT");
    let status = relay
        .wait_exit(Duration::from_secs(5))
        .expect("relay exits");
    assert!(status.success(), "{status:?}");
}

#[test]
fn connections_beyond_the_limit_are_closed_at_once_and_logged() {
    let core = coresim(&[]);
    let db = Db::new();
    let relay = relay(&db, &core.url(), &["--max-connections", "3"]);
    let mut held: Vec<Chan> = (0..3)
        .map(|i| {
            let mut c = Chan::connect(&relay.addr);
            assert_eq!(code(&c.call(&msg(&format!("G-LIM-{i}"), 5, ""))), "0000");
            c
        })
        .collect();
    let mut extra = Chan::connect(&relay.addr);
    assert!(extra.closed_within(Duration::from_secs(5)));
    assert!(eventually(Duration::from_secs(5), || relay
        .stderr()
        .contains("connection limit 3 reached")));
    // A freed place is taken again.
    drop(held.pop());
    assert!(eventually(Duration::from_secs(5), || {
        let mut c = Chan::connect(&relay.addr);
        c.send(&msg("G-LIM-AGAIN", 5, ""));
        c.s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut p = [0u8; 4];
        std::io::Read::read_exact(&mut c.s, &mut p).is_ok()
    }));
}

#[test]
fn a_thousand_idle_connections_do_not_slow_a_new_one() {
    let core = coresim(&[]);
    let db = Db::new();
    // All from 127.0.0.1: the per-peer limit (default 256) is raised for this test.
    let relay = relay(&db, &core.url(), &["--max-connections-per-peer", "1024"]);
    let idle: Vec<Chan> = (0..1000).map(|_| Chan::connect(&relay.addr)).collect();
    let t = Instant::now();
    assert_eq!(code(&call(&relay.addr, &msg("G-BUSY", 5, ""))), "0000");
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    let rss_kb = std::fs::read_to_string(format!("/proc/{}/status", relay.pid()))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:").map(|v| v.trim().to_string()));
    eprintln!("relay RSS with {} idle connections: {rss_kb:?}", idle.len());
}

#[test]
fn sigkill_right_after_a_reply_keeps_the_done_row() {
    let core = coresim(&[]);
    let db = Db::new();
    let mut relay = relay(&db, &core.url(), &[]);
    let m = msg("G-KILL", 5, "");
    let reply = call(&relay.addr, &m);
    relay.kill();
    let row = db.row("G-KILL").unwrap();
    assert_eq!(row.state, State::Done);
    assert_eq!(row.response.as_deref(), Some(&reply[..]));
    let again = relay_on(&db, &core);
    assert_eq!(call(&again.addr, &m), reply);
    assert_eq!(bookings(&core, "G-KILL"), 1);
}

fn relay_on(db: &Db, core: &Server) -> Server {
    relay(db, &core.url(), &[])
}
