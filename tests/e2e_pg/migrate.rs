//! `migrate --from SQLITE --to postgres://…`: a ledger written by the relay on SQLite moves
//! into PostgreSQL row for row and byte for byte, `updated_at` included; running it again
//! copies nothing; a GUID already in PostgreSQL with other content is reported and left
//! (exit 3); the SQLite ledger's write lock is held for the copy (a ledger in use is refused,
//! nothing copied); a complete copy marks the SQLite ledger moved, after which every tool
//! refuses it, naming where it went; and a relay on the PostgreSQL ledger then replays what
//! the SQLite relay booked.

use wire::{E_GUID_REUSED, E_LEDGER, E_UNKNOWN};

use crate::util::*;

/// `migrate --from FROM --to TO --json`.
fn migrate(from: &TempLedger, to: &TempLedger) -> Run {
    tool(
        "migrate",
        &["--from", from.arg(), "--to", to.arg(), "--json"],
    )
}

#[test]
fn migrate_copies_a_relays_sqlite_ledger_once_and_never_overwrites() {
    skip_if_unavailable!();
    let core = Core::start(&[]);
    let sqlite = TempLedger::new();
    let booked = msg("G-MIG-BOOKED", 1500, "rent");
    let rejected = msg("G-MIG-REJECTED", 20, "REJECT");
    let unknown = msg("G-MIG-UNKNOWN", 30, "DROP");
    let failed = msg("G-MIG-FAILED", 40, "");
    // Today's relay on SQLite writes the ledger (then stops, as migrating asks).
    let (booked_reply, rejected_reply) = {
        let relay = start_relay(&sqlite, &core.url(), &[]);
        let booked_reply = call(&relay.addr, &booked);
        assert_code(&booked_reply, "0000");
        let rejected_reply = call(&relay.addr, &rejected);
        assert_code(&rejected_reply, "B001");
        assert_eq!(call(&relay.addr, &unknown), short(&unknown, &E_UNKNOWN));
        // One relay per SQLite ledger: this one goes before the next starts.
        drop(relay);
        let down = start_relay(&sqlite, &dead_url(), &[]);
        assert_code(&call(&down.addr, &failed), "E902");
        (booked_reply, rejected_reply)
    };
    // Another tool's row, with only the columns the contract requires.
    RowSpec::bare("G-MIG-HAND", State::Unknown)
        .age(3 * DAY)
        .insert(&sqlite);
    // Rows of different ages: the copies must keep each one's own updated_at.
    sqlite.age("G-MIG-BOOKED", 10 * DAY);
    sqlite.age("G-MIG-REJECTED", 2 * HOUR);
    // A GUID already in PostgreSQL with other content (booked there meanwhile, say).
    let clash = msg("G-MIG-CLASH", 60, "");
    {
        let relay = start_relay(&sqlite, &core.url(), &[]);
        assert_code(&call(&relay.addr, &clash), "0000");
    }
    let pg = temp_ledger();
    RowSpec::failed(&msg("G-MIG-CLASH", 61, "other"))
        .age(HOUR)
        .insert(&pg);
    let clash_there = pg.row("G-MIG-CLASH").unwrap();

    // It is reported and left, the rest copied; exit 3, and the SQLite ledger is not marked
    // moved: running it again is harmless.
    for copied in [5, 0] {
        let r = migrate(&sqlite, &pg);
        r.expect_code(EXIT_LEFT);
        let j = r.json();
        assert_counts(
            &j,
            &[
                ("read", 6),
                ("copied", copied),
                ("present", 5 - copied),
                ("refused", 1),
            ],
        );
        assert_eq!(
            j["refused_guids"],
            serde_json::json!(["G-MIG-CLASH"]),
            "{j}"
        );
        assert!(r.stderr().contains("G-MIG-CLASH"), "{}", r.stderr());
        assert_eq!(
            pg.row("G-MIG-CLASH").unwrap(),
            clash_there,
            "not overwritten"
        );
        tool("inspect", &["--db", sqlite.arg()]).expect_code(EXIT_SETTLED);
    }
    // The operator settles the clash (here: the PostgreSQL row was a mistake); then every row
    // is copied, each as it was, updated_at included.
    by_hand(&pg, "", "DELETE FROM tx WHERE guid = 'G-MIG-CLASH'");
    let r = migrate(&sqlite, &pg);
    r.expect_code(EXIT_SETTLED);
    assert_counts(
        &r.json(),
        &[("read", 6), ("copied", 1), ("present", 5), ("refused", 0)],
    );
    let rows = sqlite.rows();
    assert_eq!(rows.len(), 6);
    assert_eq!(pg.rows(), rows, "every row as it was, updated_at included");

    // Now the SQLite ledger is marked moved: migrating it again is refused.
    let r = migrate(&sqlite, &pg);
    r.expect_code(EXIT_FATAL);
    assert!(r.stderr().contains("was moved to"), "{}", r.stderr());
    assert_eq!(pg.rows(), rows);

    // A relay on the PostgreSQL ledger: what the SQLite relay settled is answered from the
    // ledger, byte for byte, and never reaches the core again.
    let relay = start_relay(&pg, &core.url(), &[]);
    assert_eq!(call(&relay.addr, &booked), booked_reply);
    assert_eq!(call(&relay.addr, &rejected), rejected_reply);
    assert_eq!(call(&relay.addr, &unknown), short(&unknown, &E_UNKNOWN));
    let hand = msg("G-MIG-HAND", 5, "");
    assert_eq!(call(&relay.addr, &hand), short(&hand, &E_GUID_REUSED));
    assert_eq!(core.bookings("G-MIG-BOOKED"), 1);
    assert_eq!(
        core.bookings("G-MIG-UNKNOWN"),
        1,
        "booked once, by the lost send"
    );
    assert_eq!(core.bookings("G-MIG-REJECTED"), 0);
    // The one proven unsent is sent now, once.
    let sent_now = call(&relay.addr, &failed);
    assert_code(&sent_now, "0000");
    assert_eq!(call(&relay.addr, &failed), sent_now);
    assert_eq!(core.bookings("G-MIG-FAILED"), 1);
    assert_eq!(pg.row("G-MIG-FAILED").unwrap().attempts, Some(2));
}

