//! `relay --admin`: `/metrics` counts what the relay did (checked against the requests a
//! test sent, and by `promtool check metrics`), `/healthz` follows the ledger, and
//! `--log-format json` carries the request line's fields as keys.

use std::net::TcpListener;
use std::time::Duration;

use crate::util::*;

/// A relay on `db` in front of `core_url` with `--admin 127.0.0.1:0`, logging at info; and
/// its admin address.
pub(super) fn relay_with_admin(
    db: &TempLedger,
    core_url: &str,
    extra: &[&str],
) -> (Server, String) {
    let mut cmd = relay_command(db, core_url, &["--admin", "127.0.0.1:0"]);
    cmd.args(extra).env("RUST_LOG", "info");
    let relay = Server::start(cmd);
    let admin = admin_addr(&relay);
    (relay, admin)
}

pub(super) fn scrape(admin: &str) -> String {
    let (status, body) = http_get(admin, "/metrics");
    assert_eq!(status, 200, "{body}");
    body
}

#[test]
fn metrics_count_the_requests_sent_and_promtool_accepts_a_scrape() {
    skip_if_unavailable!();
    let db = TempLedger::new();
    RowSpec::unknown(&msg("G-M-OLD", 5, ""))
        .age(HOUR)
        .insert(&db);
    let mut core = Core::start(&[]);
    let (relay, admin) = relay_with_admin(&db, &core.url(), &["--late-reply-ms", "0"]);

    // The sampler reads the ledger at once when it starts: the UNKNOWN row an hour old. (Twice,
    // in loaded CI runs, a scrape showed half a sample, the row counted but its age 0, then
    // its age but not the row: the registry gathers family by family. A scrape now shows one
    // sample whole, `a_scrape_never_shows_half_a_sample` in engine proves it; the wait, over
    // two sampling intervals, is for the first sample.)
    let mut text = String::new();
    assert!(eventually(2 * SAMPLE_WAIT, || {
        text = scrape(&admin);
        sample(&text, "txrelay_ledger_sampled_timestamp_seconds") > 0.0
            && sample(&text, "txrelay_ledger_oldest_unknown_age_seconds") > 0.0
    }));
    assert_eq!(sample(&text, "txrelay_ledger_rows{state=\"UNKNOWN\"}"), 1.0);
    assert_eq!(sample(&text, "txrelay_ledger_rows{state=\"DONE\"}"), 0.0);
    let age = sample(&text, "txrelay_ledger_oldest_unknown_age_seconds");
    assert!((3600.0..3700.0).contains(&age), "{age}");
    assert_eq!(sample(&text, "txrelay_requests_total{code=\"0000\"}"), 0.0);

    for i in 0..3 {
        assert_code(&call(&relay.addr, &msg(&format!("G-M-{i}"), 5, "")), "0000");
    }
    assert_code(&call(&relay.addr, &msg("G-M-0", 6, "")), "E904");
    core.server.kill();
    // Past the keep-alive age, so that the next call connects (and is refused).
    std::thread::sleep(Duration::from_millis(2500));
    assert_code(&call(&relay.addr, &msg("G-M-DOWN", 5, "")), "E902");

    assert!(eventually(WAIT, || {
        text = scrape(&admin);
        sample(&text, "txrelay_connections_open") == 0.0
    }));
    for (code, n) in [("0000", 3.0), ("E904", 1.0), ("E902", 1.0), ("E901", 0.0)] {
        let key = format!("txrelay_requests_total{{code=\"{code}\"}}");
        assert_eq!(sample(&text, &key), n, "{key}\n{text}");
    }
    let calls = |outcome: &str| {
        let key = format!("txrelay_core_call_duration_seconds_count{{outcome=\"{outcome}\"}}");
        samples(&text).get(&key).copied().unwrap_or(0.0)
    };
    assert_eq!(
        (calls("booked"), calls("not_sent"), calls("unknown")),
        (3.0, 1.0, 0.0)
    );
    // The start's write check, three claims and three results, one claim and one FAILED
    // result: nine statements, in at most nine commits.
    assert_eq!(sample(&text, "txrelay_ledger_commit_batch_size_sum"), 9.0);
    let commits = sample(&text, "txrelay_ledger_commit_duration_seconds_count");
    assert!((1.0..=9.0).contains(&commits), "{commits}");
    assert_eq!(
        sample(
            &text,
            "txrelay_connections_refused_total{limit=\"max_connections\"}"
        ),
        0.0
    );
    promtool_check("a scrape of /metrics", &text);
}

