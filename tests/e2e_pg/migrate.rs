//! `migrate --from SQLITE --to postgres://…`: a ledger written by the relay on SQLite moves
//! into PostgreSQL row for row and byte for byte, `updated_at` included; running it again
//! copies nothing; a GUID already in PostgreSQL with other content is reported and left;
//! and a relay on the PostgreSQL ledger then replays what the SQLite relay booked.

use ledger::wire::{E_GUID_REUSED, E_UNKNOWN};

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
    let pg = temp_ledger();

    let r = migrate(&sqlite, &pg);
    r.expect_code(EXIT_SETTLED);
    assert_counts(
        &r.json(),
        &[("read", 5), ("copied", 5), ("present", 0), ("refused", 0)],
    );
    let rows = sqlite.rows();
    assert_eq!(rows.len(), 5);
    assert_eq!(pg.rows(), rows, "every row as it was, updated_at included");

    // Again: nothing copied, nothing changed, exit 0.
    let r = migrate(&sqlite, &pg);
    r.expect_code(EXIT_SETTLED);
    assert_counts(
        &r.json(),
        &[("read", 5), ("copied", 0), ("present", 5), ("refused", 0)],
    );
    assert_eq!(pg.rows(), rows);

    // A GUID already in PostgreSQL with other content (booked there meanwhile, say) is
    // reported and left; a new one beside it is copied.
    let clash = msg("G-MIG-CLASH", 60, "");
    let late = msg("G-MIG-LATE", 70, "");
    {
        let relay = start_relay(&sqlite, &core.url(), &[]);
        assert_code(&call(&relay.addr, &clash), "0000");
        assert_code(&call(&relay.addr, &late), "0000");
    }
    RowSpec::failed(&msg("G-MIG-CLASH", 61, "other"))
        .age(HOUR)
        .insert(&pg);
    let clash_there = pg.row("G-MIG-CLASH").unwrap();
    let r = migrate(&sqlite, &pg);
    r.expect_code(EXIT_LEFT);
    let j = r.json();
    assert_counts(
        &j,
        &[("read", 7), ("copied", 1), ("present", 5), ("refused", 1)],
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
    assert_eq!(pg.row("G-MIG-LATE"), sqlite.row("G-MIG-LATE"));

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
