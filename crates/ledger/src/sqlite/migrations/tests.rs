use super::*;
use crate::sqlite::Ledger;

/// Every object of the file's schema (tables, indexes, triggers), each as its kind, name and
/// SQL with the comments, the quotes and the white space taken out: `ALTER TABLE … ADD COLUMN`
/// and a table renamed into place store the same table as other text than schema.sql's.
/// SQLite's own tables are left out: a file that once had `AUTOINCREMENT` keeps an empty
/// `sqlite_sequence`, which cannot be dropped.
fn described(conn: &Connection) -> Vec<String> {
    let mut s = conn
        .prepare(
            "SELECT type, name, sql FROM sqlite_master \
             WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' ORDER BY type, name",
        )
        .unwrap();
    s.query_map([], |r| {
        let (kind, name, sql): (String, String, String) = (r.get(0)?, r.get(1)?, r.get(2)?);
        let bare: String = sql
            .lines()
            .map(|l| l.split("--").next().unwrap_or(""))
            .collect::<String>()
            .chars()
            .filter(|c| !c.is_whitespace() && *c != '"')
            .collect();
        Ok(format!("{kind} {name}: {bare}"))
    })
    .unwrap()
    .collect::<rusqlite::Result<_>>()
    .unwrap()
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

/// The commit at which each version's schema.sql shipped: the steps' independent reference
/// (the newest version may wait for its commit: `the_steps_from_an_empty_file_make_schema_sql`
/// holds it to schema.sql as it is).
const SHIPPED: [(i64, &str); 9] = [
    (1, "3ca05e4"),
    (2, "d2eb245"),
    (3, "bed0373"),
    (4, "3386092"),
    (5, "1d85d2d"),
    (6, "ca49cd0"),
    (7, "604f5dd"),
    (8, "def16f7"),
    (9, "f7a10aa"),
];

/// Each version rebuilt by the steps is the schema.sql that version shipped, as git keeps it
/// (skipped, with a line, where there is no repository to ask: a source tarball, a shallow
/// clone).
#[test]
fn every_version_the_steps_rebuild_is_the_schema_it_shipped() {
    assert!(
        SHIPPED.len() as i64 >= LATEST - 1,
        "a shipped version names its commit here"
    );
    for (version, commit) in SHIPPED {
        let shown = std::process::Command::new("git")
            .args(["show", &format!("{commit}:schema.sql")])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output();
        let Some(shipped) = shown
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8(o.stdout).unwrap())
        else {
            eprintln!("no git history here: the steps are not compared with the shipped schemas");
            return;
        };
        let was = Connection::open_in_memory().unwrap();
        was.execute_batch(&shipped).unwrap();
        let rebuilt = Connection::open_in_memory().unwrap();
        create_at_version(&rebuilt, version).unwrap();
        assert_eq!(described(&rebuilt), described(&was), "version {version}");
    }
}
