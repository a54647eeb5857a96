//! What the relay says when it starts (issue 40.7): its ledger (a PostgreSQL URL's password
//! masked), core, listeners and limits in a few INFO lines; one inquiry of a GUID never sent
//! to its core, whose answer must be the core's JSON 404 — a core that is down or a server
//! that is not the core is a loud warning and `txrelay_core_start_probe{result=…}`, never a
//! refusal to start; and an invalid `--core` refused before the ledger is touched. Also (issue
//! 40.9): every outcome of a core call is a series at 0 in the first scrape, before the first
//! call, so that an alert's `rate()` sees an outage from its first E902.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::thread;
use std::time::Duration;

use super::metrics::{relay_with_admin, scrape};
use crate::util::*;

/// The probe's result in a scrape: the one `result` at 1 (failing unless exactly one is).
fn probe_result(text: &str) -> String {
    let at_one: Vec<String> = ["ok", "unreachable", "not_the_core", "other"]
        .iter()
        .filter(|r| sample(text, &format!("txrelay_core_start_probe{{result=\"{r}\"}}")) == 1.0)
        .map(|r| r.to_string())
        .collect();
    assert_eq!(at_one.len(), 1, "{at_one:?}\n{text}");
    at_one[0].clone()
}

/// The relay's WARN lines about its probe.
fn probe_warnings(relay: &Server) -> Vec<String> {
    relay
        .stderr()
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("core probe"))
        .map(str::to_string)
        .collect()
}

