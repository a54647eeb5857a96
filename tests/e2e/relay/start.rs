//! The relay starts honestly or not at all (issue 19.3): a ledger from a newer version is
//! refused (by every tool), every schema upgrade is logged from → to, a ledger the relay
//! cannot write is refused before `listening on`, and a second relay on one SQLite ledger is
//! refused while the first holds it.

use crate::util::*;

/// The schema version this build writes, per backend.
fn known_version(db: &TempLedger) -> i64 {
    match db.backend() {
        Backend::Sqlite => ledger::sqlite::SCHEMA_VERSION,
        Backend::Postgres => ledger::postgres::SCHEMA_VERSION.into(),
    }
}

#[test]
fn a_ledger_newer_than_this_build_is_refused_by_every_tool() {
    skip_if_unavailable!();
    let db = temp_ledger();
    db.create();
    by_hand(
        &db,
        "PRAGMA user_version = 99",
        "INSERT INTO ledger_schema (version) VALUES (99)",
    );
    let core = Core::start(&[]);
    let (d, url) = (db.arg(), core.url());
    let known = format!("({})", known_version(&db));
    let runs: [(&str, Vec<&str>); 6] = [
        (
            "relay",
            vec!["--db", d, "--listen", "127.0.0.1:0", "--core", &url],
        ),
        (
            "resolve",
            vec!["--db", d, "--core", &url, "--min-age", "60"],
        ),
        (
            "reprocess",
            vec!["--db", d, "--core", &url, "--max-attempts", "3"],
        ),
        ("purge", vec!["--db", d, "--days", "30"]),
        ("inspect", vec!["--db", d, "summary"]),
        ("inspect", vec!["--db", d]),
    ];
    for (tool, args) in runs {
        let r = Run::new(tool, &args);
        one_line_refusal(
            &r,
            &["schema is version 99, newer than this build knows", &known],
        );
    }
    // Left as it is: no tool downgraded it.
    let r = Run::new(
        "relay",
        &["--db", d, "--listen", "127.0.0.1:0", "--core", &url],
    );
    one_line_refusal(&r, &["version 99"]);
    assert_eq!(core.total_bookings(), 0);
}

#[test]
fn every_schema_upgrade_is_logged_from_and_to() {
    skip_if_unavailable!();
    let db = temp_ledger();
    db.create();
    let (old, new) = (known_version(&db) - 1, known_version(&db));
    by_hand(
        &db,
        &format!("PRAGMA user_version = {old}"),
        &format!("DELETE FROM ledger_schema; INSERT INTO ledger_schema (version) VALUES ({old})"),
    );
    let line = format!("schema upgraded from version {old} to {new}");
    let r = purge(&db, &["--days", "30"]);
    r.expect_code(EXIT_SETTLED);
    assert_eq!(r.stderr().matches(&line).count(), 1, "{}", r.stderr());
    // Up to date now: nothing to log.
    let r = purge(&db, &["--days", "30"]);
    r.expect_code(EXIT_SETTLED);
    assert!(!r.stderr().contains("schema upgraded"), "{}", r.stderr());

    // The relay logs its upgrade too.
    by_hand(
        &db,
        &format!("PRAGMA user_version = {old}"),
        &format!("DELETE FROM ledger_schema; INSERT INTO ledger_schema (version) VALUES ({old})"),
    );
    let core = Core::start(&[]);
    let relay = start_relay(&db, &core.url(), &[]);
    assert!(relay.stderr().contains(&line), "{}", relay.stderr());
}

/// A relay started on a ledger where writing `table` fails is refused, in one line.
fn refused_when_writing_fails_on(table: &str) {
    let db = temp_ledger();
    db.create();
    // As a read-only file or database would (chmod does not stop root, which CI runs as).
    by_hand(
        &db,
        &format!(
            "CREATE TRIGGER test_no_write BEFORE INSERT ON {table} \
                 BEGIN SELECT RAISE(ABORT, 'attempt to write a readonly database'); END;"
        ),
        &format!(
            "CREATE FUNCTION test_no_write() RETURNS trigger LANGUAGE plpgsql AS \
                 $$ BEGIN RAISE EXCEPTION 'cannot execute INSERT in a read-only transaction'; END $$; \
             CREATE TRIGGER test_no_write BEFORE INSERT OR UPDATE ON {table} \
                 FOR EACH ROW EXECUTE FUNCTION test_no_write();"
        ),
    );
    let core = Core::start(&[]);
    let r = Run::new(
        "relay",
        &[
            "--db",
            db.arg(),
            "--listen",
            "127.0.0.1:0",
            "--core",
            &core.url(),
        ],
    );
    one_line_refusal(&r, &["cannot write its ledger", "E905"]);
    assert_eq!(db.count(), 0, "the probe left no row");
}

#[test]
fn a_ledger_the_relay_cannot_write_is_refused_at_start() {
    skip_if_unavailable!();
    refused_when_writing_fails_on("relay_health");
}

/// The start's probe goes through the claim path itself: a ledger whose `tx` takes no new row
/// (while its health row could still be written) is refused too, not found out by the first
/// transfer's `E905`.
#[test]
fn a_ledger_that_takes_no_claim_is_refused_at_start() {
    skip_if_unavailable!();
    refused_when_writing_fails_on("tx");
}

#[test]
fn a_second_relay_on_one_sqlite_ledger_is_refused() {
    skip_if_unavailable!();
    if BACKEND != Backend::Sqlite {
        return; // PostgreSQL ledgers are shared by several relays by design (contract §7).
    }
    let db = temp_ledger();
    let core = Core::start(&[]);
    let mut first = start_relay(&db, &core.url(), &[]);
    let m = msg("G-TWO-RELAYS", 5, "");
    assert_eq!(code(&call(&first.addr, &m)), "0000");
    let path = db.arg().to_string();
    let url = core.url();
    let args = ["--db", &path, "--listen", "127.0.0.1:0", "--core", &url];
    let pid = format!("pid {}", first.pid());
    for _ in 0..2 {
        let r = Run::new("relay", &args);
        one_line_refusal(&r, &[&path, "another relay", &pid]);
    }
    // The batch tools run beside it, and the first relay still serves.
    purge(&db, &["--days", "30"]).expect_code(EXIT_SETTLED);
    assert_eq!(code(&call(&first.addr, &m)), "0000");
    assert_eq!(core.bookings("G-TWO-RELAYS"), 1);
    // Once it is gone (even killed), the next one starts and replays the stored reply.
    first.kill();
    let second = start_relay(&db, &url, &[]);
    assert_eq!(code(&call(&second.addr, &m)), "0000");
    assert_eq!(core.bookings("G-TWO-RELAYS"), 1);
}

#[test]
fn a_relay_that_cannot_listen_leaves_the_ledger_untouched() {
    skip_if_unavailable!();
    let db = temp_ledger();
    let core = dead_url();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let busy = taken.local_addr().expect("addr").to_string();
    for extra in [
        vec!["--listen", busy.as_str()],
        vec!["--listen", "127.0.0.1:0", "--admin", busy.as_str()],
    ] {
        let args = [&["--db", db.arg(), "--core", &core][..], &extra].concat();
        let r = tool("relay", &args);
        one_line_refusal(&r, &["cannot listen on", &busy]);
    }
    if db.backend() == Backend::Sqlite {
        let files: Vec<_> = std::fs::read_dir(db.dir()).expect("read dir").collect();
        assert!(files.is_empty(), "no ledger, lock or WAL file: {files:?}");
    } else {
        assert!(!db.created(), "no schema applied");
    }
}
