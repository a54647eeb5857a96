//! A cancelled synchronous wait is not a commit (contract §7, v1.3; issue 42 item 2). With
//! the synchronous standby frozen, a claim's COMMIT waits for it; `pg_cancel_backend` on
//! that wait returns the COMMIT as a success, with only a warning that the row is on the
//! primary alone (lost in a failover). The relay must take that claim as not won: `E905`,
//! the core never called, the cut-short commit counted in
//! `txrelay_ledger_commits_not_replicated_total`. The row the primary kept is `SENT`, never
//! sent: a resend is `E903` (in flight), never a call, until `resolve --stale-sent` settles
//! it.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use testkit::bin;
use testkit::pg::Server;

use crate::util::*;

/// How long the test looks for the relay's claim waiting for the standby: well within the
/// relay's own deadline (5 s), after which it would answer `E905` anyway.
const FIND_WAIT: Duration = Duration::from_secs(4);

#[test]
fn a_claim_whose_wait_for_the_standby_is_cancelled_is_not_won() {
    let Some((server, standby)) = Server::own_with_sync_standby_or_skip() else {
        return;
    };
    let db = server.fresh_db();
    let rows = Rows::new(&db);
    let (core_proc, core) = coresim();
    let mut cmd = Command::new(bin("relay"));
    cmd.args(["--db", &db, "--listen", "127.0.0.1:0"])
        .args(["--core", &core_proc.url(), "--admin", "127.0.0.1:0"])
        .env("RUST_LOG", "info");
    let relay = Proc::start(cmd);
    let admin = admin_addr(&relay);
    assert_eq!(call(&relay.addr, &guid("before")).code, "0000");
    let booked_before = core.stats().expect("stats")["bookings"].as_u64();

    standby.freeze().expect("freeze the standby");
    let g = guid("cancelled");
    let addr = relay.addr.clone();
    let sent = {
        let g = g.clone();
        std::thread::spawn(move || call(&addr, &g))
    };
    let cancelled = cancel_the_wait_for_the_standby(&rows);
    let c = sent.join().expect("the call");
    eprintln!(
        "sync_cancel: the claim's wait cancelled ({cancelled} backend): {} after {} ms",
        c.code,
        ms(c.elapsed)
    );
    assert_eq!(cancelled, 1, "no claim of the relay waited for the standby");
    assert_e905_in_time(&c, "the wait for the standby cancelled");
    let stats = core.stats().expect("stats");
    assert_eq!(
        core.bookings(&g).expect("bookings"),
        0,
        "the core booked it"
    );
    assert_eq!(stats["bookings"].as_u64(), booked_before, "{stats}");
    let text = scrape(&admin);
    assert!(
        text.lines()
            .any(|l| l == "txrelay_ledger_commits_not_replicated_total 1"),
        "the cut-short commit was not counted:\n{text}"
    );
    assert!(
        relay.stderr().contains("not replicated"),
        "no warning logged:\n{}",
        relay.stderr()
    );

    // The primary kept the row (committed locally): SENT, attempt 1, never sent. A resend is
    // in flight as far as the ledger says, never a call.
    standby.thaw().expect("thaw the standby");
    let row = wait_for_row(&rows, &g);
    assert_eq!((row.state.as_str(), row.attempts), ("SENT", 1), "{row:?}");
    assert_eq!(call(&relay.addr, &g).code, "E903");
    assert_eq!(
        core.bookings(&g).expect("bookings"),
        0,
        "the resend was sent"
    );
    assert_eq!(call(&relay.addr, &guid("after")).code, "0000");
}

/// Finds the relay's session whose COMMIT waits for the standby and cancels that wait; how
/// many sessions were cancelled.
fn cancel_the_wait_for_the_standby(rows: &Rows) -> i64 {
    let deadline = Instant::now() + FIND_WAIT;
    loop {
        let n: i64 = rows.with(|c| {
            c.query_one(
                "SELECT count(pg_cancel_backend(pid)) FROM pg_stat_activity \
                 WHERE application_name LIKE 'txrelay-relay%' AND state = 'active' \
                 AND wait_event = 'SyncRep'",
                &[],
            )?
            .try_get(0)
        });
        if n > 0 || Instant::now() > deadline {
            return n;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The admin address a relay logged (`admin listening on ADDR`, at info).
fn admin_addr(relay: &Proc) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let found = relay
            .stderr()
            .lines()
            .find_map(|l| l.split("admin listening on ").nth(1))
            .and_then(|rest| rest.split(' ').next())
            .map(str::to_string);
        if let Some(a) = found {
            return a;
        }
        assert!(
            Instant::now() < deadline,
            "no admin address logged:\n{}",
            relay.stderr()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `GET /metrics` on the admin port: the body.
fn scrape(admin: &str) -> String {
    let mut s = TcpStream::connect(admin).expect("connect to the admin port");
    s.set_read_timeout(Some(Duration::from_secs(10))).ok();
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: {admin}\r\nConnection: close\r\n\r\n"
    )
    .expect("send");
    let mut out = String::new();
    s.read_to_string(&mut out).expect("an answer");
    out.split_once("\r\n\r\n")
        .map_or(out.clone(), |(_, b)| b.to_string())
}
