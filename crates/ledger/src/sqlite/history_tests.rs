//! Schema version 7: `tx_history` without `AUTOINCREMENT` and without its index on `at`. A
//! version-6 file (rebuilt by the migration steps, as a version-6 build made it) is upgraded
//! in place with its history kept, and every kind of change leaves the same history as it did
//! under version 6.

use super::*;

/// A ledger file as a version-6 build left it.
fn v6_file(p: &Path) -> Connection {
    let c = Connection::open(p).unwrap();
    c.execute_batch("PRAGMA journal_mode=WAL").unwrap();
    migrations::create_at_version(&c, 6).unwrap();
    c
}

/// Changes of every kind, on a raw connection: as our tools make them (an actor row named,
/// with and without a reason, two stacked: the newest names) and by hand (no actor: 'sql').
const CHANGES: &str = "
    INSERT INTO tx_actor (who) VALUES ('relay');
    INSERT INTO tx (guid, tx_code, state, request, attempts, channel)
        VALUES ('A', 'TRNF', 'SENT', x'71', 1, 'atm-1') ON CONFLICT (guid) DO NOTHING;
    INSERT INTO tx (guid, tx_code, state, request, attempts)
        VALUES ('A', 'TRNF', 'SENT', x'72', 1) ON CONFLICT (guid) DO NOTHING;
    UPDATE tx SET state = 'UNKNOWN', rsp_code = 'E901' WHERE guid = 'A' AND state = 'SENT';
    DELETE FROM tx_actor;
    INSERT INTO tx_actor (who, reason) VALUES ('resolve', 'the core booked it');
    INSERT INTO tx_actor (who, reason) VALUES ('operator:ann', 'ticket 42');
    UPDATE tx SET state = 'DONE', rsp_code = '0000' WHERE guid = 'A' AND state = 'UNKNOWN';
    DELETE FROM tx_actor WHERE who = 'operator:ann';
    INSERT INTO tx (guid, state, attempts) VALUES ('B', 'FAILED', 2);
    DELETE FROM tx_actor;
    INSERT INTO tx (guid, state, attempts, rsp_code) VALUES ('H', 'FAILED', 1, 'E902');
    UPDATE tx SET attempts = 7 WHERE guid = 'H';
    INSERT OR REPLACE INTO tx (guid, state, attempts) VALUES ('H', 'DONE', 3);
    REPLACE INTO tx (guid, state, attempts) VALUES ('NEWREPL', 'SENT', 1);
    INSERT INTO tx_actor (who) VALUES ('purge');
    DELETE FROM tx WHERE guid = 'B';
    INSERT OR REPLACE INTO tx (guid, state, attempts, channel) VALUES ('A', 'FAILED', 4, 'x');
    DELETE FROM tx_actor;
    DELETE FROM tx WHERE guid = 'H';";

type HistoryLine = (
    i64,
    String,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<i64>,
    String,
    Option<String>,
    Option<String>,
);

/// Every history row but its time, in id order.
fn history_lines(c: &Connection) -> Vec<HistoryLine> {
    let mut s = c
        .prepare(
            "SELECT id, guid, from_state, to_state, rsp_code, attempts, who, reason, channel \
             FROM tx_history ORDER BY id",
        )
        .unwrap();
    s.query_map([], |r| {
        Ok((
            r.get(0)?,
            r.get(1)?,
            r.get(2)?,
            r.get(3)?,
            r.get(4)?,
            r.get(5)?,
            r.get(6)?,
            r.get(7)?,
            r.get(8)?,
        ))
    })
    .unwrap()
    .collect::<rusqlite::Result<_>>()
    .unwrap()
}

fn names(c: &Connection, kind: &str, table: &str) -> Vec<String> {
    let mut s = c
        .prepare(
            "SELECT name FROM sqlite_master WHERE type = ?1 AND tbl_name = ?2 \
             AND name NOT LIKE 'sqlite_%' ORDER BY name",
        )
        .unwrap();
    s.query_map([kind, table], |r| r.get(0))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap()
}

