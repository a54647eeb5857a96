//! What the batch tools (resolve, reprocess, purge, and inspect where it applies) have in
//! common: a ledger they cannot use is exit 1 with one line naming it, a bad flag is exit 2
//! naming the flag, and every timeout flag has an environment twin.

use crate::util::*;

/// Each tool's arguments, all valid except perhaps the ledger path.
fn with_db<'a>(name: &str, db: &'a str, core: &'a str) -> Vec<&'a str> {
    match name {
        "resolve" => vec!["--db", db, "--core", core, "--min-age", "60"],
        "reprocess" => vec!["--db", db, "--core", core, "--max-attempts", "3"],
        "purge" => vec!["--db", db, "--days", "7"],
        _ => unreachable!(),
    }
}

#[test]
fn an_unusable_ledger_is_exit_1_with_one_line_naming_it() {
    skip_if_unavailable!();
    let db = temp_ledger();
    let core = dead_url();
    for name in ["resolve", "reprocess", "purge"] {
        for unusable in unusable_ledgers(&db) {
            let path = unusable.as_str();
            for extra in [&[][..], &["--dry-run"][..], &["--json"][..]] {
                let r = tool(name, &[&with_db(name, path, &core)[..], extra].concat());
                r.expect_code(EXIT_FATAL);
                let err = r.stderr();
                assert_eq!(err.lines().count(), 1, "{name} {path} {extra:?}: {err}");
                assert!(
                    err.contains(path),
                    "{name} {extra:?}: names the ledger: {err}"
                );
                assert!(err.starts_with(&format!("{name}: ")), "{err}");
                assert_stdout_for_failure(&r, extra.contains(&"--json"), EXIT_FATAL);
            }
        }
    }
}

#[test]
fn a_bad_core_url_is_exit_1_naming_it() {
    skip_if_unavailable!();
    let db = temp_ledger();
    db.create();
    for name in ["resolve", "reprocess"] {
        let r = tool(
            name,
            &[with_db(name, db.arg(), "ftp://x"), vec!["--dry-run"]].concat(),
        );
        r.expect_code(EXIT_FATAL);
        let r = tool(name, &with_db(name, db.arg(), "ftp://x"));
        r.expect_code(EXIT_FATAL);
        assert!(r.stderr().contains("ftp://x"), "{name}: {}", r.stderr());
        assert_eq!(r.stderr().lines().count(), 1, "{name}: {}", r.stderr());
    }
}

sqlite_only! {
    "only a file path can be mistyped into a new ledger; a server applies the schema",
    fn a_mistyped_ledger_path_is_exit_1_and_creates_nothing() {
        let db = temp_ledger(); // the directory exists, the file does not
        let core = dead_url();
        for name in ["resolve", "reprocess", "purge", "inspect"] {
            let args = match name {
                "purge" => vec!["--db", db.arg(), "--days", "30"],
                "inspect" => vec!["--db", db.arg()],
                _ => with_db(name, db.arg(), &core),
            };
            let r = tool(name, &args);
            r.expect_code(EXIT_FATAL);
            assert!(
                r.stderr().contains("does not exist"),
                "{name}: {}",
                r.stderr()
            );
            assert_eq!(r.stderr().lines().count(), 1, "{name}: {}", r.stderr());
            assert!(!db.created(), "{name} created the ledger");
        }
    }
}