#[test]
fn migrate_refuses_anything_but_sqlite_into_postgresql() {
    skip_if_unavailable!();
    let sqlite = TempLedger::new();
    sqlite.create();
    let pg = temp_ledger();
    for (from, to, flag) in [
        (sqlite.arg(), sqlite.arg(), "--to"),
        (pg.arg(), pg.arg(), "--from"),
    ] {
        let r = tool("migrate", &["--from", from, "--to", to]);
        r.expect_code(EXIT_FATAL);
        assert_eq!(r.stderr().lines().count(), 1, "{}", r.stderr());
        assert!(r.stderr().contains(flag), "{}", r.stderr());
    }
    assert!(!pg.created(), "nothing was written");
}

#[test]
fn migrate_refuses_a_ledger_whose_write_lock_is_held_and_copies_nothing() {
    skip_if_unavailable!();
    let sqlite = TempLedger::new();
    RowSpec::unknown(&msg("G-MIG-LOCK", 10, ""))
        .age(OLD)
        .insert(&sqlite);
    let pg = temp_ledger();
    // Another program writing the ledger (a relay's claim, a resolve's settlement).
    let lock = WriteLock::take(&sqlite, "G-MIG-LOCK");
    let r = migrate(&sqlite, &pg);
    r.expect_code(EXIT_FATAL);
    let err = r.stderr();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("is in use") && err.contains("nothing copied"),
        "{err}"
    );
    assert_stdout_for_failure(&r, true, EXIT_FATAL);
    assert!(pg.rows().is_empty(), "nothing copied");
    lock.release();
    // Not marked moved: once the writer is gone, it migrates.
    let r = migrate(&sqlite, &pg);
    r.expect_code(EXIT_SETTLED);
    assert_counts(&r.json(), &[("read", 1), ("copied", 1)]);
}

