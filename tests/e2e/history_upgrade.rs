//! SQLite schema version 7 end to end: a ledger a version-6 build left (its schema rebuilt by
//! the migration steps, `ledger::sqlite::migrations::create_at_version`) is read as it is by
//! `inspect`, and upgraded in place by the first tool that writes, which logs it once: the
//! history table rebuilt without AUTOINCREMENT, every row kept with its id, new changes
//! (ours and hand-made ones) recorded after them.

use rusqlite::Connection;

use crate::inspect::inspect;
use crate::util::*;

/// (id, from_state, to_state, who) of `guid`'s history, read from the file as it is.
fn history(c: &Connection, guid: &str) -> Vec<(i64, Option<String>, Option<String>, String)> {
    c.prepare("SELECT id, from_state, to_state, who FROM tx_history WHERE guid = ?1 ORDER BY id")
        .unwrap()
        .query_map([guid], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap()
}

fn declaration(c: &Connection) -> String {
    c.query_row(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'tx_history'",
        [],
        |r| r.get(0),
    )
    .unwrap()
}

#[test]
fn a_version_6_ledger_is_upgraded_in_place_by_the_first_tool_that_writes() {
    let db = temp_ledger();
    let c = Connection::open(db.path()).unwrap();
    c.execute_batch("PRAGMA journal_mode=WAL").unwrap();
    ledger::sqlite::migrations::create_at_version(&c, 6).unwrap();
    c.execute_batch(
        "INSERT INTO tx_actor (who) VALUES ('relay');
         INSERT INTO tx (guid, tx_code, state, request, attempts, updated_at)
             VALUES ('G-UP-1', 'TRNF', 'SENT', x'71', 1, datetime('now', '-40 days'));
         UPDATE tx SET state = 'DONE', rsp_code = '0000', updated_at = datetime('now', '-40 days')
             WHERE guid = 'G-UP-1';
         DELETE FROM tx_actor;
         INSERT INTO tx (guid, state, attempts) VALUES ('G-UP-2', 'FAILED', 1);",
    )
    .unwrap();
    let before = history(&c, "G-UP-1");
    assert_eq!(before.len(), 2);
    assert!(declaration(&c).contains("AUTOINCREMENT"));
    drop(c);

    // inspect reads it as it is: no upgrade, nothing logged.
    let r = inspect(&db, &["show", "G-UP-1"]);
    r.expect_code(EXIT_SETTLED);
    assert!(!r.stderr().contains("schema upgraded"), "{}", r.stderr());
    let c = Connection::open(db.path()).unwrap();
    let version = |c: &Connection| -> i64 {
        c.query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap()
    };
    assert_eq!(version(&c), 6);

    // purge upgrades it, logs from → to once, and deletes the old DONE row (named purge).
    let r = purge(&db, &["--days", "30"]);
    r.expect_code(EXIT_SETTLED);
    let line = "schema upgraded from version 6 to 9";
    assert_eq!(r.stderr().matches(line).count(), 1, "{}", r.stderr());
    assert_eq!(version(&c), 9);
    let decl = declaration(&c);
    assert!(!decl.contains("AUTOINCREMENT"), "{decl}");
    let seq: i64 = c
        .query_row(
            "SELECT count(*) FROM sqlite_sequence WHERE name = 'tx_history'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(seq, 0);
    let after = history(&c, "G-UP-1");
    assert_eq!(after[..2], before[..], "the old rows kept, with their ids");
    let last_old = history(&c, "G-UP-2")[0].0;
    let purged = &after[2];
    assert!(purged.0 > last_old, "{after:?}");
    assert_eq!(
        (purged.1.as_deref(), purged.2.as_deref(), purged.3.as_str()),
        (Some("DONE"), None, "purge")
    );
    // A change by hand is still caught.
    c.execute_batch("UPDATE tx SET attempts = 2 WHERE guid = 'G-UP-2'")
        .unwrap();
    let h = history(&c, "G-UP-2");
    assert_eq!(
        (h.len(), h[1].3.as_str(), h[1].0 > purged.0),
        (2, "sql", true)
    );
    let r = inspect(&db, &["show", "G-UP-2"]);
    r.expect_code(EXIT_SETTLED);
    assert!(r.stdout().contains("sql"), "{}", r.stdout());

    // Up to date: the next tool logs nothing.
    let r = purge(&db, &["--days", "30"]);
    r.expect_code(EXIT_SETTLED);
    assert!(!r.stderr().contains("schema upgraded"), "{}", r.stderr());
}
