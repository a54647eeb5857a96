//! A password in the database URL never shows: not in a fatal error, not in `--help` with
//! the URL in the environment, not in a log line of a relay or a tool at work.

use crate::util::*;

const SECRET: &str = "s3cret";

/// The tools as they are started against a ledger `db`, with what else each needs.
fn tools_on(db: &str) -> Vec<(&'static str, Vec<String>)> {
    let db = db.to_string();
    let core = dead_url();
    let with = |args: &[&str]| -> Vec<String> {
        ["--db", db.as_str()]
            .iter()
            .chain(args)
            .map(|s| s.to_string())
            .collect()
    };
    vec![
        ("relay", with(&["--listen", "127.0.0.1:0", "--core", &core])),
        ("resolve", with(&["--core", &core, "--min-age", "60"])),
        ("reprocess", with(&["--core", &core, "--max-attempts", "3"])),
        ("purge", with(&["--days", "30"])),
        ("inspect", with(&[])),
    ]
}

fn assert_no_secret(what: &str, text: &str) {
    assert!(!text.contains(SECRET), "{what} shows the password: {text}");
}

#[test]
fn a_ledger_that_cannot_be_reached_is_one_line_without_the_password() {
    skip_if_unavailable!();
    let port = dead_port();
    for url in [
        format!("postgres://txrelay:{SECRET}@127.0.0.1:{port}/ledger"),
        format!("postgresql://txrelay@127.0.0.1:{port}/ledger?password={SECRET}&sslmode=disable"),
    ] {
        for (name, args) in tools_on(&url) {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let r = tool(name, &args);
            r.expect_code(EXIT_FATAL);
            let err = r.stderr();
            assert_eq!(err.lines().count(), 1, "{name}: one line: {err}");
            assert_no_secret(name, err);
            assert!(err.contains("txrelay"), "{name} names the ledger: {err}");
            assert!(
                err.contains("***"),
                "{name} shows the password masked: {err}"
            );
            assert_no_secret(name, r.stdout());
        }
        let r = tool("migrate", &["--from", "/nonexistent.db", "--to", &url]);
        r.expect_code(EXIT_FATAL);
        assert_eq!(r.stderr().lines().count(), 1, "{}", r.stderr());
        assert_no_secret("migrate", r.stderr());
    }
}

#[test]
fn help_never_shows_a_database_url_from_the_environment() {
    skip_if_unavailable!();
    let url = format!("postgres://txrelay:{SECRET}@db.internal:5432/ledger");
    for (name, var) in [
        ("relay", "RELAY_DB"),
        ("resolve", "RESOLVE_DB"),
        ("reprocess", "REPROCESS_DB"),
        ("purge", "PURGE_DB"),
        ("inspect", "INSPECT_DB"),
        ("migrate", "MIGRATE_TO"),
    ] {
        let r = Run::with_env(name, &["--help"], &[(var, &url)]);
        r.expect_code(EXIT_SETTLED);
        assert!(r.stdout().contains(var), "{name} --help names {var}");
        assert_no_secret(name, r.stdout());
        assert_no_secret(name, r.stderr());
    }
}

#[test]
fn a_relay_and_the_tools_at_work_never_log_the_password() {
    skip_if_unavailable!();
    let db = temp_ledger();
    // Our own server trusts every local connection, so a URL with a password reaches it as
    // well; a server of someone else's (TEST_DATABASE_URL) would check it.
    if testkit::pg::shared().is_some_and(|s| s.cluster().is_none()) {
        return;
    }
    let url = db
        .arg()
        .replacen("://postgres@", &format!("://postgres:{SECRET}@"), 1);
    assert_ne!(url, db.arg(), "a URL with a user to add the password to");
    let core = Core::start(&["--slow-ms", "100"]);
    let env = [("RUST_LOG", "debug")];
    let mut relay = Server::start({
        let mut cmd = std::process::Command::new(testkit::bin("relay"));
        cmd.args([
            "--db",
            &url,
            "--listen",
            "127.0.0.1:0",
            "--core",
            &core.url(),
        ])
        .envs(env);
        cmd
    });
    for (g, memo) in [
        ("G-PW-OK", ""),
        ("G-PW-LOST", "DROP"),
        ("G-PW-SLOW", "SLOW"),
    ] {
        call(&relay.addr, &msg(g, 5, memo));
    }
    db.age("G-PW-LOST", OLD);
    let runs = [
        Run::with_env(
            "resolve",
            &["--db", &url, "--core", &core.url(), "--min-age", "60"],
            &env,
        ),
        Run::with_env(
            "reprocess",
            &["--db", &url, "--core", &core.url(), "--max-attempts", "3"],
            &env,
        ),
        Run::with_env("purge", &["--db", &url, "--days", "30"], &env),
        Run::with_env("inspect", &["--db", &url], &env),
    ];
    for r in &runs {
        r.expect_code(EXIT_SETTLED);
        assert_no_secret(&r.argv[0], r.stdout());
        assert_no_secret(&r.argv[0], r.stderr());
    }
    assert_eq!(
        db.state("G-PW-LOST"),
        Some(State::Done),
        "resolve did its work"
    );
    relay.signal("-TERM");
    relay.wait_exit(WAIT).expect("the relay stops");
    assert!(!relay.stderr().is_empty(), "the relay logged");
    assert_no_secret("the relay's log", &relay.stderr());
}
