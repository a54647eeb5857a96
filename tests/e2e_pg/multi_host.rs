//! A multi-host database URL (contract §7: `postgres://…@h1:p1,h2:p2,h3:p3/db?
//! target_session_attrs=read-write`), the writable server listed last, after a host that is
//! down (nothing listens) and one that is frozen (it accepts the connection and never
//! answers, as a stopped postmaster's kernel does). The relay books through it, and every
//! tool works on it; the frozen host costs a share of the deadline, not every connection
//! (before, the client waited on it until the deadline and never tried the host after it).

use std::net::TcpListener;
use std::path::Path;

use crate::util::*;

/// A host that accepts connections and never answers: a listener nobody accepts from (the
/// kernel completes the handshake and keeps what the client sends), kept for the test.
fn frozen_host() -> (TcpListener, u16) {
    let l = TcpListener::bind("127.0.0.1:0").expect("a listener");
    let port = l.local_addr().expect("its address").port();
    (l, port)
}

/// `url` (one host, `127.0.0.1:PORT`) with `before` listed ahead of its host, and
/// `target_session_attrs=read-write`.
fn listed_after(url: &str, before: &[u16]) -> String {
    let (head, rest) = url.split_once("@127.0.0.1:").expect("a URL to 127.0.0.1");
    let hosts: Vec<String> = before.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let sep = if rest.contains('?') { '&' } else { '?' };
    format!(
        "{head}@{},127.0.0.1:{rest}{sep}target_session_attrs=read-write",
        hosts.join(",")
    )
}

#[test]
fn the_relay_and_every_tool_work_through_a_url_whose_writable_host_is_listed_last() {
    skip_if_unavailable!();
    let db = temp_ledger();
    let (_frozen, frozen) = frozen_host();
    let url = listed_after(db.arg(), &[dead_port(), frozen]);
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("journal.jsonl");
    let core = Core::start(&["--journal", journal.to_str().unwrap()]);

    let relay = Server::start(relay_command_at(&url, &core.url(), &[]));
    let m = msg("G-MULTI-1", 1500, "rent");
    let reply = call(&relay.addr, &m);
    assert_code(&reply, "0000");
    assert_eq!(call(&relay.addr, &m), reply, "the stored reply");
    // A new connection for each of many requests at once: each finds the writable host.
    std::thread::scope(|s| {
        for i in 0..8 {
            let addr = &relay.addr;
            s.spawn(move || {
                assert_code(&call(addr, &msg(&format!("G-MULTI-P{i}"), 10, "")), "0000")
            });
        }
    });
    assert_done_with(&db, &core, &m, &reply);
    assert!(
        core.by_guid().values().all(|&n| n == 1),
        "{:?}",
        core.by_guid()
    );
    // The relay names the ledger with every host, its password masked.
    assert!(
        relay.stderr().contains(&format!("127.0.0.1:{frozen}")),
        "{}",
        relay.stderr()
    );
    drop(relay);

    let journal = journal.to_str().unwrap();
    let from = TempLedger::new();
    from.create();
    for (name, args) in [
        (
            "resolve",
            vec!["--db", &url, "--core", &core.url(), "--min-age", "60"],
        ),
        (
            "reprocess",
            vec!["--db", &url, "--core", &core.url(), "--max-attempts", "3"],
        ),
        ("purge", vec!["--db", &url, "--days", "30"]),
        ("inspect", vec!["--db", &url]),
        ("inspect", vec!["--db", &url, "show", "G-MULTI-1"]),
        ("reconcile", vec!["--db", &url, "--journal", journal]),
    ] {
        let r = tool(name, &args);
        r.expect_code(EXIT_SETTLED);
        assert!(
            !r.stderr().contains("did not answer"),
            "{name}: {}",
            r.stderr()
        );
    }
    // migrate into a ledger named by such a URL (a schema of its own).
    let to = temp_ledger();
    let to_url = listed_after(to.arg(), &[dead_port(), frozen]);
    let r = tool("migrate", &["--from", from.arg(), "--to", &to_url]);
    r.expect_code(EXIT_SETTLED);
    assert!(Path::new(from.arg()).exists());
}

/// Every host down: one line that names each host and what it said, the password masked.
#[test]
fn every_host_down_is_one_line_naming_each() {
    let (a, b) = (dead_port(), dead_port());
    let url = format!("postgres://txrelay:Xq9pwZk7@127.0.0.1:{a},127.0.0.1:{b}/ledger");
    let r = tool("inspect", &["--db", &url]);
    r.expect_code(EXIT_FATAL);
    let err = r.stderr();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(!err.contains("Xq9pwZk7"), "{err}");
    assert!(
        err.contains("no host of the database URL gave a connection (127.0.0.1:")
            && err.contains(&format!("127.0.0.1:{a}: "))
            && err.contains(&format!("; 127.0.0.1:{b}: ")),
        "{err}"
    );
}