/// An HTTP server that is not the core: every request answered `status` with `body`. Its
/// base URL.
fn not_the_core(status: &'static str, content_type: &'static str, body: &'static str) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { continue };
            let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
            let mut head = Vec::new();
            let mut b = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && s.read(&mut b).is_ok_and(|n| n == 1) {
                head.push(b[0]);
            }
            let _ = write!(
                s,
                "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\
                 Connection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    url
}

/// `url` (a PostgreSQL URL) with `password` in its user info, unless it has one already;
/// and the password the URL then carries. The tests' servers trust local connections, so a
/// password they never ask for changes nothing but what the relay is given.
fn with_password(url: &str, password: &str) -> (String, String) {
    let (scheme, rest) = url.split_once("://").expect("a URL");
    let (user_info, host) = rest.split_once('@').expect("a user in the URL");
    match user_info.split_once(':') {
        Some((_, existing)) => (url.to_string(), existing.to_string()),
        None => (
            format!("{scheme}://{user_info}:{password}@{host}"),
            password.to_string(),
        ),
    }
}

#[test]
fn the_start_log_names_ledger_core_listeners_and_limits_and_never_a_password() {
    skip_if_unavailable!();
    let db = temp_ledger();
    let core = Core::start(&[]);
    let (ledger_arg, secret) = match db.backend() {
        Backend::Sqlite => (db.arg().to_string(), None),
        Backend::Postgres => {
            let (url, pw) = with_password(db.arg(), "Xq9startZk7");
            (url, Some(pw))
        }
    };
    let (flag, http) = http_listen();
    let mut cmd = std::process::Command::new(testkit::bin("relay"));
    cmd.args(["--db", &ledger_arg, "--listen", "127.0.0.1:0", "--core"])
        .args([&core.url(), "--admin", "127.0.0.1:0", &flag, &http])
        .args(["--max-connections", "77", "--max-connections-per-peer", "7"])
        .env("RUST_LOG", "info");
    let relay = Server::start(cmd);
    let admin = admin_addr(&relay);
    let log = relay.stderr();
    let line = |what: &str| -> String {
        log.lines()
            .find(|l| l.contains("INFO") && l.contains(what))
            .unwrap_or_else(|| panic!("no INFO line with {what:?}:\n{log}"))
            .to_string()
    };
    let ledger = line("start: ledger");
    match &secret {
        None => assert!(ledger.contains(db.arg()), "{ledger}"),
        Some(pw) => {
            assert!(ledger.contains("postgres"), "{ledger}");
            assert!(ledger.contains(":***@"), "the password masked: {ledger}");
            assert!(!log.contains(pw.as_str()), "the password shows:\n{log}");
            assert!(!relay.addr.contains(pw.as_str()));
        }
    }
    let core_line = line("start: core");
    assert!(core_line.contains(&core.url()), "{core_line}");
    assert!(core_line.contains("connect timeout 1000 ms"), "{core_line}");
    assert!(core_line.contains("read timeout 5000 ms"), "{core_line}");
    let listeners = line("start: listening");
    for want in [relay.addr.as_str(), admin.as_str(), "channel TLS off"] {
        assert!(listeners.contains(want), "{want}: {listeners}");
    }
    assert!(
        listeners.contains(&format!("HTTP on {http}")),
        "{listeners}"
    );
    let limits = line("start: limits");
    assert!(limits.contains("77 connections, 7 per peer"), "{limits}");
    assert!(limits.contains("idle timeout 300 s"), "{limits}");
}

#[test]
fn a_core_that_is_down_is_a_warning_and_a_metric_and_served_once_it_is_up() {
    skip_if_unavailable!();
    let db = temp_ledger();
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let (relay, admin) = relay_with_admin(&db, &url, &[]);
    let warnings = probe_warnings(&relay);
    assert_eq!(warnings.len(), 1, "{}", relay.stderr());
    assert!(warnings[0].contains("NO ANSWER"), "{}", warnings[0]);
    assert!(warnings[0].contains(&url), "{}", warnings[0]);
    assert_eq!(probe_result(&scrape(&admin)), "unreachable");

    // The relay started all the same, and serves as soon as the core is there.
    let core = Core::on_port(port, &[]);
    let m = msg("G-PROBE-LATER", 5, "");
    assert_code(&call(&relay.addr, &m), "0000");
    assert_eq!(core.bookings("G-PROBE-LATER"), 1);
}

#[test]
fn a_server_that_is_not_the_core_is_named_in_a_warning() {
    skip_if_unavailable!();
    let pages = [
        // A proxy or another service: its own 404 page.
        (
            "404 Not Found",
            "text/html",
            "<html><body><h1>404 Not Found</h1>nginx</body></html>",
        ),
        // Something that answers 200 to anything.
        ("200 OK", "text/plain", "ok"),
    ];
    for (status, content_type, body) in pages {
        let db = temp_ledger();
        let url = not_the_core(status, content_type, body);
        let (relay, admin) = relay_with_admin(&db, &url, &[]);
        let warnings = probe_warnings(&relay);
        assert_eq!(warnings.len(), 1, "{status}: {}", relay.stderr());
        assert!(warnings[0].contains("NOT THE CORE"), "{}", warnings[0]);
        assert!(warnings[0].contains(&url), "{}", warnings[0]);
        assert_eq!(probe_result(&scrape(&admin)), "not_the_core", "{status}");
        assert_eq!(db.count(), 0, "{status}: the probe wrote no row");
    }
}

#[test]
fn the_core_is_no_warning_and_every_outcome_is_a_series_in_the_first_scrape() {
    skip_if_unavailable!();
    let db = temp_ledger();
    let core = Core::start(&[]);
    let (relay, admin) = relay_with_admin(&db, &core.url(), &[]);
    assert_eq!(probe_warnings(&relay), Vec::<String>::new());
    assert!(
        relay
            .stderr()
            .lines()
            .any(|l| l.contains("INFO") && l.contains("core probe: the core at")),
        "{}",
        relay.stderr()
    );
    let text = scrape(&admin);
    assert_eq!(probe_result(&text), "ok");
    for outcome in ["booked", "rejected", "not_sent", "unknown"] {
        let key = format!("txrelay_core_call_duration_seconds_count{{outcome=\"{outcome}\"}}");
        assert_eq!(sample(&text, &key), 0.0, "{key}");
    }
    for code in ["0000", "E901", "E902", "E905"] {
        let key = format!("txrelay_requests_total{{code=\"{code}\"}}");
        assert_eq!(sample(&text, &key), 0.0, "{key}");
    }
    // The probe is an inquiry, never a transfer: nothing booked, no row.
    assert_eq!(core.total_bookings(), 0);
    assert!(core.inquiries() <= 1, "one probe at most");
    assert_eq!(db.count(), 0);
    promtool_check("the first scrape", &text);
}

/// Whether the relay made anything of its ledger: SQLite's files, or PostgreSQL's tables.
fn ledger_touched(db: &TempLedger) -> bool {
    match db.backend() {
        Backend::Sqlite => std::fs::read_dir(db.dir()).unwrap().next().is_some(),
        Backend::Postgres => db
            .pg_client()
            .query_one("SELECT to_regclass('tx') IS NOT NULL", &[])
            .unwrap()
            .get(0),
    }
}

#[test]
fn an_invalid_core_is_refused_before_the_ledger_is_touched() {
    skip_if_unavailable!();
    for core in ["ftp://core.example", "http://", "core.example:9201"] {
        let db = temp_ledger();
        let r = Run::new(
            "relay",
            &["--db", db.arg(), "--listen", "127.0.0.1:0", "--core", core],
        );
        assert!(
            [EXIT_FATAL, EXIT_USAGE]
                .map(|c| Some(i32::from(c)))
                .contains(&r.code),
            "{core}: {:?}\n{}",
            r.code,
            r.stderr()
        );
        assert!(r.stderr().contains("core"), "{core}: {}", r.stderr());
        assert!(!ledger_touched(&db), "{core}: the ledger was made");
    }
}