#[test]
fn bad_flags_are_exit_2_naming_the_flag() {
    skip_if_unavailable!();
    let db = temp_ledger();
    let core = dead_url();
    let d = db.arg();
    let resolve_args =
        |extra: &[&'static str]| [&["--db", d, "--core", core.as_str()][..], extra].concat();
    let reprocess_args = |extra: &[&'static str]| {
        [
            &["--db", d, "--core", core.as_str(), "--max-attempts", "3"][..],
            extra,
        ]
        .concat()
    };
    let cases: Vec<(&str, Vec<&str>, &str)> = vec![
        ("resolve", resolve_args(&[]), "--min-age"),
        ("resolve", resolve_args(&["--min-age", "soon"]), "--min-age"),
        ("resolve", resolve_args(&["--min-age", "-1"]), "-1"),
        (
            "resolve",
            resolve_args(&["--min-age", "60", "--stale-sent", "x"]),
            "--stale-sent",
        ),
        (
            "resolve",
            resolve_args(&["--min-age", "60", "--bogus"]),
            "--bogus",
        ),
        ("resolve", vec!["--core", &core, "--min-age", "60"], "--db"),
        (
            "reprocess",
            vec!["--db", d, "--core", &core],
            "--max-attempts",
        ),
        (
            "reprocess",
            vec!["--db", d, "--core", &core, "--max-attempts", "0"],
            "--max-attempts",
        ),
        ("reprocess", reprocess_args(&["--limit", "few"]), "--limit"),
        ("reprocess", reprocess_args(&["--bogus"]), "--bogus"),
        (
            "resolve",
            resolve_args(&["--min-age", "60", "--max-inquiries", "0"]),
            "--max-inquiries",
        ),
        (
            "resolve",
            resolve_args(&["--min-age", "60", "--max-inquiries", "x"]),
            "--max-inquiries",
        ),
        (
            "resolve",
            resolve_args(&["--min-age", "60", "--parallel", "0"]),
            "--parallel",
        ),
        (
            "resolve",
            resolve_args(&["--min-age", "60", "--parallel", "257"]),
            "--parallel",
        ),
        (
            "resolve",
            resolve_args(&["--min-age", "60", "--parallel", "x"]),
            "--parallel",
        ),
        (
            "reprocess",
            reprocess_args(&["--parallel", "0"]),
            "--parallel",
        ),
        (
            "reprocess",
            reprocess_args(&["--parallel", "257"]),
            "--parallel",
        ),
        ("purge", vec!["--db", d], "--days"),
        ("purge", vec!["--db", d, "--days", "seven"], "--days"),
        (
            "purge",
            vec!["--db", d, "--days", "7", "--bogus"],
            "--bogus",
        ),
    ];
    for (name, args, flag) in cases {
        let r = tool(name, &args);
        r.expect_code(EXIT_USAGE);
        assert!(r.stderr().contains(flag), "{name} {args:?}: {}", r.stderr());
        assert_eq!(r.stdout(), "");
    }
    assert!(
        !db.created() || db.count() == 0,
        "usage errors write nothing"
    );
}

#[test]
fn every_timeout_flag_of_the_batch_tools_has_an_environment_twin() {
    skip_if_unavailable!();
    // (And --max-inquiries and --parallel, checked with the timeouts below.)
    for (name, prefix) in [("resolve", "RESOLVE"), ("reprocess", "REPROCESS")] {
        let r = Run::new(name, &["--help"]);
        r.expect_code(EXIT_SETTLED);
        for flag in ["CONNECT_TIMEOUT_MS", "READ_TIMEOUT_MS"] {
            assert!(
                r.stdout().contains(&format!("env: {prefix}_{flag}")),
                "{name} --help: {}",
                r.stdout()
            );
        }
    }
    let help = Run::new("resolve", &["--help"]);
    assert!(help.stdout().contains("--stale-sent"), "{}", help.stdout());
    assert!(
        !help.stdout().contains("env: RESOLVE_STALE_SENT"),
        "{}",
        help.stdout()
    );

    let db = temp_ledger();
    let core = dead_url();
    for (name, var, flag) in [
        ("resolve", "RESOLVE_READ_TIMEOUT_MS", "--read-timeout-ms"),
        (
            "resolve",
            "RESOLVE_CONNECT_TIMEOUT_MS",
            "--connect-timeout-ms",
        ),
        (
            "reprocess",
            "REPROCESS_READ_TIMEOUT_MS",
            "--read-timeout-ms",
        ),
        (
            "reprocess",
            "REPROCESS_CONNECT_TIMEOUT_MS",
            "--connect-timeout-ms",
        ),
        ("resolve", "RESOLVE_MAX_INQUIRIES", "--max-inquiries"),
        ("resolve", "RESOLVE_PARALLEL", "--parallel"),
        ("reprocess", "REPROCESS_PARALLEL", "--parallel"),
    ] {
        let r = Run::with_env(name, &with_db(name, db.arg(), &core), &[(var, "abc")]);
        r.expect_code(EXIT_USAGE);
        assert!(r.stderr().contains(flag), "{name} {var}: {}", r.stderr());
        assert_eq!(r.stdout(), "");
    }
    assert!(!db.created(), "usage errors create nothing");
}

/// Every tool's valid arguments for ledger `db` (and the core at `core` where it needs one).
fn every_tool<'a>(db: &'a str, core: &'a str) -> Vec<(&'static str, Vec<&'a str>)> {
    vec![
        (
            "relay",
            vec!["--db", db, "--core", core, "--listen", "127.0.0.1:0"],
        ),
        ("resolve", with_db("resolve", db, core)),
        ("reprocess", with_db("reprocess", db, core)),
        ("purge", with_db("purge", db, core)),
        ("inspect", vec!["--db", db]),
        ("backup", vec!["--db", db, "--to", "/nonexistent-dir/b.db"]),
        (
            "restore",
            vec!["--db", db, "--from", "/nonexistent-dir/b.db"],
        ),
    ]
}