fn history_declaration(c: &Connection) -> String {
    c.query_row(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'tx_history'",
        [],
        |r| r.get(0),
    )
    .unwrap()
}

fn sequence_rows(c: &Connection) -> i64 {
    c.query_row(
        "SELECT count(*) FROM sqlite_sequence WHERE name = 'tx_history'",
        [],
        |r| r.get(0),
    )
    .unwrap_or(0)
}

/// The table, its indexes and its triggers as version 7 wants them.
fn assert_version_7_history(c: &Connection) {
    let version: i64 = c
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, super::SCHEMA_VERSION);
    let decl = history_declaration(c);
    assert!(!decl.to_uppercase().contains("AUTOINCREMENT"), "{decl}");
    assert_eq!(sequence_rows(c), 0, "no sqlite_sequence row for tx_history");
    assert_eq!(names(c, "index", "tx_history"), ["tx_history_guid"]);
    assert_eq!(
        names(c, "trigger", "tx_history"),
        ["tx_history_is_never_updated"]
    );
    assert_eq!(
        names(c, "trigger", "tx"),
        [
            "tx_history_on_delete",
            "tx_history_on_insert",
            "tx_history_on_update"
        ]
    );
}

#[test]
fn a_new_ledger_has_the_version_7_history_table() {
    let dir = tempfile::tempdir().unwrap();
    let l = Ledger::open(&dir.path().join("l.db")).unwrap();
    assert!(l.claim_new("G", "TRNF", b"q", None).unwrap());
    assert_version_7_history(l.connection());
    // The queries by GUID have their index.
    for (sql, index) in [
        (
            "SELECT id FROM tx_history WHERE guid = 'G' ORDER BY id",
            "tx_history_guid",
        ),
        (
            "SELECT max(id) FROM tx_history WHERE guid = 'G'",
            "tx_history_guid",
        ),
    ] {
        let plan: Vec<String> = l
            .connection()
            .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
            .unwrap()
            .query_map([], |r| r.get(3))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        assert!(plan.iter().any(|p| p.contains(index)), "{sql}: {plan:?}");
    }
}

/// The history every kind of change leaves is the same under version 7 as under version 6
/// (the time aside): who and why from the newest actor row, 'sql' by hand, the row an
/// INSERT OR REPLACE replaced, nothing for a claim that found its GUID taken.
#[test]
fn every_kind_of_change_leaves_the_history_version_6_left() {
    let dir = tempfile::tempdir().unwrap();
    let old = v6_file(&dir.path().join("v6.db"));
    old.execute_batch(CHANGES).unwrap();
    let new = Connection::open(dir.path().join("v7.db")).unwrap();
    new.execute_batch(SCHEMA).unwrap();
    new.execute_batch(CHANGES).unwrap();
    let want = history_lines(&old);
    assert_eq!(history_lines(&new), want);
    // What that is, so that the comparison compares something.
    let who: Vec<(&str, Option<&str>, Option<&str>, &str)> = want
        .iter()
        .map(|h| (h.1.as_str(), h.2.as_deref(), h.3.as_deref(), h.6.as_str()))
        .collect();
    assert_eq!(
        who,
        [
            ("A", None, Some("SENT"), "relay"),
            ("A", Some("SENT"), Some("UNKNOWN"), "relay"),
            ("A", Some("UNKNOWN"), Some("DONE"), "operator:ann"),
            ("B", None, Some("FAILED"), "resolve"),
            ("H", None, Some("FAILED"), "sql"),
            ("H", Some("FAILED"), Some("FAILED"), "sql"),
            ("H", Some("FAILED"), None, "sql"),
            ("H", None, Some("DONE"), "sql"),
            ("NEWREPL", None, Some("SENT"), "sql"),
            ("B", Some("FAILED"), None, "purge"),
            ("A", Some("DONE"), None, "purge"),
            ("A", None, Some("FAILED"), "purge"),
            ("H", Some("DONE"), None, "sql"),
        ]
    );
    assert_eq!(want[2].7.as_deref(), Some("ticket 42"));
    assert_eq!(want[3].7.as_deref(), Some("the core booked it"));
    assert_eq!(want[4].7, None, "by hand: no reason");
    assert_eq!(want[11].8.as_deref(), Some("x"));
}

