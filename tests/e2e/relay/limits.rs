//! What the relay refuses at start (bad flags, a core call that may outlast the stale-sent
//! floor, more connections than its descriptors allow) and the per-peer connection limit.

use std::process::Command;
use std::time::Duration;

use wire::E_NOT_SENT;

use crate::util::*;

#[test]
fn bad_flags_and_fatal_errors_are_one_clear_line() {
    skip_if_unavailable!();
    let r = Run::new("relay", &["--db", "x.db", "--read-timeout-ms", "soon"]);
    r.expect_code(EXIT_USAGE);
    assert!(r.stderr().contains("--read-timeout-ms"), "{}", r.stderr());
    let r = Run::new("relay", &["--listen", "127.0.0.1:0"]);
    r.expect_code(EXIT_USAGE);
    assert!(r.stderr().contains("--db"), "{}", r.stderr());
    let db = temp_ledger();
    for unusable in unusable_ledgers(&db) {
        let r = Run::new("relay", &["--db", &unusable, "--listen", "127.0.0.1:0"]);
        r.expect_code(EXIT_FATAL);
        assert_eq!(r.stderr().lines().count(), 1, "{}", r.stderr());
        assert!(r.stderr().contains(&unusable), "{}", r.stderr());
    }
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
    r.expect_code(EXIT_FATAL);
    assert!(r.stderr().contains("ftp://x"), "{}", r.stderr());
}

#[test]
fn the_relay_refuses_a_core_call_that_may_take_over_30_seconds() {
    skip_if_unavailable!();
    let db = temp_ledger();
    let core = dead_url();
    let base = ["--db", db.arg(), "--listen", "127.0.0.1:0", "--core", &core];
    for (connect, read) in [("1000", "40000"), ("20000", "10001")] {
        let args = [
            &base[..],
            &["--connect-timeout-ms", connect, "--read-timeout-ms", read],
        ]
        .concat();
        let r = Run::with_env("relay", &args, &[("RUST_LOG", "info")]);
        r.expect_code(EXIT_USAGE);
        assert!(
            r.stderr().contains("--read-timeout-ms") && r.stderr().contains("--connect-timeout-ms"),
            "{}",
            r.stderr()
        );
        assert_eq!(
            r.stderr()
                .lines()
                .filter(|l| l.starts_with("error:"))
                .count(),
            1,
            "one message: {}",
            r.stderr()
        );
        assert!(!r.stdout().contains("listening on"), "{}", r.stdout());
        assert!(!db.created(), "refused before the ledger is opened");
    }
    // Exactly 30 s is allowed.
    let ok = start_relay(
        &db,
        &core,
        &["--connect-timeout-ms", "1000", "--read-timeout-ms", "29000"],
    );
    let m = msg("G-30S", 5, "");
    assert_eq!(call(&ok.addr, &m), short(&m, &E_NOT_SENT));
}

/// The relay run through `bash -c '<limits>; exec "$0" "$@"'`, so that it starts under the
/// given `ulimit`s with the bash process's PID.
fn relay_under_ulimit(limits: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new("bash");
    cmd.arg("-c")
        .arg(format!("{limits}; exec \"$0\" \"$@\""))
        .arg(testkit::bin("relay"))
        .args(args)
        .env("RUST_LOG", "info");
    cmd
}

/// (soft, hard) "Max open files" of a running process.
fn open_files_limit(pid: u32) -> (String, String) {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap_or_else(|| panic!("no Max open files in {limits}"));
    let mut f = line["Max open files".len()..].split_whitespace();
    (f.next().unwrap().to_string(), f.next().unwrap().to_string())
}

sqlite_only! {
    "the descriptor budget counts SQLite's files per ledger connection",
    fn the_relay_raises_its_descriptor_limit_and_refuses_max_connections_that_cannot_fit() {
        let db = temp_ledger();
        let core = dead_url();
        let args = ["--db", db.arg(), "--listen", "127.0.0.1:0", "--core", &core];

        let raised = Server::start(relay_under_ulimit("ulimit -Sn 256", &args));
        let (soft, hard) = open_files_limit(raised.pid());
        assert_eq!(soft, hard, "soft limit raised to the hard limit");
        assert_ne!(soft, "256", "raised");
        drop(raised);

        let with_max = [&args[..], &["--max-connections", "1024"]].concat();
        let r = Run::command(
            relay_under_ulimit("ulimit -n 512", &with_max),
            Duration::from_secs(10),
        );
        r.expect_code(EXIT_FATAL);
        assert_eq!(r.stderr().lines().count(), 1, "one line: {}", r.stderr());
        assert!(r.stderr().contains("--max-connections"), "{}", r.stderr());
        assert!(!r.stdout().contains("listening on"), "{}", r.stdout());

        // What fits under the same limit starts.
        let small = [
            &args[..],
            &["--max-connections", "100", "--max-late-replies", "64"],
        ]
        .concat();
        let fits = Server::start(relay_under_ulimit("ulimit -n 512", &small));
        assert_eq!(open_files_limit(fits.pid()), ("512".into(), "512".into()));
    }
}

#[test]
fn one_peer_at_its_limit_does_not_lock_out_another() {
    skip_if_unavailable!();
    let s = Scene::new()
        .core(&[])
        .relay(&["--max-connections-per-peer", "2"])
        .build();
    let mut c1 = Channel::connect(s.addr());
    let mut c2 = Channel::connect(s.addr());
    // Served, so both are counted against 127.0.0.1.
    assert_eq!(code(&c1.call(&msg("G-PEER-1", 1, ""))), "0000");
    assert_eq!(code(&c2.call(&msg("G-PEER-2", 2, ""))), "0000");

    let mut third = Channel::connect(s.addr());
    assert!(
        third.closed_within(Duration::from_secs(5)),
        "a third connection from 127.0.0.1 is closed at once"
    );
    assert!(
        eventually(WAIT, || s.relay().stderr().lines().any(|l| l
            .contains("per-peer connection limit 2")
            && l.contains("127.0.0.1"))),
        "logged: {}",
        s.relay().stderr()
    );

    // Another source address is served.
    let mut other = Channel::connect_from("127.0.0.2:0", s.addr());
    assert_eq!(other.local_addr().ip().to_string(), "127.0.0.2");
    let m = msg("G-PEER-OTHER", 3, "");
    let reply = other.call(&m);
    assert_eq!(code(&reply), "0000");
    assert_eq!(s.db.row("G-PEER-OTHER").unwrap().response, Some(reply));

    // A freed slot lets 127.0.0.1 in again.
    drop(c1);
    let again = msg("G-PEER-AGAIN", 4, "");
    let mut reply = None;
    assert!(
        eventually(WAIT, || {
            reply = try_call(s.addr(), &again, Duration::from_secs(5));
            reply.is_some()
        }),
        "127.0.0.1 is served again after one of its connections closed"
    );
    assert_eq!(code(&reply.unwrap()), "0000");
    assert_eq!(code(&c2.call(&msg("G-PEER-2B", 5, ""))), "0000");
    for g in [
        "G-PEER-1",
        "G-PEER-2",
        "G-PEER-OTHER",
        "G-PEER-AGAIN",
        "G-PEER-2B",
    ] {
        assert_eq!(s.core().bookings(g), 1, "{g}");
    }
}
