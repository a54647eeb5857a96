//! A bad value in an environment twin (`RESOLVE_MIN_AGE=abc`) is a usage error (exit 2) naming
//! the variable, and the flag it stands for: the command line the operator looks at has no
//! such flag. The same value given as the flag names the flag.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::process::Command;
use std::time::Duration;

use crate::util::*;

/// A tool, its other arguments (valid), a twin, its flag, and a value the flag refuses.
type Case<'a> = (
    &'static str,
    Vec<&'a str>,
    &'static str,
    &'static str,
    &'static str,
);

/// A bad value for a twin of each tool (backup's twins take any text but one not UTF-8: below).
fn cases<'a>(db: &'a str, core: &'a str) -> Vec<Case<'a>> {
    let relay = vec!["--db", db, "--core", core, "--listen", "127.0.0.1:0"];
    let settle = vec!["--db", db, "settle", "g-1", "--not-booked", "--reason", "r"];
    vec![
        (
            "relay",
            relay.clone(),
            "RELAY_LATE_REPLY_MS",
            "--late-reply-ms",
            "abc",
        ),
        ("relay", relay, "RELAY_LOG_FORMAT", "--log-format", "xml"),
        (
            "resolve",
            vec!["--db", db, "--core", core],
            "RESOLVE_MIN_AGE",
            "--min-age",
            "abc",
        ),
        (
            "resolve",
            vec!["--db", db, "--core", core, "--min-age", "60"],
            "RESOLVE_PARALLEL",
            "--parallel",
            "0",
        ),
        (
            "reprocess",
            vec!["--db", db, "--core", core],
            "REPROCESS_MAX_ATTEMPTS",
            "--max-attempts",
            "x",
        ),
        ("purge", vec!["--db", db], "PURGE_DAYS", "--days", "seven"),
        (
            "purge",
            vec!["--db", db, "--days", "7"],
            "PURGE_HISTORY_DAYS",
            "--history-days",
            "0",
        ),
        (
            "inspect",
            vec!["--db", db],
            "INSPECT_MAX_INQUIRIES",
            "--max-inquiries",
            "x",
        ),
        ("inspect", settle, "INSPECT_MIN_AGE", "--min-age", "abc"),
        (
            "restore",
            vec!["--db", db, "--from", "/nonexistent-dir/b.db"],
            "RESTORE_SINCE",
            "--since",
            "yesterday",
        ),
        (
            "reconcile",
            vec!["--db", db, "--journal", "/nonexistent-dir/j"],
            "RECONCILE_FROM",
            "--from",
            "today",
        ),
    ]
}

#[test]
fn a_bad_value_in_a_twin_names_the_variable() {
    let db = temp_ledger();
    let core = dead_url();
    for (name, args, var, flag, bad) in cases(db.arg(), &core) {
        let r = Run::with_env(name, &args, &[(var, bad)]);
        r.expect_code(EXIT_USAGE);
        let err = r.stderr();
        let named = format!("invalid value '{bad}' for {var} (it stands for {flag})");
        assert!(err.contains(&named), "{name} {var}={bad}: {err}");
        assert_eq!(r.stdout(), "", "{name} {var}");
        // With --json, the failure object names it too (the relay has no --json).
        if name == "relay" {
            continue;
        }
        let json = [&args[..], &["--json"]].concat();
        let r = Run::with_env(name, &json, &[(var, bad)]);
        r.expect_code(EXIT_USAGE);
        let error = r.json()["error"].as_str().unwrap_or_default().to_string();
        assert!(
            error.contains(&named),
            "{name} {var} --json: {}",
            r.stdout()
        );
    }
    assert!(!db.created(), "usage errors create no ledger");
}

#[test]
fn a_bad_value_given_as_the_flag_still_names_the_flag() {
    let db = temp_ledger();
    let core = dead_url();
    for (name, args, var, flag, bad) in cases(db.arg(), &core) {
        // The twin set too: the command line wins, and is what is named.
        let with_flag = [&args[..], &[flag, bad]].concat();
        let r = Run::with_env(name, &with_flag, &[(var, bad)]);
        r.expect_code(EXIT_USAGE);
        let err = r.stderr();
        assert!(
            err.contains(&format!("invalid value '{bad}' for '{flag}")),
            "{name} {flag}: {err}"
        );
        assert!(!err.contains(var), "{name} {flag}: {err}");
    }
}

#[test]
fn a_twin_that_is_not_utf8_is_named() {
    let mut cmd = Command::new(testkit::bin("backup"));
    cmd.args(["--to", "/nonexistent-dir/b.db"])
        .env("BACKUP_DB", OsStr::from_bytes(b"ledger-\xff.db"));
    let r = Run::command(cmd, Duration::from_secs(30));
    r.expect_code(EXIT_USAGE);
    assert!(
        r.stderr()
            .contains("invalid UTF-8 in BACKUP_DB (it stands for --db)"),
        "{}",
        r.stderr()
    );
}
