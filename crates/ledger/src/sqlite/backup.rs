//! An online backup of an SQLite ledger while the relay writes it (`backup`): one snapshot
//! by `VACUUM INTO` into a temporary file beside the target, checked, synced, then moved onto
//! the target; a backup that fails leaves no file behind. Before it writes, a backup makes
//! sure the copy leaves room on its disk (`space`, `--min-free`), and it may keep a series of
//! copies to a count (`keep`, `--keep`).
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

#[path = "backup_error.rs"]
mod error;
#[path = "backup_keep.rs"]
pub mod keep;
#[path = "backup_space.rs"]
pub mod space;

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags};

pub use self::error::BackupError;
use self::keep::Series;
use self::space::{MinFree, NoRoom};
use super::access;
use super::lock::LedgerLock;
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
    /// The older copies of the target's series deleted ([`Options::keep`]), oldest first.
    pub deleted: Vec<PathBuf>,
}

impl Backup {
    /// Every row of `tx` in the copy.
    pub fn total(&self) -> u64 {
        self.rows.values().sum()
    }
}

/// How a backup is made, besides from where and to where.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Replace an existing target (`--force`).
    pub replace: bool,
    /// Keep this many copies of the target's series in its folder, the new one included
    /// (`--keep`, at least 1; `keep`): the older ones are deleted once it is in place. Those
    /// past this many are deleted before the copy is written too, so that a lowered count
    /// frees room even while the disk is too full for a backup; a backup that then fails
    /// still leaves this many.
    pub keep: Option<usize>,
    /// The room the copy must leave free on the target's filesystem (`--min-free`; `space`).
    pub min_free: MinFree,
}

type Result<T> = std::result::Result<T, BackupError>;

/// Backs up the ledger at `ledger` into `to`: a snapshot written to `.NAME.tmp-PID` beside
/// `to` (mode 0600), checked (`integrity_check`, no -wal needed, rows counted), synced and
/// then moved onto `to` — replacing it only if `replace`, else refusing an existing `to`, even
/// one that appeared while the copy was made. Never writes the ledger. A `to` that is a ledger
/// in use is refused, `replace` or not: `to`'s exclusive lock (`lock`) is held from before
/// the copy until it is in place, so that no relay or tool starts on the old file meanwhile.
/// Refused with nothing written if the copy would leave less than the default floor free
/// ([`MinFree::DEFAULT`]); keeps every older copy: [`backup_with`] for more.
pub fn backup(ledger: &Path, to: &Path, replace: bool) -> Result<Backup> {
    let options = Options {
        replace,
        ..Options::default()
    };
    backup_with(ledger, to, &options)
}

/// [`backup`] as `options` say: refused, before anything is written, if the copy (estimated
/// as the ledger's pages) would leave less than `min_free` free on the target's filesystem;
/// with `keep`, the older copies of the target's series deleted but the newest.
pub fn backup_with(ledger: &Path, to: &Path, options: &Options) -> Result<Backup> {
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
    let series = match options.keep {
        Some(keep) => Some((
            Series::of(to).ok_or_else(|| BackupError::NoSeries(to.to_path_buf()))?,
            keep.max(1),
        )),
        None => None,
    };
    // Dropped after `temp` (declared later): held over the final rename.
    let _target = lock_target(to)?;
    if !options.replace && to.symlink_metadata().is_ok() {
        return Err(BackupError::Exists(to.to_path_buf()));
    }
    refuse_a_ledger_target(to)?;
    let source = open_ledger(ledger)?;
    let estimate = estimate(&source)?;
    let mut deleted = Vec::new();
    if let Some((series, keep)) = &series {
        deleted = prune(series, to, ledger, *keep, false)?;
    }
    enough_room(ledger, to, estimate, options.min_free)?;
    let temp = Temp::create(to)?;
    let snapshot_at = snapshot(&source, &temp.0)?;
    // The copy's checks need no ledger: its connection goes as soon as the snapshot is taken.
    drop(source);
    let rows = check(&temp.0, &snapshot_at)?;
    let bytes = sync(&temp.0)?;
    temp.finish(to, options.replace)?;
    if let Some((series, keep)) = &series {
        deleted.extend(prune(series, to, ledger, keep - 1, true)?);
    }
    Ok(Backup {
        to: to.to_path_buf(),
        rows,
        bytes,
        snapshot_at,
        deleted,
    })
}