sqlite_only! {
    "the write lock that makes /healthz fail is SQLite's",
    fn healthz_follows_the_ledger_and_writes_no_transfer_row() {
        let s = Scene::new().core(&[]).build();
        let (_relay, admin) = relay_with_admin(&s.db, &s.core().url(), &[]);
        assert_eq!(http_get(&admin, "/healthz"), (200, "ok\n".to_string()));
        assert_eq!(s.db.count(), 0, "no tx row");

        // A ledger that cannot be written (its write lock held past the busy timeout).
        let lock = WriteLock::take(&s.db, "G-HEALTH");
        let (status, body) = http_get(&admin, "/healthz");
        lock.release();
        assert_eq!(status, 503, "{body}");
        assert!(body.starts_with("ledger: "), "{body}");
        assert_eq!(http_get(&admin, "/healthz").0, 200);
        assert_eq!(http_get(&admin, "/nothing").0, 404);
    }
}

#[test]
fn late_replies_and_refused_connections_are_counted() {
    skip_if_unavailable!();
    let s = Scene::new().core(&["--slow-ms", "800"]).build();
    let (relay, admin) = relay_with_admin(
        &s.db,
        &s.core().url(),
        &[
            "--read-timeout-ms",
            "200",
            "--max-connections-per-peer",
            "1",
        ],
    );
    let m = msg("G-M-LATE", 5, "SLOW");
    let mut held = Channel::connect(&relay.addr);
    assert_code(&held.call(&m), "E901");
    let mut extra = Channel::connect(&relay.addr);
    assert!(extra.closed_within(Duration::from_secs(5)));

    let mut text = String::new();
    assert!(eventually(WAIT, || {
        text = scrape(&admin);
        sample(&text, "txrelay_late_replies_settled_total") == 1.0
    }));
    assert_eq!(sample(&text, "txrelay_late_replies_adopted_total"), 1.0);
    assert_eq!(sample(&text, "txrelay_late_replies_arrived_total"), 1.0);
    assert_eq!(sample(&text, "txrelay_late_replies_dropped_total"), 0.0);
    assert!(eventually(WAIT, || sample(
        &scrape(&admin),
        "txrelay_late_replies_waiting"
    ) == 0.0));
    assert_eq!(sample(&text, "txrelay_requests_total{code=\"E901\"}"), 1.0);
    assert_eq!(
        sample(
            &text,
            "txrelay_connections_refused_total{limit=\"max_connections_per_peer\"}"
        ),
        1.0
    );
    assert_eq!(
        sample(&text, "txrelay_connections_open"),
        1.0,
        "the held one"
    );
    assert_eq!(s.db.state("G-M-LATE"), Some(State::Done));
    promtool_check("a scrape after a late reply", &text);
}

#[test]
fn an_admin_address_in_use_is_a_one_line_start_error() {
    skip_if_unavailable!();
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let db = TempLedger::new();
    let run = Run::new(
        "relay",
        &[
            "--db",
            db.arg(),
            "--listen",
            "127.0.0.1:0",
            "--admin",
            &addr,
        ],
    );
    run.expect_code(EXIT_FATAL);
    assert_eq!(run.stdout(), "", "no `listening on` line");
    let err = run.stderr().trim_end();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with(&format!(
            "relay: cannot start: cannot listen on {addr} (--admin): "
        )),
        "{err}"
    );
}

