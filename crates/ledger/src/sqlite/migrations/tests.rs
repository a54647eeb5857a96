use super::*;
use crate::sqlite::Ledger;

fn described(conn: &Connection) -> Vec<String> {
    schema_of(conn).unwrap()
}

fn version(conn: &Connection) -> i64 {
    conn.query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap()
}

/// schema.sql as a new file gets it.
fn current() -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    described(
        Ledger::open(&dir.path().join("new.db"))
            .unwrap()
            .connection(),
    )
}

#[test]
fn the_steps_from_an_empty_file_make_schema_sql() {
    let c = Connection::open_in_memory().unwrap();
    create_at_version(&c, LATEST).unwrap();
    assert_eq!(version(&c), LATEST);
    assert_eq!(described(&c), current());
}

/// A file of each older version, with a row in it, is brought up to date by the next tool that
/// opens it: the same schema as a new file's, its row kept, and a change recorded in the history
/// with the channel.
#[test]
fn a_file_of_every_older_version_is_upgraded_to_the_same_schema() {
    let dir = tempfile::tempdir().unwrap();
    let want = current();
    for from in 0..LATEST {
        let p = dir.path().join(format!("v{from}.db"));
        {
            let c = Connection::open(&p).unwrap();
            create_at_version(&c, from).unwrap();
            assert_eq!(version(&c), from);
            if from >= 1 {
                c.execute_batch(
                    "INSERT INTO tx (guid, tx_code, state, request, attempts)
                     VALUES ('OLD', 'TRNF', 'FAILED', x'71', 1)",
                )
                .unwrap();
            }
        }
        let l = Ledger::open(&p).unwrap();
        assert_eq!(version(l.connection()), LATEST, "from version {from}");
        assert_eq!(described(l.connection()), want, "from version {from}");
        if from >= 1 {
            l.connection()
                .execute_batch(
                    "UPDATE tx SET state = 'SENT', attempts = 2, channel = 'atm-1'
                     WHERE guid = 'OLD' AND state = 'FAILED'",
                )
                .unwrap();
            let history = l.history("OLD").unwrap();
            let last = history.last().unwrap();
            assert_eq!(
                last.channel.as_deref(),
                Some("atm-1"),
                "from version {from}"
            );
            // Version 1 had no history: the row's insert is not in it.
            assert_eq!(history.len(), if from == 1 { 1 } else { 2 }, "from {from}");
        }
    }
}

/// A file made by hand from the schema of any version, its `user_version` left at 0, gets every
/// step over the tables it has, and ends the same.
#[test]
fn a_file_made_by_hand_from_any_version_ends_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let want = current();
    for made in 1..=LATEST {
        let p = dir.path().join(format!("hand{made}.db"));
        {
            let c = Connection::open(&p).unwrap();
            create_at_version(&c, made).unwrap();
            c.execute_batch("PRAGMA user_version = 0").unwrap();
        }
        let l = Ledger::open(&p).unwrap();
        assert_eq!(described(l.connection()), want, "made from version {made}");
    }
}

#[test]
#[should_panic(expected = "no schema version 10")]
fn there_is_no_version_past_the_latest() {
    let c = Connection::open_in_memory().unwrap();
    let _ = create_at_version(&c, LATEST + 1);
}