/// A settlement request still undecided is not carried by the copy (PostgreSQL records a
/// maker only as its own session's role): migrate refuses until a second person decides it.
#[test]
fn migrate_refuses_a_ledger_with_an_undecided_settlement_request() {
    skip_if_unavailable!();
    let sqlite = TempLedger::new();
    let m = msg("G-MIG-REQ", 10, "");
    RowSpec::unknown(&m).age(OLD).insert(&sqlite);
    let reply = wire::reply_to(&m, &wire::E_NOT_SENT, None);
    sqlite
        .store()
        .make_settle_request(&ledger::settle_request::NewRequest {
            guid: "G-MIG-REQ".into(),
            seen_state: State::Unknown,
            seen_attempts: 1,
            outcome: "not-booked",
            to: State::Failed,
            rsp_code: "E902".into(),
            response: reply,
            evidence: "404 (never booked)".into(),
            forced: false,
            min_age_secs: Some(300),
            reason: "ticket 5".into(),
            expires_in_secs: 3600,
        })
        .unwrap();
    let pg = temp_ledger();
    let r = migrate(&sqlite, &pg);
    r.expect_code(EXIT_FATAL);
    let err = r.stderr();
    assert!(
        err.contains(
            "has 1 settlement request(s) pending and 0 expired undecided: approve or \
                      reject them first"
        ) && err.contains("nothing copied"),
        "{err}"
    );
    assert!(pg.rows().is_empty(), "nothing copied");
    // A second person closes it: then the ledger migrates.
    let Ok(second) = testkit::second_person::SecondPerson::of(&sqlite) else {
        return; // no second Unix user here (said by the dual-control tests)
    };
    let mut reject = second.command("inspect");
    reject.args([
        "--db",
        second.db_arg(),
        "reject",
        "1",
        "--reason",
        "migrating",
    ]);
    Run::command(reject, WAIT).expect_code(EXIT_SETTLED);
    let r = migrate(&sqlite, &pg);
    r.expect_code(EXIT_SETTLED);
    assert_counts(&r.json(), &[("read", 1), ("copied", 1)]);
}

