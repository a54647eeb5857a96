//! A password in the database URL never shows: not in a fatal error, not in `--help` with
//! the URL in the environment, not in a log line of a relay or a tool at work; and a
//! password with any character reaches the server intact.
//!
//! The passwords hold what base64 secrets and generated ones hold (`/`, `+`, `=`, `?`, `#`,
//! `%`), each with the tokens `Xq9` and `Zk7`: neither may appear in any output.

use testkit::pg::{Server as PgServer, Setup};

use crate::util::*;

/// The tokens every test password holds; their showing anywhere is a leak.
const TOKENS: [&str; 2] = ["Xq9", "Zk7"];

/// Passwords as written in a URL.
const PASSWORDS: [&str; 7] = [
    "Xq9s3cretZk7",
    "Xq9/se/cretZk7",
    "Xq9?seZk7",
    "Xq9#seZk7",
    "Xq9%2FseZk7",
    "Xq9+se/Zk7==",
    "/?#:Xq9Zk7",
];

/// The tools as they are started against a ledger `db`, with what else each needs; `from`
/// is an SQLite ledger for `migrate` to copy.
fn tools_on(db: &str, from: &str) -> Vec<(&'static str, Vec<String>)> {
    let core = dead_url();
    let with = |flag: &str, args: &[&str]| -> Vec<String> {
        [flag, db]
            .iter()
            .chain(args)
            .map(|s| s.to_string())
            .collect()
    };
    vec![
        (
            "relay",
            with("--db", &["--listen", "127.0.0.1:0", "--core", &core]),
        ),
        (
            "resolve",
            with("--db", &["--core", &core, "--min-age", "60"]),
        ),
        (
            "reprocess",
            with("--db", &["--core", &core, "--max-attempts", "3"]),
        ),
        ("purge", with("--db", &["--days", "30"])),
        ("inspect", with("--db", &[])),
        ("migrate", with("--to", &["--from", from])),
    ]
}

fn assert_no_secret(what: &str, text: &str) {
    for token in TOKENS {
        assert!(!text.contains(token), "{what} shows the password: {text}");
    }
}

/// A closed port: every tool fails to connect, in one line naming the ledger with its
/// password masked. Needs no server.
#[test]
fn a_ledger_that_cannot_be_reached_is_one_line_without_the_password() {
    let port = dead_port();
    let from = TempLedger::new();
    from.create();
    let urls = PASSWORDS
        .iter()
        .map(|pw| format!("postgres://txrelay:{pw}@127.0.0.1:{port}/ledger"))
        .chain([
            format!("postgres://txrelay:@127.0.0.1:{port}/ledger"),
            format!(
                "postgresql://txrelay@127.0.0.1:{port}/ledger?password=Xq9/?Zk7&sslmode=disable"
            ),
        ]);
    for url in urls {
        for (name, args) in tools_on(&url, from.arg()) {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let r = tool(name, &args);
            r.expect_code(EXIT_FATAL);
            let err = r.stderr();
            assert_eq!(err.lines().count(), 1, "{name} {url}: one line: {err}");
            assert_no_secret(name, err);
            assert_no_secret(name, r.stdout());
            assert!(
                err.contains(&format!("txrelay:***@127.0.0.1:{port}/ledger")),
                "{name} names the ledger, its password masked: {err}"
            );
        }
    }
}

/// A raw `@` in a password is read by the client library as the user info's end (the rest
/// would be the host's name): the URL is refused as a usage error, the password not shown.
#[test]
fn a_raw_at_sign_in_a_password_is_refused_without_showing_it() {
    let port = dead_port();
    let from = TempLedger::new();
    from.create();
    let url = format!("postgres://txrelay:Xq9@Zk7@127.0.0.1:{port}/ledger");
    for (name, args) in tools_on(&url, from.arg()) {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let r = tool(name, &args);
        r.expect_code(EXIT_USAGE);
        assert!(r.stderr().contains("%40"), "{name}: {}", r.stderr());
        assert_no_secret(name, r.stderr());
        assert_no_secret(name, r.stdout());
    }
}

#[test]
fn help_never_shows_a_database_url_from_the_environment() {
    for pw in PASSWORDS {
        let url = format!("postgres://txrelay:{pw}@db.internal:5432/ledger");
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
}

/// The role the password tests log in as, on a server that checks passwords.
const ROLE: &str = "relay_pw";
/// Its password as the server knows it, and as written in a URL (a `@` percent-encoded).
const ROLE_PASSWORD: &str = "Xq9/b+c?d#e@f=Zk7";
const ROLE_PASSWORD_IN_URL: &str = "Xq9/b+c?d#e%40f=Zk7";

/// A cluster of our own that asks `ROLE` for its password (SCRAM) over TCP, `ROLE` and its
/// schema made (its default search path); other roles and the Unix socket are trusted.
fn password_server() -> PgServer {
    let setup = Setup {
        hba: Some(format!(
            "local all all trust\n\
             host all {ROLE} 127.0.0.1/32 scram-sha-256\n\
             host all all 127.0.0.1/32 trust\n"
        )),
        ..Setup::default()
    };
    let server = PgServer::own_with(&setup).expect("a PostgreSQL cluster of our own");
    server
        .exec(&format!(
            "CREATE ROLE {ROLE} LOGIN PASSWORD '{ROLE_PASSWORD}'; \
             CREATE SCHEMA {ROLE} AUTHORIZATION {ROLE};"
        ))
        .expect("create the password role");
    server
}

#[test]
fn a_relay_and_the_tools_at_work_never_log_the_password() {
    skip_if_unavailable!();
    let server = password_server();
    let port = server.cluster().expect("our own cluster").port;
    let url = format!("postgres://{ROLE}:{ROLE_PASSWORD_IN_URL}@127.0.0.1:{port}/postgres");
    let db = TempLedger::at_url(url.clone());
    let core = Core::start(&["--slow-ms", "100"]);
    let env = [("RUST_LOG", "debug")];

    // The server does check: a wrong password is refused.
    let wrong = url.replace("Zk7@", "Zk7-wrong@");
    let r = Run::with_env(
        "resolve",
        &["--db", &wrong, "--core", &core.url(), "--min-age", "60"],
        &env,
    );
    r.expect_code(EXIT_FATAL);
    assert!(r.stderr().contains("password"), "{}", r.stderr());
    assert_no_secret("resolve with a wrong password", r.stderr());

    let mut relay = Server::start({
        let mut cmd = relay_command_at(&url, &core.url(), &[]);
        cmd.envs(env);
        cmd
    });
    for (g, memo) in [
        ("G-PW-OK", ""),
        ("G-PW-LOST", "DROP"),
        ("G-PW-SLOW", "SLOW"),
    ] {
        call(&relay.addr, &msg(g, 5, memo));
    }
    assert_eq!(db.state("G-PW-OK"), Some(State::Done), "the relay booked");
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
