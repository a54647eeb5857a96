//! An online backup of an SQLite ledger while the relay writes it (`backup`): one snapshot
//! by `VACUUM INTO` into a temporary file beside the target, checked, synced, then moved onto
//! the target; a backup that fails leaves no file behind.
//!
//! `VACUUM INTO` rather than the online backup API: it copies one consistent snapshot under
//! a single read transaction, which in WAL mode does not hold up the relay's writers (their
//! commits go on into the -wal; only checkpoints wait for the snapshot to end). The backup
//! API, stepped so that writers get in between, starts again from page one whenever another
//! connection writes the source between two steps: under steady load it may never finish.
//! `VACUUM INTO` also writes a compact file that needs no -wal beside it.
//!
//! Copying the file (`cp ledger.db`) is no backup: committed claims live in `ledger.db-wal`
//! until a checkpoint moves them into the main file, and a copy of a file being written is
//! torn. A ledger restored from such a copy has forgotten claims, and the channels' resends of
//! those GUIDs are booked again.

use std::collections::BTreeMap;
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags};

use super::access::{self, Denied};
use super::lock::{LedgerLock, LockError};
use super::{BUSY_TIMEOUT, plain_path};

/// What a finished backup holds, as read back from the copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backup {
    /// The file written.
    pub to: PathBuf,
    /// Rows of `tx` by state (`DONE`, `UNKNOWN`, …), only states that have rows.
    pub rows: BTreeMap<String, u64>,
    /// The copy's size.
    pub bytes: u64,
    /// The instant the snapshot was taken (RFC 3339, UTC, to the second, rounded down), as
    /// sealed in the copy (`backup_seal`).
    pub snapshot_at: String,
}

impl Backup {
    /// Every row of `tx` in the copy.
    pub fn total(&self) -> u64 {
        self.rows.values().sum()
    }
}

/// Why a backup was not made. No file was left behind (the target, if it was there, is as
/// it was).
#[derive(Debug)]
pub enum BackupError {
    /// The ledger is not there (a backup never creates one).
    Missing(PathBuf),
    /// `--db` was an SQLite URI, not a path.
    NotAPath(String),
    /// The path is not a ledger (a directory, or a file with no `tx` table).
    NotALedger(PathBuf),
    /// The target exists, and replacing it was not asked for.
    Exists(PathBuf),
    /// The target has a `-wal` or `-shm` beside it: a ledger, which only `restore` replaces.
    TargetIsALedger(PathBuf),
    /// The target is the ledger itself, or one of its -wal, -shm or -journal files.
    IsTheLedger(PathBuf),
    /// The target's lock (`lock`) was not had: a ledger in use (a relay or tool holds it),
    /// or the lock file could not be used.
    TargetLock(LockError),
    /// The ledger is there but this process's user may not read it (or reach it).
    Denied(Box<Denied>),
    /// A file operation failed.
    Io {
        what: &'static str,
        path: PathBuf,
        source: io::Error,
    },
    /// A statement on the ledger or the copy failed.
    Sql {
        what: &'static str,
        source: rusqlite::Error,
    },
    /// The copy did not pass its checks.
    Check(String),
}

