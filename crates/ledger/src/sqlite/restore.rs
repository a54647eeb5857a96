//! Putting an SQLite ledger back from a backup (`restore`, contract §11), so that the ledger
//! put back can never book a GUID twice: it is marked **recovering** since the backup's
//! snapshot (minus a margin), and the core's journal, when given, enters what the core booked
//! since then.
//!
//! The order is what makes a crash harmless. Nothing at the ledger's path changes until the
//! new ledger is complete: the backup is copied (`VACUUM INTO`) into a temporary file beside
//! the ledger, unsealed, brought up to this build's schema, marked recovering, given the
//! journal's bookings, given the owner, group and mode of the ledger it replaces, and synced.
//! Only then is the old ledger (its WAL folded into it first) kept under a second name, a
//! hard link, and the temporary file renamed onto the ledger's path in one atomic step. A
//! crash before the rename leaves the old ledger (at worst with that second name too, which
//! every tool then refuses until one is removed: never a double booking); after it, the new
//! one. No -wal of the old ledger survives beside the new one: SQLite would replay it into a
//! file it does not belong to.
//!
//! The whole restore holds the ledger's exclusive lock (`lock`): it is refused while a relay
//! or tool uses the ledger, and none can start on it until the new ledger is in place.

mod files;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rusqlite::{Connection, OpenFlags};
use serde::Serialize;

use super::lock::{self, LedgerLock, LockError};
use super::{BUSY_TIMEOUT, Ledger, SCHEMA_VERSION, backup_seal, plain_path};
use crate::error::LedgerError;
use crate::recovery::journal::{self, EnteredBy};
pub use crate::recovery::journal::{JournalApplied, JournalBooking, LeftGuid};
use crate::recovery::{SNAPSHOT_MARGIN_SECS, minus_secs, normalize};

/// What to restore, from where, and what else is known.
#[derive(Debug, Clone)]
pub struct Restore<'a> {
    /// The backup to put in place (a file `backup` wrote).
    pub from: &'a Path,
    /// The ledger to replace (it need not exist).
    pub db: &'a Path,
    /// Recovering since this instant (RFC 3339) instead of the backup's snapshot minus the
    /// margin; needed for a backup that records no snapshot. The earlier of the two is taken
    /// when both are known: a later one could only forget claims.
    pub since: Option<&'a str>,
    /// The core's bookings (its journal, contract §10), as read by the caller.
    pub bookings: &'a [JournalBooking],
    /// Who the recovery mark, the ledger's events and the rows' history name
    /// (`restore (by alice)`).
    pub who: &'a str,
}

/// What a finished restore did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Restored {
    /// The backup put in place.
    pub from: PathBuf,
    /// The ledger's path as given, and the file it names (symlinks resolved).
    pub db: PathBuf,
    pub file: PathBuf,
    /// The backup's snapshot instant (RFC 3339 UTC), if it records one.
    pub snapshot_at: Option<String>,
    /// Rows of `tx` in the restored ledger by state, journal included.
    pub rows: BTreeMap<String, u64>,
    /// Since when the restored ledger is recovering (RFC 3339 UTC).
    pub recovering_since: String,
    /// Where the ledger it replaced is kept; `None` when there was none.
    pub before_restore: Option<PathBuf>,
    /// What the journal changed.
    pub journal: JournalApplied,
}

impl Restored {
    /// Every row of `tx` in the restored ledger.
    pub fn total(&self) -> u64 {
        self.rows.values().sum()
    }
}