#[test]
fn empty_values_and_negative_numbers_are_exit_2_naming_the_flag_or_variable() {
    skip_if_unavailable!();
    let db = temp_ledger();
    let core = dead_url();
    for (name, args) in every_tool("", &core) {
        let r = tool(name, &args);
        r.expect_code(EXIT_USAGE);
        assert!(
            r.stderr().contains("invalid value '' for '--db'"),
            "{name}: {}",
            r.stderr()
        );
    }
    let negative: [(&str, Vec<&str>, &str); 4] = [
        ("purge", vec!["--db", db.arg(), "--days", "-1"], "--days"),
        ("purge", vec!["--db", db.arg(), "--days=-1"], "--days"),
        (
            "reprocess",
            vec!["--db", db.arg(), "--core", &core, "--max-attempts", "-3"],
            "--max-attempts",
        ),
        (
            "inspect",
            vec!["--db", db.arg(), "list", "--state", "DONE", "--limit", "-5"],
            "--limit",
        ),
    ];
    for (name, args, flag) in negative {
        let r = tool(name, &args);
        r.expect_code(EXIT_USAGE);
        let want = format!("for '{flag}': negative numbers are not allowed");
        assert!(
            r.stderr().contains(&want),
            "{name} {args:?}: {}",
            r.stderr()
        );
    }
    // An environment twin set to nothing names the variable, whatever the flag's type.
    for (var, name, args) in [
        (
            "RELAY_LISTEN",
            "relay",
            vec!["--db", db.arg(), "--core", &core],
        ),
        (
            "RELAY_READ_TIMEOUT_MS",
            "relay",
            vec!["--db", db.arg(), "--core", &core],
        ),
        ("PURGE_DB", "purge", vec!["--days", "7"]),
        (
            "RESOLVE_CORE",
            "resolve",
            vec!["--db", db.arg(), "--min-age", "60"],
        ),
    ] {
        let r = Run::with_env(name, &args, &[(var, "")]);
        r.expect_code(EXIT_USAGE);
        assert!(
            r.stderr().contains(&format!("{var} is set but empty")),
            "{name} {var}: {}",
            r.stderr()
        );
    }
    assert!(!db.created(), "usage errors create no ledger");
}

sqlite_only! {
    "a directory or a missing directory is a file path's mistake",
    fn a_directory_or_a_missing_directory_as_ledger_is_one_line_naming_it() {
        let db = temp_ledger();
        let core = dead_url();
        let dir = db.dir().to_str().expect("UTF-8 temp path").to_string();
        let missing = format!("{dir}/no-such-dir/ledger.db");
        for (path, want) in [
            (dir.as_str(), "it is a directory, not a ledger file"),
            (missing.as_str(), "no-such-dir does not exist"),
        ] {
            for (name, args) in every_tool(path, &core) {
                if name == "backup" {
                    continue; // backup's own refusals are tested with it
                }
                let r = tool(name, &args);
                r.expect_code(EXIT_FATAL);
                assert_eq!(r.stderr().lines().count(), 1, "{name}: {}", r.stderr());
                assert!(r.stderr().contains(want), "{name} {path}: {}", r.stderr());
                assert!(r.stderr().contains(path), "{name}: {}", r.stderr());
            }
        }
        assert!(!std::path::Path::new(&missing).exists());
    }
}