impl fmt::Display for BackupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BackupError::Missing(p) => {
                write!(f, "no ledger at {} (nothing to back up)", p.display())
            }
            BackupError::NotAPath(s) => write!(f, "{s} is an SQLite URI; give the ledger's path"),
            BackupError::NotALedger(p) => {
                write!(
                    f,
                    "{} is not a ledger (not a file with a tx table)",
                    p.display()
                )
            }
            BackupError::Exists(p) => write!(
                f,
                "{} exists; give --force to replace it (or another --to)",
                p.display()
            ),
            BackupError::TargetIsALedger(p) => write!(
                f,
                "{} is a ledger (it has a -wal or -shm beside it), not a backup: a backup \
                 copied over a ledger forgets every claim since its snapshot; put a backup in \
                 place with `restore --from BACKUP --db {}`",
                p.display(),
                p.display()
            ),
            BackupError::IsTheLedger(p) => {
                write!(
                    f,
                    "{} is the ledger's own file; back up to another file",
                    p.display()
                )
            }
            BackupError::TargetLock(e @ LockError::Held { .. }) => write!(
                f,
                "not replacing --to: {e}; a backup never replaces a ledger in use, even with \
                 --force (nothing written)"
            ),
            BackupError::TargetLock(e) => write!(f, "cannot lock --to: {e}"),
            BackupError::Denied(d) => d.fmt(f),
            BackupError::Io { what, path, source } => {
                write!(f, "cannot {what} {}: {source}", path.display())
            }
            BackupError::Sql { what, source } => write!(f, "{what}: {source}"),
            BackupError::Check(why) => write!(f, "the copy failed its check: {why}"),
        }
    }
}

impl std::error::Error for BackupError {}

type Result<T> = std::result::Result<T, BackupError>;

/// Backs up the ledger at `ledger` into `to`: a snapshot written to `.NAME.tmp-PID` beside
/// `to` (mode 0600), checked (`integrity_check`, no -wal needed, rows counted), synced and
/// then moved onto `to` — replacing it only if `replace`, else refusing an existing `to`, even
/// one that appeared while the copy was made. Never writes the ledger. A `to` that is a ledger
/// in use is refused, `replace` or not: `to`'s exclusive lock (`lock`) is held from before
/// the copy until it is in place, so that no relay or tool starts on the old file meanwhile.
pub fn backup(ledger: &Path, to: &Path, replace: bool) -> Result<Backup> {
    let ledger =
        plain_path(ledger).map_err(|_| BackupError::NotAPath(ledger.display().to_string()))?;
    match fs::metadata(ledger) {
        Ok(m) if m.is_file() => {}
        Ok(_) => return Err(BackupError::NotALedger(ledger.to_path_buf())),
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
            return Err(access::reach(ledger).map_or_else(
                || BackupError::Io {
                    what: "look up",
                    path: ledger.to_path_buf(),
                    source: e,
                },
                |d| BackupError::Denied(Box::new(d)),
            ));
        }
        Err(_) => return Err(BackupError::Missing(ledger.to_path_buf())),
    }
    // SQLite would say only "unable to open database file".
    if let Some(denied) = access::readable(ledger) {
        return Err(BackupError::Denied(Box::new(denied)));
    }
    refuse_ledger_files(ledger, to)?;
    if to.is_dir() {
        return Err(BackupError::Io {
            what: "write to",
            path: to.to_path_buf(),
            source: io::Error::new(io::ErrorKind::IsADirectory, "a directory; name a file"),
        });
    }
    // Dropped after `temp` (declared later): held over the final rename.
    let _target = lock_target(to)?;
    if !replace && to.symlink_metadata().is_ok() {
        return Err(BackupError::Exists(to.to_path_buf()));
    }
    refuse_a_ledger_target(to)?;
    let temp = Temp::create(to)?;
    let snapshot_at = snapshot(ledger, &temp.0)?;
    let rows = check(&temp.0, &snapshot_at)?;
    let bytes = sync(&temp.0)?;
    temp.finish(to, replace)?;
    Ok(Backup {
        to: to.to_path_buf(),
        rows,
        bytes,
        snapshot_at,
    })
}

/// Refuses a `--to` with a `-wal` or `-shm` beside it: that is a ledger (one no process holds
/// right now), not a backup. A snapshot renamed onto it would meet the old ledger's WAL, which
/// SQLite replays into whatever file has the name (a torn ledger), and the copy would forget
/// every claim since the snapshot: putting a backup in place is `restore`'s work, which keeps
/// the ledger it replaces and marks the new one recovering.
fn refuse_a_ledger_target(to: &Path) -> Result<()> {
    for suffix in ["-wal", "-shm"] {
        let mut companion = to.as_os_str().to_owned();
        companion.push(suffix);
        if Path::new(&companion).symlink_metadata().is_ok() {
            return Err(BackupError::TargetIsALedger(to.to_path_buf()));
        }
    }
    Ok(())
}