/// Why a restore was refused or failed. The ledger at `db` is as it was in every case (a
/// temporary file beside it is removed).
///
/// The tool prints it with anyhow's `{:#}` (`cli::exit_code`): the message, then each
/// `source()` after ": ". The ledger's and the system's errors are the `source()` of
/// `Ledger` and `Io`, not in their message; SQLite's error is in `Sql`'s message instead,
/// because rusqlite's error returns SQLite's code as its own `source()`, a second wording of
/// the same cause. A `LockError` says its cause itself and is no `source()` here either.
#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    /// `--db` or `--from` is an SQLite URI, not a path.
    #[error("{0} is an SQLite URI; give a file's path")]
    NotAPath(String),
    /// `--db` cannot name a ledger file (a directory, a missing folder, …).
    #[error(transparent)]
    BadDb(LedgerError),
    /// The ledger's lock was not had: something uses it (or it has two names, …).
    #[error("{0}; nothing restored")]
    Lock(LockError),
    /// The backup is not there, or is not a file.
    #[error("no backup file at {}", .0.display())]
    NoBackup(PathBuf),
    /// The backup is the ledger itself.
    #[error("{} is the ledger itself; restore from a backup file", .0.display())]
    SameFile(PathBuf),
    /// The backup cannot be read as an SQLite file, or fails its integrity check.
    #[error(
        "backup {} fails SQLite's integrity check ({why}); nothing restored",
        .path.display()
    )]
    Corrupt { path: PathBuf, why: String },
    /// The backup has no `tx` table.
    #[error("backup {} is not a ledger (no tx table)", .0.display())]
    NotALedger(PathBuf),
    /// The backup's schema is newer than this build knows.
    #[error(
        "backup {}: its schema is version {found}, newer than this build knows \
         ({SCHEMA_VERSION}); restore it with the tools of the version that wrote it",
        .path.display()
    )]
    NewerSchema { path: PathBuf, found: i64 },
    /// The backup records no snapshot instant, and none was given.
    #[error(
        "backup {} records no snapshot time (not written by backup); give --since RFC3339, \
         an instant no later than the copy was taken",
        .0.display()
    )]
    NoSnapshot(PathBuf),
    /// `since` is not RFC 3339 with an offset.
    #[error("--since {0:?} is not an instant in RFC 3339 with an offset")]
    BadSince(String),
    /// Two bookings with the same GUID and core_ref that differ otherwise.
    #[error("{0}; nothing restored")]
    Journal(String),
    /// The name the old ledger would be kept under is taken.
    #[error(
        "{} exists already (a restore in the same second?); nothing restored",
        .0.display()
    )]
    Exists(PathBuf),
    /// The old ledger's WAL could not be folded into it.
    #[error(
        "cannot fold the WAL of the ledger {} into it ({why}); nothing restored",
        .path.display()
    )]
    OldWal { path: PathBuf, why: String },
    /// A step on the new ledger failed.
    #[error("cannot {what}")]
    Ledger {
        what: &'static str,
        source: LedgerError,
    },
    /// A statement on the backup or the old ledger failed.
    #[error("cannot {what} {}: {cause}", .path.display())]
    Sql {
        what: &'static str,
        path: PathBuf,
        cause: rusqlite::Error,
    },
    /// A file operation failed.
    #[error("cannot {what} {}", .path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        source: io::Error,
    },
}

type Result<T> = std::result::Result<T, RestoreError>;

