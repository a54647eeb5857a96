//! A backup copy is sealed as one (contract §11): `backup` writes, into the copy only, the
//! table `ledger_backup` with the instant its snapshot was taken, and triggers that refuse
//! every write of `tx` and `relay_health`. A copy put in place of the ledger by hand (`cp
//! backup.db ledger.db`) is therefore refused by every tool that would write it — the relay
//! before `listening on` — with a line naming `restore`, and even a hand-written statement
//! cannot claim a GUID in it. `restore` takes the seal off while it puts the copy in place and
//! marks the ledger recovering since the snapshot (minus a margin).
//!
//! Reading a copy is fine: `inspect`, `reconcile` and `backup` itself open it read-only.

use std::path::Path;

use rusqlite::{Connection, OptionalExtension};

use crate::error::LedgerError;

/// The seal, written by `backup` in the copy (never in a ledger in use).
const SEAL: &str = "\
    CREATE TABLE IF NOT EXISTS ledger_backup (snapshot_at TEXT NOT NULL, taken_at TEXT NOT NULL); \
    CREATE TRIGGER IF NOT EXISTS ledger_backup_no_insert BEFORE INSERT ON tx BEGIN \
        SELECT RAISE(ABORT, 'this file is a backup copy: put it in place with restore'); END; \
    CREATE TRIGGER IF NOT EXISTS ledger_backup_no_update BEFORE UPDATE ON tx BEGIN \
        SELECT RAISE(ABORT, 'this file is a backup copy: put it in place with restore'); END; \
    CREATE TRIGGER IF NOT EXISTS ledger_backup_no_delete BEFORE DELETE ON tx BEGIN \
        SELECT RAISE(ABORT, 'this file is a backup copy: put it in place with restore'); END; \
    CREATE TRIGGER IF NOT EXISTS ledger_backup_no_health BEFORE INSERT ON relay_health BEGIN \
        SELECT RAISE(ABORT, 'this file is a backup copy: put it in place with restore'); END; \
    CREATE TRIGGER IF NOT EXISTS ledger_backup_no_health_update BEFORE UPDATE ON relay_health \
    BEGIN SELECT RAISE(ABORT, 'this file is a backup copy: put it in place with restore'); END;";
const UNSEAL: &str = "\
    DROP TRIGGER IF EXISTS ledger_backup_no_insert; \
    DROP TRIGGER IF EXISTS ledger_backup_no_update; \
    DROP TRIGGER IF EXISTS ledger_backup_no_delete; \
    DROP TRIGGER IF EXISTS ledger_backup_no_health; \
    DROP TRIGGER IF EXISTS ledger_backup_no_health_update; \
    DROP TABLE IF EXISTS ledger_backup;";
const HAS_SEAL: &str =
    "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'ledger_backup'";
const SNAPSHOT: &str = "SELECT min(snapshot_at) FROM ledger_backup";

/// Seals the copy behind `conn` as a backup whose snapshot was taken at `snapshot_at` (RFC
/// 3339 UTC). A copy of a copy keeps the older snapshot: what it holds is no newer than that.
pub fn seal(conn: &Connection, snapshot_at: &str) -> rusqlite::Result<()> {
    conn.execute_batch(SEAL)?;
    conn.execute(
        "INSERT INTO ledger_backup (snapshot_at, taken_at) \
         VALUES (?1, strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))",
        [snapshot_at],
    )?;
    Ok(())
}

/// The snapshot instant a sealed copy records (the oldest, for a copy of a copy); `None` for a
/// file that is not a backup copy.
pub fn snapshot_at(conn: &Connection) -> rusqlite::Result<Option<String>> {
    let sealed: i64 = conn.query_row(HAS_SEAL, [], |r| r.get(0))?;
    if sealed == 0 {
        return Ok(None);
    }
    Ok(conn
        .query_row(SNAPSHOT, [], |r| r.get::<_, Option<String>>(0))
        .optional()?
        .flatten())
}

/// Takes the seal off, in the caller's transaction (`restore`, on its own temporary copy).
pub fn unseal(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch(UNSEAL)
}

/// `Err(LedgerError::BackupCopy)` if the file behind `conn` is a sealed backup copy: a tool
/// that would write it refuses it.
pub(crate) fn refuse_if_backup(conn: &Connection, path: &Path) -> Result<(), LedgerError> {
    match snapshot_at(conn) {
        Ok(None) => Ok(()),
        Ok(Some(snapshot_at)) => Err(LedgerError::BackupCopy {
            path: path.to_path_buf(),
            snapshot_at,
        }),
        Err(source) => Err(LedgerError::Open {
            path: path.to_path_buf(),
            cause: source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_copy_refuses_every_write_of_tx_and_the_seal_comes_off() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(crate::sqlite::SCHEMA).unwrap();
        conn.execute(
            "INSERT INTO tx (guid, state, updated_at) VALUES ('G1', 'DONE', datetime('now'))",
            [],
        )
        .unwrap();
        assert_eq!(snapshot_at(&conn).unwrap(), None);
        seal(&conn, "2026-12-06T10:00:00Z").unwrap();
        assert_eq!(
            snapshot_at(&conn).unwrap().as_deref(),
            Some("2026-12-06T10:00:00Z")
        );
        for sql in [
            "INSERT INTO tx (guid, state) VALUES ('G2', 'SENT')",
            "UPDATE tx SET state = 'FAILED' WHERE guid = 'G1'",
            "DELETE FROM tx",
            "INSERT INTO relay_health (id, at) VALUES (1, 'x')",
        ] {
            let e = conn.execute(sql, []).unwrap_err().to_string();
            assert!(e.contains("backup copy"), "{sql}: {e}");
        }
        // A copy of a copy keeps the older snapshot.
        seal(&conn, "2026-12-06T11:00:00Z").unwrap();
        assert_eq!(
            snapshot_at(&conn).unwrap().as_deref(),
            Some("2026-12-06T10:00:00Z")
        );
        unseal(&conn).unwrap();
        assert_eq!(snapshot_at(&conn).unwrap(), None);
        conn.execute("INSERT INTO tx (guid, state) VALUES ('G2', 'SENT')", [])
            .unwrap();
    }
}
