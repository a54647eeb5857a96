//! The relay end to end: real `relay` and `coresim` processes, a temp ledger each, and
//! assertions on exact reply bytes, ledger rows and the core's per-GUID booking counts.

mod common;

use std::net::TcpListener;
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use common::*;
use ledger::State;
use ledger::wire;

#[test]
fn booked_then_replayed_byte_for_byte() {
    let core = coresim(&[]);
    let db = Db::new();
    let relay = relay(&db, &core.url(), &[]);
    let m = msg("G-OK-1", 1500, "rent");

    let first = call(&relay.addr, &m);
    assert_eq!(first.len(), 90);
    assert_eq!(
        &first[..45],
        format!("RTRNF{:<36}0000", "G-OK-1").as_bytes()
    );
    let r = wire::parse_reply(&first).unwrap();
    let b = r.booking.unwrap();
    assert_eq!(b.amount, 1500);
    assert!(b.core_ref.starts_with('C'), "{b:?}");
    assert_eq!(b.booked_at.len(), 14);

    let again = call(&relay.addr, &m);
    assert_eq!(
        again, first,
        "a resend gets the stored reply, byte for byte"
    );
    assert_eq!(bookings(&core, "G-OK-1"), 1);

    let row = db.row("G-OK-1").unwrap();
    assert_eq!(row.state, State::Done);
    assert_eq!(row.rsp_code.as_deref(), Some("0000"));
    assert_eq!(row.request.as_deref(), Some(&m[..]));
    assert_eq!(row.response.as_deref(), Some(&first[..]));
    assert_eq!(row.attempts, Some(1));
    assert_eq!(row.tx_code.as_deref(), Some("TRNF"));
}

#[test]
fn fifty_simultaneous_sends_of_one_guid_book_once() {
    const N: usize = 50;
    let slow = Duration::from_millis(2000);
    let core = coresim(&["--slow-ms", "2000"]);
    let db = Db::new();
    let relay = relay(&db, &core.url(), &["--read-timeout-ms", "10000"]);
    let m = Arc::new(msg("G-RACE", 700, "SLOW race"));
    let barrier = Arc::new(Barrier::new(N));
    let handles: Vec<_> = (0..N)
        .map(|_| {
            let (m, barrier, addr) = (m.clone(), barrier.clone(), relay.addr.clone());
            thread::spawn(move || {
                let mut c = Chan::connect(&addr);
                barrier.wait();
                let t = Instant::now();
                let reply = c.call(&m);
                (code(&reply), t.elapsed())
            })
        })
        .collect();
    let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let ok = results.iter().filter(|(c, _)| c == "0000").count();
    let busy: Vec<_> = results.iter().filter(|(c, _)| c == "E903").collect();
    assert_eq!(ok, 1, "{results:?}");
    assert_eq!(busy.len(), N - 1, "{results:?}");
    for (_, t) in busy {
        assert!(*t < slow / 2, "E903 must come at once, took {t:?}");
    }
    assert_eq!(bookings(&core, "G-RACE"), 1);
    assert_eq!(db.state("G-RACE"), Some(State::Done));
}

#[test]
fn read_timeout_is_unknown_and_a_resend_never_reaches_the_core() {
    let core = coresim(&["--slow-ms", "1000"]);
    let db = Db::new();
    let relay = relay(&db, &core.url(), &["--read-timeout-ms", "300"]);
    let m = msg("G-TIMEOUT", 42, "SLOW");
    let first = call(&relay.addr, &m);
    assert_eq!(first, wire::reply_to(&m, b"E901", None));
    let row = db.row("G-TIMEOUT").unwrap();
    assert_eq!(
        (row.state, row.rsp_code.as_deref()),
        (State::Unknown, Some("E901"))
    );

    let t = Instant::now();
    let again = call(&relay.addr, &m);
    assert_eq!(again, first);
    assert!(
        t.elapsed() < Duration::from_millis(250),
        "no core call on resend"
    );
    // The slow core did book the first send; nothing else ever booked.
    assert!(eventually(Duration::from_secs(10), || bookings(
        &core,
        "G-TIMEOUT"
    ) == 1));
    assert_eq!(db.row("G-TIMEOUT").unwrap().attempts, Some(1));
    assert_eq!(stats(&core)["bookings"], 1);
}

