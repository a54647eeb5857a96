//! Version 7 of the schema: `tx_history` without `AUTOINCREMENT`. SQLite cannot drop that
//! from a table, so a file made before it gets the table rebuilt in place, inside the
//! upgrade's own write transaction: a new table of the same columns, every row copied with
//! its id, the old table dropped (its indexes, its trigger and its `sqlite_sequence` row
//! with it) and the new one renamed. Version 7's script and version 6's triggers, run next
//! (`migrations`), re-create the indexes and the triggers.

use rusqlite::Connection;

/// The table as schema.sql defines it since version 7 (under another name until renamed).
const NEW_TABLE: &str = "\
    CREATE TABLE tx_history_v7 (
        id         INTEGER PRIMARY KEY,
        guid       TEXT NOT NULL,
        from_state TEXT,
        to_state   TEXT,
        rsp_code   TEXT,
        attempts   INTEGER,
        at         TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
        who        TEXT NOT NULL,
        reason     TEXT,
        channel    TEXT
    )";

const COLUMNS: &str =
    "id, guid, from_state, to_state, rsp_code, attempts, at, who, reason, channel";

/// Rebuilds `tx_history` if it is still declared with `AUTOINCREMENT`; `Ok(true)` if it was.
/// The caller holds the write transaction, and has added the columns older files lack.
pub(super) fn drop_autoincrement(conn: &Connection) -> rusqlite::Result<bool> {
    let declared: Option<String> = conn
        .query_row(
            "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'tx_history'",
            [],
            |r| r.get(0),
        )
        .map(Some)
        .or_else(|e| match e {
            rusqlite::Error::QueryReturnedNoRows => Ok(None),
            e => Err(e),
        })?;
    if !declared.is_some_and(|sql| sql.to_ascii_uppercase().contains("AUTOINCREMENT")) {
        return Ok(false);
    }
    // The tx triggers name tx_history: they go first (the schema re-creates them), or the
    // RENAME would find them naming a table that is not there.
    conn.execute_batch(&format!(
        "DROP TRIGGER IF EXISTS tx_history_on_insert;
         DROP TRIGGER IF EXISTS tx_history_on_update;
         DROP TRIGGER IF EXISTS tx_history_on_delete;
         {NEW_TABLE};
         INSERT INTO tx_history_v7 ({COLUMNS}) SELECT {COLUMNS} FROM tx_history ORDER BY id;
         DROP TABLE tx_history;
         ALTER TABLE tx_history_v7 RENAME TO tx_history;"
    ))?;
    // DROP TABLE takes the table's sqlite_sequence row out; said again, should it not.
    conn.execute_batch("DELETE FROM sqlite_sequence WHERE name = 'tx_history'")?;
    Ok(true)
}