/// Restores `r.from` at `r.db` (see the module's doc), holding the ledger's exclusive lock
/// throughout.
pub fn restore(r: &Restore<'_>) -> Result<Restored> {
    for p in [r.db, r.from] {
        plain_path(p).map_err(|_| RestoreError::NotAPath(p.display().to_string()))?;
    }
    super::check_path(r.db).map_err(RestoreError::BadDb)?;
    let since = match r.since {
        Some(s) => Some(normalize(s).ok_or_else(|| RestoreError::BadSince(s.to_string()))?),
        None => None,
    };
    let bookings = journal::group(r.bookings).map_err(|e| RestoreError::Journal(e.0))?;
    let _lock = LedgerLock::exclusive(r.db).map_err(RestoreError::Lock)?;
    let file = lock::canonical(r.db).map_err(RestoreError::Lock)?;
    let backup = Checked::open(r.from, &file)?;
    let snapshot_at = backup.snapshot_at.clone();
    let from_snapshot = snapshot_at
        .as_deref()
        .and_then(|s| minus_secs(s, SNAPSHOT_MARGIN_SECS));
    // Both known: the earlier. Stored instants have one form, so text order is time order.
    let since = match (since, from_snapshot) {
        (Some(a), Some(b)) => a.min(b),
        (Some(a), None) | (None, Some(a)) => a,
        (None, None) => return Err(RestoreError::NoSnapshot(r.from.to_path_buf())),
    };

    let kept = match std::fs::symlink_metadata(&file) {
        Ok(_) => Some(files::before_restore(&file, &files::stamp_now())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(source) => {
            return Err(RestoreError::Io {
                what: "look up",
                path: file,
                source,
            });
        }
    };
    if let Some(k) = kept.as_deref().filter(|k| k.symlink_metadata().is_ok()) {
        return Err(RestoreError::Exists(k.to_path_buf()));
    }
    let temp = files::Temp::beside(&file)?;
    backup.copy_into(temp.path())?;
    let (rows, recovering_since, applied) =
        build(r, temp.path(), &since, &bookings, &snapshot_at, &kept)?;
    temp.finish_like(&file)?;
    if kept.is_some() {
        files::fold_wal(&file)?;
    }
    files::swap(temp, &file, kept.as_deref())?;
    Ok(Restored {
        from: r.from.to_path_buf(),
        db: r.db.to_path_buf(),
        file,
        snapshot_at,
        rows,
        recovering_since,
        before_restore: kept,
        journal: applied,
    })
}

/// The new ledger in the temporary file `temp`: unsealed, opened as every tool opens a
/// ledger (pragmas, schema brought up to date), marked recovering, the journal applied, the
/// event recorded, and its WAL folded in and closed. Its rows by state, its recovery mark's
/// `since`, and what the journal changed.
fn build(
    r: &Restore<'_>,
    temp: &Path,
    since: &str,
    bookings: &journal::Grouped<'_>,
    snapshot_at: &Option<String>,
    kept: &Option<PathBuf>,
) -> Result<(BTreeMap<String, u64>, String, JournalApplied)> {
    let step = |what| move |source| RestoreError::Ledger { what, source };
    {
        let conn = Connection::open(temp).map_err(sql("open the new ledger", temp))?;
        backup_seal::unseal(&conn).map_err(sql("take the backup's seal off", temp))?;
    }
    let ledger = Ledger::open(temp)
        .map_err(step("open the new ledger"))?
        .acting_as(r.who);
    let snapshot = snapshot_at.as_deref().unwrap_or("unknown");
    let detail = format!(
        "restored from {} (snapshot_at={snapshot})",
        r.from.display()
    );
    let mark = ledger
        .begin_recovery(since, r.who, &detail)
        .map_err(step("mark the new ledger recovering"))?;
    let store = Mutex::new(ledger);
    let by = EnteredBy {
        tool: "restore",
        who: None,
    };
    let applied = journal::apply(&store, bookings, &mark.since, by)
        .map_err(step("enter the journal's bookings"))?;
    let ledger = store.into_inner().unwrap_or_else(|e| e.into_inner());
    let kept = match kept {
        Some(k) => format!("the ledger it replaces kept as {}", k.display()),
        None => "no ledger was there".to_string(),
    };
    let event = format!(
        "{detail} at {}; {kept}; recovering since {}; journal: {} written, {} settled, {} \
         doubles left",
        r.db.display(),
        mark.since,
        applied.written,
        applied.settled,
        applied.doubles.len()
    );
    ledger
        .record_event(r.who, "restored", &event)
        .map_err(step("record the restore in the ledger's events"))?;
    let rows = ledger
        .count_by_state()
        .map_err(step("count the new ledger's rows"))?
        .into_iter()
        .map(|(s, n)| (s.as_str().to_string(), n as u64))
        .collect();
    ledger
        .connection()
        .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .map_err(sql("fold the new ledger's WAL in", temp))?;
    drop(ledger);
    files::wal_is_empty(temp)?;
    Ok((rows, mark.since, applied))
}

/// A backup that passed its checks, open read-only.
struct Checked {
    conn: Connection,
    path: PathBuf,
    snapshot_at: Option<String>,
}

impl Checked {
    /// Opens `from` read-only and checks it: a file other than the ledger (`ledger`, its
    /// canonical path), sound (`integrity_check`), a ledger (a `tx` table), of a schema this
    /// build knows; and reads its snapshot instant from the seal.
    fn open(from: &Path, ledger: &Path) -> Result<Checked> {
        if !from.is_file() {
            return Err(RestoreError::NoBackup(from.to_path_buf()));
        }
        if std::fs::canonicalize(from).is_ok_and(|f| f == ledger) {
            return Err(RestoreError::SameFile(from.to_path_buf()));
        }
        let corrupt = |e: rusqlite::Error| RestoreError::Corrupt {
            path: from.to_path_buf(),
            why: e.to_string(),
        };
        let conn = Connection::open_with_flags(
            from,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(sql("open the backup", from))?;
        conn.busy_timeout(BUSY_TIMEOUT)
            .map_err(sql("open the backup", from))?;
        let mut stmt = conn.prepare("PRAGMA integrity_check").map_err(corrupt)?;
        let problems: Vec<String> = stmt
            .query_map([], |r| r.get(0))
            .and_then(|rows| rows.collect())
            .map_err(corrupt)?;
        drop(stmt);
        if problems != ["ok"] {
            return Err(RestoreError::Corrupt {
                path: from.to_path_buf(),
                why: problems.join("; "),
            });
        }
        let tables: i64 = conn
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'tx'",
                [],
                |r| r.get(0),
            )
            .map_err(corrupt)?;
        if tables != 1 {
            return Err(RestoreError::NotALedger(from.to_path_buf()));
        }
        let found: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(corrupt)?;
        if found > SCHEMA_VERSION {
            return Err(RestoreError::NewerSchema {
                path: from.to_path_buf(),
                found,
            });
        }
        let snapshot_at = backup_seal::snapshot_at(&conn).map_err(corrupt)?;
        Ok(Checked {
            conn,
            path: from.to_path_buf(),
            snapshot_at,
        })
    }

    /// Copies the backup into the (empty) temporary file `temp`: one consistent snapshot,
    /// its -wal included if it has one.
    fn copy_into(self, temp: &Path) -> Result<()> {
        let into = temp.to_str().ok_or_else(|| RestoreError::Io {
            what: "name",
            path: temp.to_path_buf(),
            source: io::Error::new(io::ErrorKind::InvalidInput, "not UTF-8"),
        })?;
        self.conn
            .execute("VACUUM INTO ?1", [into])
            .map_err(sql("copy the backup (VACUUM INTO)", &self.path))?;
        Ok(())
    }
}

/// Maps an SQLite error on `path` while doing `what`.
fn sql(what: &'static str, path: &Path) -> impl FnOnce(rusqlite::Error) -> RestoreError {
    let path = path.to_path_buf();
    move |cause| RestoreError::Sql { what, path, cause }
}