/// A port with nothing listening on it (a core that is down).
fn dead_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn core_down_is_failed_and_a_resend_after_recovery_books_once() {
    let port = dead_port();
    let db = Db::new();
    let relay = relay(&db, &format!("http://127.0.0.1:{port}"), &[]);
    let m = msg("G-DOWN", 900, "");
    let first = call(&relay.addr, &m);
    assert_eq!(first, wire::reply_to(&m, b"E902", None));
    let row = db.row("G-DOWN").unwrap();
    assert_eq!((row.state, row.attempts), (State::Failed, Some(1)));
    assert_eq!(row.rsp_code.as_deref(), Some("E902"));

    let listen = format!("127.0.0.1:{port}");
    let core = Server::spawn("coresim", &["--listen", &listen]);
    let second = call(&relay.addr, &m);
    assert_eq!(code(&second), "0000");
    let row = db.row("G-DOWN").unwrap();
    assert_eq!((row.state, row.attempts), (State::Done, Some(2)));
    assert_eq!(row.response.as_deref(), Some(&second[..]));
    assert_eq!(bookings(&core, "G-DOWN"), 1);
    assert_eq!(call(&relay.addr, &m), second);
}

#[test]
fn dropped_connection_and_server_error_are_unknown() {
    let core = coresim(&[]);
    let db = Db::new();
    let relay = relay(&db, &core.url(), &[]);
    for (guid, memo, booked) in [("G-DROP", "DROP", 1), ("G-500", "FAIL500", 0)] {
        let m = msg(guid, 10, memo);
        let reply = call(&relay.addr, &m);
        assert_eq!(reply, wire::reply_to(&m, b"E901", None), "{memo}");
        assert_eq!(db.state(guid), Some(State::Unknown), "{memo}");
        assert_eq!(call(&relay.addr, &m), reply, "{memo}: resend answers E901");
        assert_eq!(bookings(&core, guid), booked, "{memo}");
        assert_eq!(db.row(guid).unwrap().attempts, Some(1), "{memo}");
    }
}

#[test]
fn business_rejection_is_done_and_replayed() {
    let core = coresim(&[]);
    let db = Db::new();
    let relay = relay(&db, &core.url(), &[]);
    let m = msg("G-REJ", 10, "REJECT me");
    let reply = call(&relay.addr, &m);
    assert_eq!(reply, wire::reply_to(&m, b"B001", None));
    let row = db.row("G-REJ").unwrap();
    assert_eq!(
        (row.state, row.rsp_code.as_deref()),
        (State::Done, Some("B001"))
    );
    assert_eq!(call(&relay.addr, &m), reply);
    assert_eq!(stats(&core)["bookings"], 0);
}

#[test]
fn same_guid_for_another_request_is_e904_and_changes_nothing() {
    let core = coresim(&[]);
    let db = Db::new();
    let relay = relay(&db, &core.url(), &[]);
    let m = msg("G-REUSE", 100, "a");
    assert_eq!(code(&call(&relay.addr, &m)), "0000");
    let before = db.row("G-REUSE").unwrap();
    for other in [msg("G-REUSE", 101, "a"), msg("G-REUSE", 100, "b")] {
        assert_eq!(
            call(&relay.addr, &other),
            wire::reply_to(&other, b"E904", None)
        );
    }
    assert_eq!(db.row("G-REUSE").unwrap(), before);
    assert_eq!(bookings(&core, "G-REUSE"), 1);
}

#[test]
fn malformed_requests_get_e900_write_nothing_and_keep_the_connection() {
    let core = coresim(&[]);
    let db = Db::new();
    let relay = relay(&db, &core.url(), &[]);
    let good = msg("G-GOOD", 100, "ok");
    let set = |range: std::ops::Range<usize>, v: &[u8]| {
        let mut m = msg("G-BAD", 100, "x");
        m[range].copy_from_slice(v);
        m
    };
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("short", msg("G-BAD", 100, "x")[..125].to_vec()),
        ("long", [msg("G-BAD", 100, "x"), b"!".to_vec()].concat()),
        ("empty", Vec::new()),
        ("kind", set(0..1, b"R")),
        ("tx_code", set(1..5, b"XFER")),
        ("rsp_code", set(41..45, b"0000")),
        ("guid blank", set(5..41, &[b' '; 36])),
        ("guid char", set(5..6, b"/")),
        ("guid inner space", set(7..8, b" ")),
        ("from", set(45..46, b"A")),
        ("to", set(60..61, b" ")),
        ("amount digit", set(80..81, b"x")),
        ("amount zero", set(73..86, b"0000000000000")),
        ("memo utf8", set(86..87, &[0xff])),
    ];
    let mut c = Chan::connect(&relay.addr);
    for (what, bad) in &cases {
        let reply = c.call(bad);
        // E900 echoes the printable bytes at the tx_code and guid offsets, spaces elsewhere.
        let mut expect = *b"R                                        E900";
        for (e, b) in expect[1..41].iter_mut().zip(bad.iter().skip(1)) {
            if (0x20..=0x7e).contains(b) {
                *e = *b;
            }
        }
        assert_eq!(
            String::from_utf8_lossy(&reply),
            String::from_utf8_lossy(&expect),
            "{what}"
        );
    }
    assert_eq!(db.count(), 0, "nothing written for malformed requests");
    assert_eq!(code(&c.call(&good)), "0000", "the connection still works");
    assert_eq!(db.count(), 1);
    assert_eq!(stats(&core)["bookings"], 1);
}