/// Refuses a target that is the ledger or one of its companion files: moving a snapshot
/// there would cut the relay's committed rows off from it.
fn refuse_ledger_files(ledger: &Path, to: &Path) -> Result<()> {
    let io_err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| BackupError::Io {
            what: "resolve",
            path,
            source,
        }
    };
    let ledger = fs::canonicalize(ledger).map_err(io_err(ledger))?;
    let (Some(dir), Some(name)) = (to.parent(), to.file_name()) else {
        return Err(BackupError::Io {
            what: "write to",
            path: to.to_path_buf(),
            source: io::Error::new(io::ErrorKind::InvalidInput, "not a file name"),
        });
    };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    // A directory that is not there: the temporary file's creation says so.
    let Ok(dir) = fs::canonicalize(dir) else {
        return Ok(());
    };
    let target = dir.join(name);
    let target = fs::canonicalize(&target).unwrap_or(target);
    let ledger_files = ["", "-wal", "-shm", "-journal"].map(|suffix| {
        let mut p = ledger.clone().into_os_string();
        p.push(suffix);
        PathBuf::from(p)
    });
    if ledger_files.contains(&target) {
        return Err(BackupError::IsTheLedger(to.to_path_buf()));
    }
    Ok(())
}

/// `to`'s exclusive lock: refused while a relay or tool uses the file there as a ledger. A
/// target that is no ledger gets a lock file only for the backup's length (an exclusive
/// holder removes the lock file it made). None for a folder that is not there (the temporary
/// file's creation says so) or a symlink to nothing (the rename replaces the link itself).
fn lock_target(to: &Path) -> Result<Option<LedgerLock>> {
    let dangling = to.symlink_metadata().is_ok() && fs::metadata(to).is_err();
    if dangling || !access::folder_of(to).is_dir() {
        return Ok(None);
    }
    LedgerLock::exclusive(to)
        .map(Some)
        .map_err(BackupError::TargetLock)
}

/// The snapshot: `VACUUM INTO` the (empty) temporary file, from a read-only connection; the
/// instant it was taken. That instant is read just before the snapshot's read transaction
/// starts, and rounded down: the copy holds everything committed by then (and perhaps a
/// little more), so a recovery window counted from it can only be too wide, never too narrow.
fn snapshot(ledger: &Path, temp: &Path) -> Result<String> {
    let sql = |what| move |source| BackupError::Sql { what, source };
    let conn = Connection::open_with_flags(
        ledger,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(sql("open the ledger"))?;
    conn.busy_timeout(BUSY_TIMEOUT)
        .map_err(sql("open the ledger"))?;
    let tables: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'tx'",
            [],
            |r| r.get(0),
        )
        .map_err(sql("read the ledger"))?;
    if tables != 1 {
        return Err(BackupError::NotALedger(ledger.to_path_buf()));
    }
    let into = temp.to_str().ok_or_else(|| BackupError::Io {
        what: "name",
        path: temp.to_path_buf(),
        source: io::Error::new(io::ErrorKind::InvalidInput, "not UTF-8"),
    })?;
    let snapshot_at = crate::recovery::utc_second(time::OffsetDateTime::now_utc());
    conn.execute("VACUUM INTO ?1", [into])
        .map_err(sql("copy the ledger (VACUUM INTO)"))?;
    Ok(snapshot_at)
}

