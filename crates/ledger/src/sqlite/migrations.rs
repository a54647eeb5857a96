//! The SQLite ledger's schema versions, as a list (as cargo's `util/sqlite.rs` keeps its
//! own): `STEPS[v - 1]` takes a file from version `v - 1` to `v`, and `PRAGMA user_version`
//! says how many steps a file has had. A step is frozen once it has shipped: each is the SQL
//! that version added (`migrations/vN.sql`), and Rust where SQL cannot say it. So any old
//! schema can be rebuilt ([`create_at_version`]), for the tests of upgrades, from the same
//! list that upgrades a file.
//!
//! A file older than the tools gets its missing steps and then schema.sql (harmless when
//! applied twice, contract §5), in one write transaction; a new file gets schema.sql alone. A
//! test holds the steps from an empty file equal to schema.sql. Every step is harmless when run
//! twice as well, so a file made by hand from some schema.sql (version 0, tables already
//! there) gets every step and ends the same.

use std::path::Path;

use rusqlite::Connection;

use super::{LedgerError, Result, SCHEMA, history_table};

/// One part of a step.
enum Part {
    /// A script, harmless when run twice.
    Sql(&'static str),
    /// What SQL cannot say harmlessly (`ALTER TABLE` has no `IF NOT EXISTS`; a table's
    /// `AUTOINCREMENT` cannot be dropped but by a rebuild); it looks before it changes.
    Run(fn(&Connection) -> rusqlite::Result<()>),
}
use Part::{Run, Sql};

/// The history triggers of version 6 (they record the channel); version 7 runs them again
/// after its rebuild of `tx_history`, which drops them.
const V6_TRIGGERS: &str = include_str!("migrations/v6.sql");

/// Version by version, what the tools added to the schema.
const STEPS: [&[Part]; 9] = [
    &[Sql(include_str!("migrations/v1.sql"))],
    &[Sql(include_str!("migrations/v2.sql"))],
    &[Sql(include_str!("migrations/v3.sql"))],
    &[Sql(include_str!("migrations/v4.sql"))],
    &[Sql(include_str!("migrations/v5.sql"))],
    &[Run(add_missing_columns), Sql(V6_TRIGGERS)],
    &[
        Run(rebuild_history_table),
        Sql(include_str!("migrations/v7.sql")),
        Sql(V6_TRIGGERS),
    ],
    &[Sql(include_str!("migrations/v8.sql"))],
    &[Sql(include_str!("migrations/v9.sql"))],
];

/// The schema version of these tools: the number of steps.
pub const LATEST: i64 = STEPS.len() as i64;

/// Brings the file's schema up to date when its `user_version` is below [`LATEST`], and logs
/// the upgrade (from → to); a file a newer build wrote is refused. Inside one `BEGIN
/// IMMEDIATE`, where the version is asked again: another tool may have upgraded meanwhile.
pub(super) fn migrate(conn: &Connection, path: &Path) -> Result<()> {
    let open_err = |source| LedgerError::Open {
        path: path.to_path_buf(),
        cause: source,
    };
    if refuse_newer(conn, path)? >= LATEST {
        return Ok(());
    }
    conn.execute_batch("BEGIN IMMEDIATE").map_err(open_err)?;
    let applied = refuse_newer(conn, path).and_then(|from| {
        if from >= LATEST {
            conn.execute_batch("COMMIT").map_err(open_err)?;
            return Ok(());
        }
        // Version 0 with no `tx` table: a new file, created rather than upgraded.
        let created = from == 0 && !has_table(conn, "tx").map_err(open_err)?;
        let steps = if created {
            Ok(())
        } else {
            run_steps(conn, from..LATEST)
        };
        steps
            .and_then(|()| {
                conn.execute_batch(&format!(
                    "{SCHEMA}; PRAGMA user_version = {LATEST}; COMMIT;"
                ))
            })
            .map_err(open_err)?;
        if !created {
            log::info!(
                "ledger {}: schema upgraded from version {from} to {LATEST}",
                path.display()
            );
        }
        Ok(())
    });
    applied.inspect_err(|_| {
        let _ = conn.execute_batch("ROLLBACK");
    })
}

/// Gives an empty file the schema that version `version` of the tools made (0: none), as it
/// was: any old ledger, for a test of its upgrade. Not for a ledger in use.
///
/// # Panics
/// If `version` is not one of `0..=LATEST`.
pub fn create_at_version(conn: &Connection, version: i64) -> rusqlite::Result<()> {
    assert!(
        (0..=LATEST).contains(&version),
        "no schema version {version}"
    );
    conn.execute_batch("BEGIN")?;
    run_steps(conn, 0..version)
        .and_then(|()| conn.execute_batch(&format!("PRAGMA user_version = {version}; COMMIT")))
        .inspect_err(|_| {
            let _ = conn.execute_batch("ROLLBACK");
        })
}

/// A file's schema, to compare with another's: every object (tables, indexes, triggers) as
/// its kind, name and SQL with the comments, the quotes and the white space taken out
/// (`ALTER TABLE … ADD COLUMN` and a table renamed into place store the same table as other
/// text than schema.sql's), by kind and name. SQLite's own tables are left out: a file that
/// once had `AUTOINCREMENT` keeps an empty `sqlite_sequence`, which cannot be dropped.
pub fn schema_of(conn: &Connection) -> rusqlite::Result<Vec<String>> {
    let mut s = conn.prepare(
        "SELECT type, name, sql FROM sqlite_master \
         WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' ORDER BY type, name",
    )?;
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
    })?
    .collect()
}