/// Deletes the copies of `series` but the `keep` newest, `to` and `ledger` left alone; `made`:
/// the backup at `to` is in place (a failure then says so).
fn prune(
    series: &Series,
    to: &Path,
    ledger: &Path,
    keep: usize,
    made: bool,
) -> Result<Vec<PathBuf>> {
    series.prune(to, ledger, keep).map_err(|(path, source)| {
        if made {
            BackupError::Prune {
                made: to.to_path_buf(),
                path,
                source,
            }
        } else {
            BackupError::Io {
                what: "delete the older copy",
                path,
                source,
            }
        }
    })
}

/// Refuses a copy of `estimate` bytes that would leave less than `min_free` free on the
/// filesystem of `to`'s folder. A folder that is not there passes: the temporary file's
/// creation says so, as it always has.
fn enough_room(ledger: &Path, to: &Path, estimate: u64, min_free: MinFree) -> Result<()> {
    let folder = access::folder_of(to);
    let room = match space::room(&folder) {
        Ok(room) => room,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(BackupError::Io {
                what: "measure the free space of",
                path: folder,
                source,
            });
        }
    };
    if space::fits(room, estimate, min_free) {
        return Ok(());
    }
    let device = |p: &Path| {
        use std::os::unix::fs::MetadataExt;
        fs::metadata(p).map(|m| m.dev()).ok()
    };
    let ledgers_own = device(ledger).is_some() && device(ledger) == device(&folder);
    Err(BackupError::NoRoom(Box::new(NoRoom {
        folder,
        room,
        estimate,
        min_free,
        ledgers_own,
    })))
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

/// A read-only connection to the ledger, refused if it has no `tx` table.
fn open_ledger(ledger: &Path) -> Result<Connection> {
    let sql = |what| move |cause| BackupError::Sql { what, cause };
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
    Ok(conn)
}

/// The copy's size at most: the ledger's pages (its -wal's included, as SQLite reads them),
/// which `VACUUM INTO` copies without the free ones.
fn estimate(conn: &Connection) -> Result<u64> {
    let sql = |what| move |cause| BackupError::Sql { what, cause };
    let pages: i64 = conn
        .query_row("PRAGMA page_count", [], |r| r.get(0))
        .map_err(sql("read the ledger's size"))?;
    let page_size: i64 = conn
        .query_row("PRAGMA page_size", [], |r| r.get(0))
        .map_err(sql("read the ledger's size"))?;
    Ok((pages.max(0) as u64).saturating_mul(page_size.max(0) as u64))
}

/// The snapshot: `VACUUM INTO` the (empty) temporary file, from the read-only connection; the
/// instant it was taken. That instant is read just before the snapshot's read transaction
/// starts, and rounded down: the copy holds everything committed by then (and perhaps a
/// little more), so a recovery window counted from it can only be too wide, never too narrow.
fn snapshot(conn: &Connection, temp: &Path) -> Result<String> {
    let into = temp.to_str().ok_or_else(|| BackupError::Io {
        what: "name",
        path: temp.to_path_buf(),
        source: io::Error::new(io::ErrorKind::InvalidInput, "not UTF-8"),
    })?;
    let snapshot_at = crate::recovery::utc_second(time::OffsetDateTime::now_utc());
    conn.execute("VACUUM INTO ?1", [into])
        .map_err(|cause| BackupError::Sql {
            what: "copy the ledger (VACUUM INTO)",
            cause,
        })?;
    Ok(snapshot_at)
}

/// Seals the copy as a backup taken at `snapshot_at` (`backup_seal`), then checks it on its
/// own: `integrity_check` ok, a rollback journal (no -wal to carry along: a copy left in WAL
/// mode is switched to DELETE), and its rows by state.
fn check(copy: &Path, snapshot_at: &str) -> Result<BTreeMap<String, u64>> {
    let sql = |what| move |cause| BackupError::Sql { what, cause };
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
    /// appeared meanwhile, then the temporary name removed; then syncs the directory, so that
    /// after a power cut the folder holds the copy under `to` and nothing else of it (the
    /// power-loss run found the temporary name coming back when it went after the sync: a
    /// second name of the copy, which a ledger lock refuses and nothing cleans up).
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
            // `to` holds the copy now; its temporary name goes before the directory's sync
            // (if it cannot, neither name stays: a backup that fails leaves no file).
            if let Err(e) = fs::remove_file(&self.0) {
                let _ = fs::remove_file(to);
                return Err(io_err("remove the temporary name beside")(e));
            }
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