/// Seals the copy as a backup taken at `snapshot_at` (`backup_seal`), then checks it on its
/// own: `integrity_check` ok, a rollback journal (no -wal to carry along: a copy left in WAL
/// mode is switched to DELETE), and its rows by state.
fn check(copy: &Path, snapshot_at: &str) -> Result<BTreeMap<String, u64>> {
    let sql = |what| move |source| BackupError::Sql { what, source };
    let conn = Connection::open_with_flags(
        copy,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(sql("open the copy"))?;
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .map_err(sql("read the copy's journal mode"))?;
    if mode.eq_ignore_ascii_case("wal") {
        let mode: String = conn
            .query_row("PRAGMA journal_mode=DELETE", [], |r| r.get(0))
            .map_err(sql("set the copy's journal mode"))?;
        if !mode.eq_ignore_ascii_case("delete") {
            return Err(BackupError::Check(format!(
                "journal_mode is {mode}, not delete"
            )));
        }
    }
    super::backup_seal::seal(&conn, snapshot_at).map_err(sql("seal the copy as a backup"))?;
    let mut stmt = conn
        .prepare("PRAGMA integrity_check")
        .map_err(sql("check the copy"))?;
    let problems: Vec<String> = stmt
        .query_map([], |r| r.get(0))
        .and_then(|rows| rows.collect())
        .map_err(sql("check the copy"))?;
    if problems != ["ok"] {
        return Err(BackupError::Check(format!(
            "integrity_check: {}",
            problems.join("; ")
        )));
    }
    let mut stmt = conn
        .prepare("SELECT state, count(*) FROM tx GROUP BY state ORDER BY state")
        .map_err(sql("count the copy's rows"))?;
    let rows = stmt
        .query_map([], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)? as u64))
        })
        .and_then(|rows| rows.collect())
        .map_err(sql("count the copy's rows"))?;
    Ok(rows)
}

/// Flushes the copy to disk; its size.
fn sync(copy: &Path) -> Result<u64> {
    let io_err = |what| {
        move |source| BackupError::Io {
            what,
            path: copy.to_path_buf(),
            source,
        }
    };
    let file = File::open(copy).map_err(io_err("open"))?;
    file.sync_all().map_err(io_err("sync"))?;
    Ok(file.metadata().map_err(io_err("stat"))?.len())
}

/// The temporary file beside the target, removed unless [`Temp::finish`] moved it there.
struct Temp(PathBuf);

impl Temp {
    /// `.NAME.tmp-PID` beside `to`, new and empty, readable by its owner only.
    fn create(to: &Path) -> Result<Temp> {
        let mut name = std::ffi::OsString::from(".");
        name.push(to.file_name().unwrap_or_default());
        name.push(format!(".tmp-{}", std::process::id()));
        let path = to.with_file_name(name);
        let mut open = OpenOptions::new();
        open.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            open.mode(0o600);
        }
        open.open(&path).map_err(|source| BackupError::Io {
            what: "create",
            path: path.clone(),
            source,
        })?;
        Ok(Temp(path))
    }

    /// Moves the copy onto `to`: a rename if `replace`, else a hard link that fails if `to`
    /// appeared meanwhile (then the temporary name goes); then syncs the directory.
    fn finish(self, to: &Path, replace: bool) -> Result<()> {
        let io_err = |what| {
            move |source| BackupError::Io {
                what,
                path: to.to_path_buf(),
                source,
            }
        };
        if replace {
            fs::rename(&self.0, to).map_err(io_err("rename the copy onto"))?;
        } else {
            fs::hard_link(&self.0, to).map_err(|e| match e.kind() {
                io::ErrorKind::AlreadyExists => BackupError::Exists(to.to_path_buf()),
                _ => io_err("link the copy to")(e),
            })?;
            // `to` holds the copy now; the temporary name goes in Drop.
        }
        let dir = match to.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(io_err("sync the directory of"))?;
        Ok(())
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        // Gone already after a rename; otherwise the copy (or its name beside a link) goes.
        let _ = fs::remove_file(&self.0);
        let mut journal = self.0.clone().into_os_string();
        journal.push("-journal");
        let _ = fs::remove_file(journal);
    }
}