#[test]
fn a_bad_length_prefix_closes_only_its_own_connection() {
    let core = coresim(&[]);
    let db = Db::new();
    let relay = relay(&db, &core.url(), &[]);
    let mut other = Chan::connect(&relay.addr);
    let mut bad = Chan::connect(&relay.addr);
    bad.send_raw(b"01x6QTRNF");
    assert!(bad.closed_within(Duration::from_secs(5)));
    assert_eq!(code(&other.call(&msg("G-AFTER", 5, ""))), "0000");
}

#[test]
fn a_client_stalled_mid_frame_blocks_nobody_and_is_closed() {
    let core = coresim(&[]);
    let db = Db::new();
    let relay = relay(&db, &core.url(), &["--frame-timeout-ms", "500"]);
    let mut stalled = Chan::connect(&relay.addr);
    stalled.send_raw(&wire::frame(&msg("G-STALL", 5, ""))[..50]);
    let t = Instant::now();
    assert_eq!(code(&call(&relay.addr, &msg("G-FREE", 5, ""))), "0000");
    assert!(t.elapsed() < Duration::from_millis(450));
    assert!(stalled.closed_within(Duration::from_secs(5)));
    assert_eq!(db.state("G-STALL"), None);
}

#[test]
fn an_idle_connection_is_closed() {
    let core = coresim(&[]);
    let db = Db::new();
    let relay = relay(&db, &core.url(), &["--idle-timeout-secs", "1"]);
    let mut c = Chan::connect(&relay.addr);
    assert_eq!(code(&c.call(&msg("G-IDLE", 5, ""))), "0000");
    let t = Instant::now();
    assert!(c.closed_within(Duration::from_secs(5)));
    assert!(
        t.elapsed() >= Duration::from_millis(900),
        "{:?}",
        t.elapsed()
    );
}

#[test]
fn requests_on_one_connection_are_answered_in_order() {
    let core = coresim(&["--slow-ms", "200"]);
    let db = Db::new();
    let relay = relay(&db, &core.url(), &[]);
    let msgs: Vec<_> = (0..6)
        .map(|i| {
            msg(
                &format!("G-ORD-{i}"),
                10 + i,
                if i == 0 { "SLOW" } else { "" },
            )
        })
        .collect();
    let mut c = Chan::connect(&relay.addr);
    let mut all = Vec::new();
    for m in &msgs {
        all.extend(wire::frame(m));
    }
    all.extend(wire::frame(&msgs[1])); // a resend, pipelined too
    c.send_raw(&all);
    let replies: Vec<_> = (0..7).map(|_| c.recv()).collect();
    for (i, r) in replies.iter().take(6).enumerate() {
        let p = wire::parse_reply(r).unwrap();
        assert_eq!(
            (p.guid.as_str(), p.code.as_str()),
            (format!("G-ORD-{i}").as_str(), "0000")
        );
    }
    assert_eq!(replies[6], replies[1]);
}

#[test]
fn a_locked_ledger_is_e905_and_nothing_is_booked() {
    let core = coresim(&[]);
    let db = Db::new();
    let relay = relay(&db, &core.url(), &[]);
    let lock = rusqlite::Connection::open(&db.path).unwrap();
    lock.execute_batch("BEGIN IMMEDIATE").unwrap();
    let m = msg("G-LOCKED", 5, "");
    let reply = call(&relay.addr, &m);
    assert_eq!(reply, wire::reply_to(&m, b"E905", None));
    lock.execute_batch("ROLLBACK").unwrap();
    assert_eq!(db.state("G-LOCKED"), None);
    assert_eq!(stats(&core)["bookings"], 0);
    // Once the ledger is free the same request goes through.
    assert_eq!(code(&call(&relay.addr, &m)), "0000");
}