/// Runs the steps to versions `from + 1 ..= to` (`versions` is `from..to`), in order.
fn run_steps(conn: &Connection, versions: std::ops::Range<i64>) -> rusqlite::Result<()> {
    for step in &STEPS[versions.start as usize..versions.end as usize] {
        for part in *step {
            match part {
                Sql(script) => conn.execute_batch(script)?,
                Run(f) => f(conn)?,
            }
        }
    }
    Ok(())
}

/// The file's schema version (`PRAGMA user_version`), refused if a newer build wrote it.
pub(super) fn refuse_newer(conn: &Connection, path: &Path) -> Result<i64> {
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(|source| LedgerError::Open {
            path: path.to_path_buf(),
            cause: source,
        })?;
    if version > LATEST {
        return Err(LedgerError::NewerSchema {
            ledger: path.display().to_string(),
            found: version,
            known: LATEST,
        });
    }
    Ok(version)
}

/// A file opened read-only, as it is, may be older than the columns we read: temporary
/// views of the same name (they shadow the tables for unqualified names, and live in the
/// connection's own temp schema, never in the file) show each missing column as NULL.
pub(super) fn show_missing_columns(conn: &Connection) -> rusqlite::Result<()> {
    for_each_missing_column(conn, |table, column, _| {
        format!("CREATE TEMP VIEW {table} AS SELECT *, NULL AS {column} FROM main.{table}")
    })
}

/// The columns a later schema version (6) added to a table an earlier one created.
const ADDED_COLUMNS: [(&str, &str, &str); 2] =
    [("tx", "channel", "TEXT"), ("tx_history", "channel", "TEXT")];

/// Version 6: each of `ADDED_COLUMNS` a table lacks, by `ALTER TABLE`.
fn add_missing_columns(conn: &Connection) -> rusqlite::Result<()> {
    for_each_missing_column(conn, |table, column, decl| {
        format!("ALTER TABLE {table} ADD COLUMN {column} {decl}")
    })
}

/// Version 7: `tx_history` rebuilt without `AUTOINCREMENT`, if it has it.
fn rebuild_history_table(conn: &Connection) -> rusqlite::Result<()> {
    history_table::drop_autoincrement(conn).map(drop)
}

/// Runs the statement `sql` makes for each of `ADDED_COLUMNS` that a table of this file has
/// not got (a table the file has not got at all is left to the schema).
fn for_each_missing_column(
    conn: &Connection,
    sql: impl Fn(&str, &str, &str) -> String,
) -> rusqlite::Result<()> {
    for (table, column, decl) in ADDED_COLUMNS {
        if has_table(conn, table)? && !has_column(conn, table, column)? {
            conn.execute_batch(&sql(table, column, decl))?;
        }
    }
    Ok(())
}

fn has_table(conn: &Connection, table: &str) -> rusqlite::Result<bool> {
    conn.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?1",
        [table],
        |r| r.get::<_, i64>(0),
    )
    .map(|n| n > 0)
}

fn has_column(conn: &Connection, table: &str, column: &str) -> rusqlite::Result<bool> {
    conn.query_row(
        "SELECT count(*) FROM pragma_table_info(?1) WHERE name = ?2",
        [table, column],
        |r| r.get::<_, i64>(0),
    )
    .map(|n| n > 0)
}

#[cfg(test)]
mod tests;