#[test]
fn after_a_migrate_every_tool_refuses_the_sqlite_ledger_naming_where_it_went() {
    skip_if_unavailable!();
    let core = Core::start(&[]);
    let sqlite = TempLedger::new();
    let pg = temp_ledger();
    // A relay left running on the SQLite ledger (idle: it holds no lock between requests).
    let relay = start_relay(&sqlite, &core.url(), &[]);
    let before = msg("G-MIG-BEFORE", 10, "");
    let before_reply = call(&relay.addr, &before);
    assert_code(&before_reply, "0000");
    // (The test's own connection, opened before the move, reads the SQLite rows after it.)
    let rows = sqlite.rows();
    migrate(&sqlite, &pg).expect_code(EXIT_SETTLED);
    assert_eq!(pg.rows(), rows);

    // Its writes are refused now: a new GUID gets E905 and never reaches the core, so no
    // claim exists that the PostgreSQL ledger does not know.
    let after = msg("G-MIG-AFTER", 20, "");
    assert_eq!(call(&relay.addr, &after), short(&after, &E_LEDGER));
    assert_eq!(core.bookings("G-MIG-AFTER"), 0);
    // Reads still work: a resend of what it booked gets the stored reply (as PostgreSQL's
    // ledger would give it).
    assert_eq!(call(&relay.addr, &before), before_reply);
    drop(relay);

    let masked: ledger::Db = pg.arg().parse().expect("a PostgreSQL URL");
    let moved_to = format!("was moved to {masked} by migrate at ");
    let db = sqlite.arg();
    let url = core.url();
    let settle = ["settle", "G-MIG-BEFORE", "--not-booked", "--reason", "r"];
    let runs: Vec<(&str, Vec<&str>)> = vec![
        (
            "relay",
            vec!["--db", db, "--core", &url, "--listen", "127.0.0.1:0"],
        ),
        (
            "resolve",
            vec!["--db", db, "--core", &url, "--min-age", "60"],
        ),
        (
            "reprocess",
            vec!["--db", db, "--core", &url, "--max-attempts", "3"],
        ),
        (
            "reprocess",
            vec![
                "--db",
                db,
                "--core",
                &url,
                "--max-attempts",
                "3",
                "--parallel",
                "4",
            ],
        ),
        ("purge", vec!["--db", db, "--days", "30"]),
        ("inspect", vec!["--db", db]),
        (
            "inspect",
            [&["--db", db][..], &["show", "G-MIG-BEFORE"]].concat(),
        ),
        ("inspect", [&["--db", db][..], &settle].concat()),
        ("migrate", vec!["--from", db, "--to", pg.arg()]),
    ];
    for (name, args) in runs {
        let r = tool(name, &args);
        r.expect_code(EXIT_FATAL);
        let err = r.stderr();
        assert_eq!(err.lines().count(), 1, "{name} {args:?}: {err}");
        assert!(err.contains(&moved_to), "{name} {args:?}: {err}");
    }
    assert_eq!(sqlite.rows(), rows, "nothing written to the SQLite ledger");
    assert_eq!(pg.rows(), rows, "nor to PostgreSQL");
    assert_eq!(core.total_bookings(), 1);
}

/// Each row's channel (CONTRACT §8) moves with it, and a GUID already in PostgreSQL that
/// differs only in its channel is not "already present": it is reported and left.
#[test]
fn migrate_copies_each_rows_channel_and_refuses_a_row_there_with_another() {
    skip_if_unavailable!();
    let sqlite = TempLedger::new();
    RowSpec::failed(&msg("G-MIG-OWNED", 10, "")).insert(&sqlite);
    RowSpec::failed(&msg("G-MIG-OTHER", 20, "")).insert(&sqlite);
    RowSpec::bare("G-MIG-NONE", State::Unknown).insert(&sqlite);
    RowSpec::failed(&msg("G-MIG-CLASH2", 30, "")).insert(&sqlite);
    by_hand(
        &sqlite,
        "UPDATE tx SET channel = 'bank-a' WHERE guid IN ('G-MIG-OWNED', 'G-MIG-OTHER')",
        "",
    );
    // A clash keeps the SQLite ledger from being sealed, so that it can be run again.
    let pg = temp_ledger();
    RowSpec::failed(&msg("G-MIG-CLASH2", 31, "other")).insert(&pg);

    let r = migrate(&sqlite, &pg);
    r.expect_code(EXIT_LEFT);
    assert_counts(&r.json(), &[("read", 4), ("copied", 3), ("refused", 1)]);
    let channel = |g| pg.row(g).unwrap().channel;
    assert_eq!(channel("G-MIG-OWNED").as_deref(), Some("bank-a"));
    assert_eq!(channel("G-MIG-NONE"), None);

    by_hand(
        &pg,
        "",
        "UPDATE tx SET channel = 'bank-b' WHERE guid = 'G-MIG-OTHER'",
    );
    let r = migrate(&sqlite, &pg);
    r.expect_code(EXIT_LEFT);
    let j = r.json();
    assert_counts(&j, &[("copied", 0), ("present", 2), ("refused", 2)]);
    let mut refused: Vec<String> = serde_json::from_value(j["refused_guids"].clone()).unwrap();
    refused.sort();
    assert_eq!(refused, ["G-MIG-CLASH2", "G-MIG-OTHER"]);
    assert_eq!(
        channel("G-MIG-OTHER").as_deref(),
        Some("bank-b"),
        "not overwritten"
    );
}
