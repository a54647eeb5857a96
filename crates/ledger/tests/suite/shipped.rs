//! Each schema version the migration steps rebuild (`create_at_version`) is the schema file
//! git holds at the commit that shipped it, on SQLite and on PostgreSQL: the steps' reference
//! apart from themselves. Skipped, with a line, where there is no repository to ask (a source
//! tarball, a shallow clone). The newest version may wait for its commit: the migration tests
//! hold it to the schema file as it is.

use ledger::{postgres, sqlite};

use crate::pg_migrations::{connect, described};

/// The commit at which each SQLite version's schema.sql shipped.
const SQLITE: [(i64, &str); 9] = [
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

/// The commit at which each PostgreSQL version's schema.postgres.sql shipped.
const POSTGRES: [(i32, &str); 6] = [
    (1, "3386092"),
    (2, "d814f4b"),
    (3, "ca49cd0"),
    (4, "bf3d9aa"),
    (5, "def16f7"),
    (6, "f7a10aa"),
];

/// `file` as git holds it at `commit`, or `None` (said once) without the history.
fn shipped(commit: &str, file: &str) -> Option<String> {
    let shown = std::process::Command::new("git")
        .args(["show", &format!("{commit}:{file}")])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output();
    let text = shown
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8(o.stdout).expect("a schema file is text"));
    if text.is_none() {
        static SAID: std::sync::Once = std::sync::Once::new();
        SAID.call_once(|| {
            eprintln!("no git history here: the steps are not compared with the shipped schemas")
        });
    }
    text
}

#[test]
fn every_sqlite_version_the_steps_rebuild_is_the_schema_it_shipped() {
    assert!(SQLITE.len() as i64 >= sqlite::migrations::LATEST - 1);
    for (version, commit) in SQLITE {
        let Some(text) = shipped(commit, "schema.sql") else {
            return;
        };
        let was = rusqlite::Connection::open_in_memory().unwrap();
        was.execute_batch(&text).unwrap();
        let rebuilt = rusqlite::Connection::open_in_memory().unwrap();
        sqlite::migrations::create_at_version(&rebuilt, version).unwrap();
        let schema = |c| sqlite::migrations::schema_of(c).unwrap();
        assert_eq!(schema(&rebuilt), schema(&was), "version {version}");
    }
}

#[test]
fn every_postgres_version_the_steps_rebuild_is_the_schema_it_shipped() {
    let Some(server) = testkit::pg::shared() else {
        return testkit::pg::did_not_run();
    };
    assert!(POSTGRES.len() as i32 >= postgres::SCHEMA_VERSION - 1);
    for (version, commit) in POSTGRES {
        let Some(text) = shipped(commit, "schema.postgres.sql") else {
            return;
        };
        let mut was = connect(&server.fresh_db());
        was.batch_execute(&text).unwrap();
        let mut rebuilt = connect(&server.fresh_db());
        postgres::create_at_version(&mut rebuilt, version).unwrap();
        assert_eq!(
            described(&mut rebuilt),
            described(&mut was),
            "version {version}"
        );
    }
}