/// A version-6 file is upgraded in place at open (from → to logged like every upgrade): its
/// history table rebuilt without AUTOINCREMENT, every row kept with its id and time, the new
/// rows after them, hand-made changes still recorded as 'sql'.
#[test]
fn a_version_6_ledger_is_upgraded_in_place_with_its_history_kept() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("v6.db");
    let (before, times) = {
        let c = v6_file(&p);
        c.execute_batch(CHANGES).unwrap();
        assert!(history_declaration(&c).contains("AUTOINCREMENT"));
        assert_eq!(sequence_rows(&c), 1, "the fixture is the old table");
        let times: Vec<String> = c
            .prepare("SELECT at FROM tx_history ORDER BY id")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        (history_lines(&c), times)
    };
    // inspect reads it as it is, version 6 untouched.
    let ro = Ledger::open_read_only(&p).unwrap();
    assert_eq!(ro.history("A").unwrap().len(), 5);
    drop(ro);

    let l = Ledger::open(&p).unwrap().acting_as("relay");
    let c = l.connection();
    assert_version_7_history(c);
    assert_eq!(history_lines(c), before, "every row kept, with its id");
    let kept: Vec<String> = c
        .prepare("SELECT at FROM tx_history ORDER BY id")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    assert_eq!(kept, times);
    assert_eq!(
        c.query_row("SELECT count(*) FROM tx_actor", [], |r| r.get::<_, i64>(0))
            .unwrap(),
        0
    );

    // New changes come after the old ids; ours are named, a hand-made one is 'sql'.
    let last_old = before.last().unwrap().0;
    assert!(l.claim_new("N", "TRNF", b"q", Some("atm-9")).unwrap());
    c.execute_batch("UPDATE tx SET attempts = 5 WHERE guid = 'N'")
        .unwrap();
    let h = l.history("N").unwrap();
    let seen: Vec<(i64, &str, Option<&str>)> = h
        .iter()
        .map(|r| (r.id, r.who.as_str(), r.channel.as_deref()))
        .collect();
    assert_eq!(
        seen,
        [
            (last_old + 1, "relay", Some("atm-9")),
            (last_old + 2, "sql", Some("atm-9"))
        ]
    );
    // History rows are still never updated.
    assert!(c.execute_batch("UPDATE tx_history SET who = 'x'").is_err());
    drop(l);
    let again = Ledger::open(&p).expect("opened again: nothing left to upgrade");
    assert_version_7_history(again.connection());
    assert_eq!(again.history("N").unwrap().len(), 2);
}

/// A ledger made by hand from an old schema.sql (version 0, the old table) is rebuilt too;
/// one from before tx_history.channel (version 5) gets the column and then the rebuild.
#[test]
fn older_files_with_the_autoincrement_table_are_rebuilt_too() {
    let dir = tempfile::tempdir().unwrap();
    for version in [0, 5] {
        let p = dir.path().join(format!("v{version}.db"));
        {
            let c = v6_file(&p);
            c.execute_batch(CHANGES).unwrap();
            if version == 5 {
                c.execute_batch(
                    "DROP TRIGGER tx_history_on_insert; DROP TRIGGER tx_history_on_update;
                     DROP TRIGGER tx_history_on_delete;
                     ALTER TABLE tx_history DROP COLUMN channel;
                     ALTER TABLE tx DROP COLUMN channel;",
                )
                .unwrap();
            }
            c.execute_batch(&format!("PRAGMA user_version = {version}"))
                .unwrap();
        }
        let l = Ledger::open(&p).unwrap();
        assert_version_7_history(l.connection());
        assert_eq!(l.history("A").unwrap().len(), 5, "version {version}");
    }
}