#[test]
fn json_logs_carry_the_request_line_fields_as_keys() {
    skip_if_unavailable!();
    let s = Scene::new().core(&[]).build();
    let mut cmd = relay_command(&s.db, &s.core().url(), &[]);
    cmd.env("RELAY_LOG_FORMAT", "json").env("RUST_LOG", "info");
    let relay = Server::start(cmd);
    assert_code(&call(&relay.addr, &msg("G-JSON", 5, "")), "0000");
    let mut line = None;
    assert!(eventually(WAIT, || {
        line = relay
            .stderr()
            .lines()
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l)
                    .unwrap_or_else(|e| panic!("not one JSON object: {l:?}: {e}"))
            })
            .find(|v| v["guid"] == "G-JSON");
        line.is_some()
    }));
    let v = line.unwrap();
    assert_eq!(v["code"], "0000", "{v}");
    assert_eq!(v["state"], "DONE", "{v}");
    assert!(v["ms"].is_u64(), "{v}");
    assert_eq!(v["level"], "INFO", "{v}");
    assert_eq!(v["target"], "server::access_log", "{v}");
    assert_eq!(v["message"], "", "{v}");
    assert!(
        v["timestamp"].as_str().is_some_and(|t| t.ends_with('Z')),
        "{v}"
    );

    assert_eq!(v["channel"], "-", "{v}");

    // The text format's line: `guid=… peer=… channel=… code=… state=… ms=…` (`-`: anonymous).
    // One relay per SQLite ledger: the first goes first.
    drop(relay);
    let mut cmd = relay_command(&s.db, &s.core().url(), &[]);
    cmd.env("RUST_LOG", "info");
    let text = Server::start(cmd);
    assert_code(&call(&text.addr, &msg("G-TEXT", 5, "")), "0000");
    assert!(eventually(WAIT, || text
        .stderr()
        .lines()
        .any(|l| l.contains("] guid=G-TEXT peer=127.0.0.1:")
            && l.contains(" channel=- code=0000 state=DONE ms="))));
}

/// The first scrape after the sampler's first reading (it reads at once when it starts).
/// The sampler's interval (10 s) and a margin: how long a gauge may take to show a reading.
const SAMPLE_WAIT: std::time::Duration = std::time::Duration::from_secs(12);

fn first_sample(admin: &str) -> String {
    sample_where(admin, |_| true)
}

/// A scrape taken after a sample that satisfies `ready` (within two sampling intervals).
fn sample_where(admin: &str, ready: impl Fn(&str) -> bool) -> String {
    let mut text = String::new();
    assert!(eventually(2 * SAMPLE_WAIT, || {
        text = scrape(admin);
        sample(&text, "txrelay_ledger_sampled_timestamp_seconds") > 0.0 && ready(&text)
    }));
    text
}

#[test]
fn needs_operator_the_attempt_cap_and_the_oldest_failed_are_sampled_against_the_flags() {
    skip_if_unavailable!();
    let s = Scene::new()
        .core(&[])
        .rows([
            RowSpec::unknown(&msg("G-NO-TWO", 5, "")),
            RowSpec::sent(&msg("G-NO-THREE", 5, "")).age(HOUR),
            RowSpec::unknown(&msg("G-NO-ONE", 5, "")),
            // Settled since: no longer in doubt, whatever its record says.
            RowSpec::of(&msg("G-NO-DONE", 5, ""), State::Done).code("0000"),
            RowSpec::failed(&msg("G-CAP-1", 5, "")).attempts(1),
            RowSpec::failed(&msg("G-CAP-2", 5, ""))
                .attempts(2)
                .age(2 * HOUR),
            RowSpec::failed(&msg("G-CAP-3", 5, "")).attempts(3),
        ])
        .build();
    let store = s.db.store();
    for (guid, failures) in [
        ("G-NO-TWO", 2),
        ("G-NO-THREE", 3),
        ("G-NO-ONE", 1),
        ("G-NO-DONE", 5),
    ] {
        for _ in 0..failures {
            store.record_inquiry_failure(guid, "test", 60).unwrap();
        }
    }
    drop(store);

    let (relay, admin) = relay_with_admin(
        &s.db,
        &s.core().url(),
        &["--max-inquiries", "2", "--max-attempts", "2"],
    );
    // (The same once-seen first scrape with the rows counted and the rest 0: wait for it.)
    let text = sample_where(&admin, |t| {
        sample(t, "txrelay_ledger_needs_operator") == 2.0
            && sample(t, "txrelay_ledger_failed_at_attempt_cap") == 2.0
            && sample(t, "txrelay_ledger_oldest_failed_age_seconds") > 0.0
    });
    assert_eq!(
        sample(&text, "txrelay_ledger_needs_operator"),
        2.0,
        "{text}"
    );
    assert_eq!(sample(&text, "txrelay_ledger_failed_at_attempt_cap"), 2.0);
    let oldest = sample(&text, "txrelay_ledger_oldest_failed_age_seconds");
    assert!((7200.0..7300.0).contains(&oldest), "{oldest}");
    promtool_check("a scrape with rows needing an operator", &text);

    // The environment twins, and the defaults (20 inquiries, 3 attempts). One relay per
    // SQLite ledger: the first goes first.
    drop(relay);
    let mut cmd = relay_command(&s.db, &s.core().url(), &["--admin", "127.0.0.1:0"]);
    cmd.env("RUST_LOG", "info").env("RELAY_MAX_INQUIRIES", "3");
    let relay = Server::start(cmd);
    let text = sample_where(&admin_addr(&relay), |t| {
        sample(t, "txrelay_ledger_needs_operator") == 1.0
            && sample(t, "txrelay_ledger_failed_at_attempt_cap") == 1.0
    });
    assert_eq!(
        sample(&text, "txrelay_ledger_needs_operator"),
        1.0,
        "{text}"
    );
    assert_eq!(sample(&text, "txrelay_ledger_failed_at_attempt_cap"), 1.0);
    drop(relay);
    let (_relay, admin) = relay_with_admin(&s.db, &s.core().url(), &[]);
    let text = sample_where(&admin, |t| {
        sample(t, "txrelay_ledger_failed_at_attempt_cap") == 1.0
    });
    assert_eq!(
        sample(&text, "txrelay_ledger_needs_operator"),
        0.0,
        "{text}"
    );
    assert_eq!(sample(&text, "txrelay_ledger_failed_at_attempt_cap"), 1.0);
}