#[test]
fn a_result_that_cannot_be_recorded_is_e901_and_the_row_stays_sent() {
    let core = coresim(&["--slow-ms", "1000"]);
    let db = Db::new();
    let relay = relay(&db, &core.url(), &[]);
    let m = msg("G-NORECORD", 5, "SLOW");
    let addr = relay.addr.clone();
    let m2 = m.clone();
    let pending = thread::spawn(move || call(&addr, &m2));
    assert!(eventually(Duration::from_secs(10), || db
        .state("G-NORECORD")
        == Some(State::Sent)));
    let lock = rusqlite::Connection::open(&db.path).unwrap();
    lock.execute_batch("BEGIN IMMEDIATE").unwrap();
    let reply = pending.join().unwrap();
    lock.execute_batch("ROLLBACK").unwrap();
    assert_eq!(reply, wire::reply_to(&m, b"E901", None));
    assert_eq!(db.state("G-NORECORD"), Some(State::Sent));
    assert_eq!(bookings(&core, "G-NORECORD"), 1);
    assert_eq!(
        code(&call(&relay.addr, &m)),
        "E903",
        "in flight for ever: resolve's job"
    );
}

#[test]
fn a_restarted_relay_replays_from_the_same_ledger() {
    let core = coresim(&[]);
    let db = Db::new();
    let m = msg("G-RESTART", 77, "");
    let mut first_relay = relay(&db, &core.url(), &[]);
    let first = call(&first_relay.addr, &m);
    assert_eq!(code(&first), "0000");
    first_relay.kill();
    let second_relay = relay(&db, &core.url(), &[]);
    assert_eq!(call(&second_relay.addr, &m), first);
    assert_eq!(bookings(&core, "G-RESTART"), 1);
}

#[test]
fn hand_made_rows_are_answered_safely() {
    let core = coresim(&[]);
    let db = Db::new();
    let relay = relay(&db, &core.url(), &[]);
    drop(call(&relay.addr, &msg("G-WARMUP", 1, ""))); // the relay created the schema
    let done = msg("G-HAND-DONE", 5, "");
    let failed = msg("G-HAND-FAILED", 5, "");
    db.exec(
        "INSERT INTO tx (guid, state, updated_at) VALUES ('G-HAND-NULL', 'DONE', datetime('now'));",
    );
    let conn = rusqlite::Connection::open(&db.path).unwrap();
    conn.execute(
        "INSERT INTO tx (guid, state, request, updated_at) VALUES ('G-HAND-DONE', 'DONE', ?1, datetime('now'))",
        [&done],
    )
    .unwrap();
    conn.execute(
        "INSERT INTO tx (guid, state, request, rsp_code, attempts, updated_at) VALUES ('G-HAND-FAILED', 'FAILED', ?1, 'E902', 1, datetime('now'))",
        [&failed],
    )
    .unwrap();
    // No stored request: E904. DONE without a stored reply: E901, never a made-up body.
    let null = msg("G-HAND-NULL", 5, "");
    assert_eq!(
        call(&relay.addr, &null),
        wire::reply_to(&null, b"E904", None)
    );
    assert_eq!(
        call(&relay.addr, &done),
        wire::reply_to(&done, b"E901", None)
    );
    // FAILED with the same request: proven unsent, so it is re-claimed and sent.
    assert_eq!(code(&call(&relay.addr, &failed)), "0000");
    assert_eq!(db.row("G-HAND-FAILED").unwrap().attempts, Some(2));
    assert_eq!(
        bookings(&core, "G-HAND-NULL") + bookings(&core, "G-HAND-DONE"),
        0
    );
}

#[test]
fn bad_flags_and_fatal_errors_are_one_clear_line() {
    let r = Run::new("relay", &["--db", "x.db", "--read-timeout-ms", "soon"]);
    r.expect_code(2);
    assert!(r.stderr().contains("--read-timeout-ms"), "{}", r.stderr());
    let r = Run::new("relay", &["--listen", "127.0.0.1:0"]);
    r.expect_code(2);
    assert!(r.stderr().contains("--db"), "{}", r.stderr());
    let r = Run::new(
        "relay",
        &["--db", "/nonexistent-dir/x.db", "--listen", "127.0.0.1:0"],
    );
    r.expect_code(1);
    assert_eq!(r.stderr().lines().count(), 1, "{}", r.stderr());
    assert!(
        r.stderr().contains("/nonexistent-dir/x.db"),
        "{}",
        r.stderr()
    );
    let db = Db::new();
    let r = Run::new(
        "relay",
        &[
            "--db",
            db.arg(),
            "--listen",
            "127.0.0.1:0",
            "--core",
            "ftp://x",
        ],
    );
    r.expect_code(1);
    assert!(r.stderr().contains("ftp://x"), "{}", r.stderr());
}
