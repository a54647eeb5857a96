//! The load generator, briefly, against a real relay and core simulator: its JSON line
//! parses, every reply validated, no resend mismatch, and no GUID booked twice. No timing
//! assertions: these run on whatever machine CI has.

use serde_json::Value;

use crate::util::*;

fn loadgen(args: &[&str]) -> Value {
    let run = Run::new("loadgen", args);
    run.expect_code(EXIT_SETTLED);
    run.json()
}

fn count(v: &Value, key: &str) -> u64 {
    v[key]
        .as_u64()
        .unwrap_or_else(|| panic!("no count {key} in {v}"))
}

fn assert_clean(out: &Value) {
    assert_eq!(count(out, "resend_mismatches"), 0, "{out}");
    assert_eq!(count(out, "malformed_replies"), 0, "{out}");
    assert_eq!(count(out, "errors"), 0, "{out}");
    assert!(count(out, "requests") > 0, "{out}");
    let codes = out["replies_by_code"].as_object().expect("replies_by_code");
    let replies: u64 = codes.values().map(|v| v.as_u64().unwrap()).sum();
    assert_eq!(replies, count(out, "requests"), "{out}");
    for p in ["p50", "p90", "p99", "p999", "max"] {
        assert!(out["latency_ms"][p].is_number(), "latency {p} in {out}");
    }
}

fn max_bookings_per_guid(core: &Core) -> u64 {
    let by_guid = core.by_guid();
    assert!(!by_guid.is_empty(), "the core booked nothing");
    by_guid.into_values().max().unwrap()
}

#[test]
fn relay_load_with_resends_books_every_guid_once() {
    let s = Scene::new().core(&[]).relay(&[]).build();
    let out = loadgen(&[
        "--relay",
        s.addr(),
        "--connections",
        "4",
        "--duration-secs",
        "1",
        "--resend-ratio",
        "0.3",
        "--seed",
        "42",
        "--guid-prefix",
        "SMOKE-R",
    ]);
    assert_eq!(out["mode"], "relay");
    assert_eq!(count(&out, "connections"), 4);
    assert_clean(&out);
    assert!(count(&out, "resends") > 0, "a 0.3 ratio resends: {out}");
    assert_eq!(
        count(&out, "new_requests") + count(&out, "resends"),
        count(&out, "requests")
    );
    assert_eq!(
        max_bookings_per_guid(s.core()),
        1,
        "a GUID was booked twice"
    );
}

#[test]
fn replay_only_answers_from_the_ledger() {
    let s = Scene::new().core(&[]).relay(&[]).build();
    let out = loadgen(&[
        "--relay",
        s.addr(),
        "--connections",
        "4",
        "--requests",
        "400",
        "--replay-only",
        "--pool",
        "20",
        "--guid-prefix",
        "SMOKE-P",
    ]);
    assert_eq!(out["mode"], "replay-only");
    assert_clean(&out);
    assert_eq!(count(&out, "requests"), 400, "{out}");
    assert_eq!(count(&out, "resends"), 400, "{out}");
    assert_eq!(out["pool"]["finished"], 20, "{out}");
    assert_eq!(
        s.core().total_bookings(),
        20,
        "resends never reach the core: {}",
        s.core().stats()
    );
    assert_eq!(max_bookings_per_guid(s.core()), 1);
}

#[test]
fn direct_load_posts_to_the_core_over_keep_alive() {
    let core = Core::start(&[]);
    let out = loadgen(&[
        "--direct",
        "--core",
        &core.url(),
        "--connections",
        "4",
        "--duration-secs",
        "1",
        "--resend-ratio",
        "0.3",
        "--guid-prefix",
        "SMOKE-D",
    ]);
    assert_eq!(out["mode"], "direct");
    assert_clean(&out);
    assert_eq!(
        count(&out, "resends"),
        0,
        "no GUID is resent to the core: {out}"
    );
    assert_eq!(
        count(&out, "connects"),
        4,
        "one kept-alive connection per loadgen connection: {out}"
    );
    assert_eq!(
        Some(core.total_bookings()),
        out["replies_by_code"]["0000"].as_u64(),
        "every 200 is one booking (no warm-up here): {}",
        core.stats()
    );
    assert_eq!(max_bookings_per_guid(&core), 1);
}

#[test]
fn idle_connections_are_held_and_a_new_one_is_answered() {
    let s = Scene::new().core(&[]).relay(&[]).build();
    let pid = s.relay().pid().to_string();
    let out = loadgen(&[
        "--relay",
        s.addr(),
        "--idle",
        "20",
        "--hold-secs",
        "0.3",
        "--rss-pid",
        &pid,
        "--guid-prefix",
        "SMOKE-I",
    ]);
    assert_eq!(out["mode"], "idle");
    assert_eq!(count(&out, "still_open"), 20, "{out}");
    assert_eq!(out["new_connection_probe"]["code"], "0000", "{out}");
    assert_eq!(out["idle_connection_probe"]["code"], "0000", "{out}");
    assert!(count(&out, "rss_kb_with") > 0, "{out}");
}

#[test]
fn bad_flags_are_usage_errors() {
    Run::new("loadgen", &["--resend-ratio", "1.5"]).expect_code(EXIT_USAGE);
    Run::new("loadgen", &["--guid-prefix", "has space"]).expect_code(EXIT_USAGE);
    Run::new("loadgen", &["--direct", "--replay-only"]).expect_code(EXIT_USAGE);
}

#[test]
fn the_history_cost_script_answers_help_without_running_the_benchmark() {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/scripts/history_trigger_cost.py"
    );
    let mut cmd = std::process::Command::new("python3");
    cmd.args([script, "--help"]);
    let run = Run::command(cmd, std::time::Duration::from_secs(20));
    run.expect_code(EXIT_SETTLED);
    assert!(run.stdout().starts_with("usage: "), "{}", run.stdout());
    assert!(!run.stdout().contains("µs/transfer"), "{}", run.stdout());
    let mut cmd = std::process::Command::new("python3");
    cmd.args([script, "--rounds", "0"]);
    Run::command(cmd, std::time::Duration::from_secs(20)).expect_code(EXIT_USAGE);
}