#[test]
fn a_ledger_with_nothing_failed_or_in_doubt_samples_zeros() {
    skip_if_unavailable!();
    let s = Scene::new()
        .core(&[])
        .rows([RowSpec::of(&msg("G-Z-DONE", 5, ""), State::Done).code("0000")])
        .build();
    let (_relay, admin) = relay_with_admin(&s.db, &s.core().url(), &[]);
    let text = first_sample(&admin);
    for name in [
        "txrelay_ledger_needs_operator",
        "txrelay_ledger_failed_at_attempt_cap",
        "txrelay_ledger_oldest_failed_age_seconds",
    ] {
        assert_eq!(sample(&text, name), 0.0, "{name}\n{text}");
    }
}

#[test]
fn build_info_names_the_version_and_the_commit_and_process_metrics_are_served() {
    skip_if_unavailable!();
    let s = Scene::new().core(&[]).build();
    let (_relay, admin) = relay_with_admin(&s.db, &s.core().url(), &[]);
    let text = scrape(&admin);
    let key = format!(
        "txrelay_build_info{{commit=\"{}\",version=\"{}\"}}",
        super::build_info::expected_commit(),
        env!("CARGO_PKG_VERSION")
    );
    assert_eq!(sample(&text, &key), 1.0, "{key}\n{text}");
    assert!(text.contains("# TYPE txrelay_build_info gauge\n"), "{text}");
    // The prometheus crate's process collector, read from /proc at the scrape.
    assert!(sample(&text, "process_resident_memory_bytes") > 0.0);
    assert!(sample(&text, "process_open_fds") > 0.0);
    assert!(sample(&text, "process_max_fds") >= sample(&text, "process_open_fds"));
    assert!(sample(&text, "process_threads") > 1.0);
    assert!(sample(&text, "process_start_time_seconds") > 1.7e9);
    assert!(samples(&text).contains_key("process_cpu_seconds_total"));
    promtool_check("a scrape with build and process metrics", &text);
}

#[test]
fn a_threshold_of_zero_is_a_usage_error_naming_the_flag() {
    skip_if_unavailable!();
    let db = TempLedger::new();
    for flag in ["--max-inquiries", "--max-attempts"] {
        let run = Run::new(
            "relay",
            &["--db", db.arg(), "--listen", "127.0.0.1:0", flag, "0"],
        );
        run.expect_code(EXIT_USAGE);
        assert!(run.stderr().contains(flag), "{flag}: {}", run.stderr());
        assert_eq!(run.stdout(), "", "no `listening on` line");
    }
}
