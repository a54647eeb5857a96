//! What the relay tells an investigator (issue 19.6): every failed send's history row says
//! why (read timeout, HTTP 500, reset, refused), and with `--log-format json` the request
//! line carries `guid`, `peer`, `channel` and `code` as keys, an `E900` line the field and
//! rule it broke, and the per-GUID warnings their GUID as a key, not inside the message.

use serde_json::Value;
use wire::{E_NOT_SENT, E_UNKNOWN};

use crate::util::*;

/// The reason of the history row that took `guid` to `to`.
fn reason_into(db: &TempLedger, guid: &str, to: &str) -> String {
    let history = db.store().history(guid).expect("history");
    history
        .iter()
        .find(|h| h.to_state.as_deref() == Some(to))
        .and_then(|h| h.reason.clone())
        .unwrap_or_else(|| panic!("{guid}: no reason on the change to {to}: {history:#?}"))
}

#[test]
fn every_failed_send_says_why_in_the_rows_history() {
    skip_if_unavailable!();
    let s = Scene::new()
        .core(&["--slow-ms", "1000"])
        .relay(&["--read-timeout-ms", "300", "--late-reply-ms", "0"])
        .build();
    for (guid, memo, why) in [
        ("G-WHY-SLOW", "SLOW", "outcome unknown"),
        ("G-WHY-500", "FAIL500", "HTTP 500"),
        ("G-WHY-DROP", "DROP", "outcome unknown"),
    ] {
        let m = msg(guid, 10, memo);
        assert_eq!(s.call(&m), short(&m, &E_UNKNOWN), "{memo}");
        let reason = reason_into(&s.db, guid, "UNKNOWN");
        assert!(reason.contains(why), "{memo}: {reason}");
    }
    let slow = reason_into(&s.db, "G-WHY-SLOW", "UNKNOWN");
    assert!(
        slow.to_lowercase().contains("timeout") || slow.contains("timed out"),
        "{slow}"
    );
    // A booking needs no reason: its history row has none.
    let ok = msg("G-WHY-OK", 10, "");
    assert_eq!(code(&s.call(&ok)), "0000");
    let history = s.db.store().history("G-WHY-OK").unwrap();
    assert!(history.iter().all(|h| h.reason.is_none()), "{history:#?}");

    let down = Scene::new().relay_to(&dead_url(), &[]).build();
    let m = msg("G-WHY-DOWN", 10, "");
    assert_eq!(down.call(&m), short(&m, &E_NOT_SENT));
    let reason = reason_into(&down.db, "G-WHY-DOWN", "FAILED");
    assert!(reason.starts_with("not sent to the core"), "{reason}");
    assert!(reason.to_lowercase().contains("refused"), "{reason}");
}

/// The relay's JSON log lines, parsed.
fn json_lines(relay: &Server) -> Vec<Value> {
    relay
        .stderr()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

#[test]
fn json_log_lines_carry_guid_peer_channel_code_and_the_broken_rule_as_keys() {
    skip_if_unavailable!();
    let s = Scene::new()
        .core(&[])
        .relay(&["--log-format", "json"])
        .build();
    let mut c = Channel::connect(s.addr());
    let good = msg("G-JSON-OK", 10, "");
    assert_eq!(code(&c.call(&good)), "0000");
    let mut bad = msg("G-JSON-BAD", 10, "");
    bad[80] = b'x';
    assert_eq!(code(&c.call(&bad)), "E900");
    let unknown = msg("G-JSON-500", 10, "FAIL500");
    assert_eq!(code(&c.call(&unknown)), "E901");
    let local = c.local_addr();

    let find = |guid: &str, code: &str| {
        let mut found = None;
        eventually(WAIT, || {
            found = json_lines(s.relay())
                .into_iter()
                .find(|v| v["guid"] == guid && v["code"] == code && v["message"] == "");
            found.is_some()
        });
        found.unwrap_or_else(|| panic!("no request line for {guid}: {}", s.relay().stderr()))
    };
    let ok = find("G-JSON-OK", "0000");
    assert_eq!(ok["peer"], local.to_string(), "{ok}");
    assert_eq!(ok["channel"], "-", "{ok}");
    assert_eq!(ok["state"], "DONE", "{ok}");
    assert!(ok.get("detail").is_none(), "{ok}");
    let e900 = find("G-JSON-BAD", "E900");
    let detail = e900["detail"].as_str().expect("detail");
    assert!(detail.starts_with("amount (offset 73)"), "{e900}");
    assert_eq!(e900["peer"], local.to_string());

    // The warning about the failed send: its GUID a key, not in the message.
    let warning = json_lines(s.relay())
        .into_iter()
        .find(|v| v["level"] == "WARN" && v["guid"] == "G-JSON-500")
        .unwrap_or_else(|| panic!("no warning: {}", s.relay().stderr()));
    let message = warning["message"].as_str().unwrap();
    assert!(
        message.starts_with("outcome unknown: HTTP 500"),
        "{warning}"
    );
    assert!(!message.contains("G-JSON-500"), "{warning}");
    assert_eq!(warning["code"], "E901", "{warning}");
}

/// backup's exit for an unusable ledger: 1, or 2 for any PostgreSQL ledger (not its kind).
fn backup_exit(db: &TempLedger) -> u8 {
    match db.backend() {
        Backend::Sqlite => EXIT_FATAL,
        Backend::Postgres => EXIT_USAGE,
    }
}

#[test]
fn with_json_a_failed_run_prints_one_json_object_too() {
    skip_if_unavailable!();
    let db = temp_ledger();
    let bad = unusable_ledgers(&db).remove(0);
    let core = dead_url();
    let to = db.dir().join("b.db");
    let to = to.to_str().expect("UTF-8 temp path");
    let cases: [(&str, Vec<&str>, u8); 5] = [
        (
            "purge",
            vec!["--db", &bad, "--days", "7", "--json"],
            EXIT_FATAL,
        ),
        (
            "purge",
            vec!["--db", &bad, "--days", "-7", "--json"],
            EXIT_USAGE,
        ),
        (
            "resolve",
            vec!["--json", "--db", &bad, "--core", &core],
            EXIT_USAGE,
        ),
        (
            "inspect",
            vec!["--db", &bad, "summary", "--json"],
            EXIT_FATAL,
        ),
        (
            "backup",
            vec!["--db", &bad, "--to", to, "--json"],
            backup_exit(&db),
        ),
    ];
    for (name, args, exit) in cases {
        let r = tool(name, &args);
        r.expect_code(exit);
        let out = r.stdout();
        assert_eq!(out.lines().count(), 1, "{name} {args:?}: {out}");
        let v: Value = serde_json::from_str(out).expect("one JSON object");
        assert_eq!(v["exit"], exit, "{v}");
        assert_eq!(v["exit_code"], exit, "{v}");
        assert_eq!(v["tool"], name, "{v}");
        let error = v["error"].as_str().expect("error");
        assert!(!error.is_empty() && !error.starts_with("error:"), "{v}");
        assert!(!r.stderr().is_empty(), "{name}: stderr still says it");
    }
    // Without --json, stdout stays empty.
    let r = tool("purge", &["--db", &bad, "--days", "7"]);
    r.expect_code(EXIT_FATAL);
    assert_eq!(r.stdout(), "");
}
