//! A ledger `migrate` moved into PostgreSQL: the seal it leaves in the SQLite file (the table
//! `ledger_moved`, saying where the ledger went, and triggers that refuse every later write of
//! `tx` and `relay_health`), and the check every tool makes when it opens a file.

use std::path::Path;

use rusqlite::{Connection, OptionalExtension};

use crate::error::LedgerError;

/// The seal, written in the transaction that held the lock for the copy.
const SEAL: &str = "\
    CREATE TABLE IF NOT EXISTS ledger_moved (to_url_masked TEXT NOT NULL, at TEXT NOT NULL); \
    CREATE TRIGGER IF NOT EXISTS ledger_moved_no_insert BEFORE INSERT ON tx BEGIN \
        SELECT RAISE(ABORT, 'this ledger was moved by migrate (see table ledger_moved)'); END; \
    CREATE TRIGGER IF NOT EXISTS ledger_moved_no_update BEFORE UPDATE ON tx BEGIN \
        SELECT RAISE(ABORT, 'this ledger was moved by migrate (see table ledger_moved)'); END; \
    CREATE TRIGGER IF NOT EXISTS ledger_moved_no_delete BEFORE DELETE ON tx BEGIN \
        SELECT RAISE(ABORT, 'this ledger was moved by migrate (see table ledger_moved)'); END; \
    CREATE TRIGGER IF NOT EXISTS ledger_moved_no_health BEFORE INSERT ON relay_health BEGIN \
        SELECT RAISE(ABORT, 'this ledger was moved by migrate (see table ledger_moved)'); END; \
    CREATE TRIGGER IF NOT EXISTS ledger_moved_no_health_update BEFORE UPDATE ON relay_health \
    BEGIN SELECT RAISE(ABORT, 'this ledger was moved by migrate (see table ledger_moved)'); END;";
const MARK: &str = "INSERT INTO ledger_moved (to_url_masked, at) VALUES (?1, datetime('now'))";
const MOVED: &str = "SELECT to_url_masked, at FROM ledger_moved ORDER BY at DESC LIMIT 1";
const HAS_MARK: &str =
    "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'ledger_moved'";

/// `Err(LedgerError::Moved)` if `migrate` moved the ledger behind `conn` elsewhere.
pub(crate) fn refuse_if_moved(conn: &Connection, path: &Path) -> Result<(), LedgerError> {
    let open_err = |source| LedgerError::Open {
        path: path.to_path_buf(),
        cause: source,
    };
    let marked: i64 = conn
        .query_row(HAS_MARK, [], |r| r.get(0))
        .map_err(open_err)?;
    if marked == 0 {
        return Ok(());
    }
    let moved: Option<(String, String)> = conn
        .query_row(MOVED, [], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()
        .map_err(open_err)?;
    match moved {
        None => Ok(()),
        Some((to, at)) => Err(LedgerError::Moved {
            path: path.to_path_buf(),
            to,
            at,
        }),
    }
}

/// Writes the seal saying the ledger went to `to` (a URL, its password masked), in the
/// caller's transaction.
pub(crate) fn seal(conn: &Connection, to: &str) -> rusqlite::Result<()> {
    conn.execute_batch(SEAL)?;
    conn.execute(MARK, [to])?;
    Ok(())
}
