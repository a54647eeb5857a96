//! The files of a restore: the temporary file the new ledger is built in, the old ledger's
//! WAL folded into it, its second name (`.before-restore-STAMP`), and the atomic swap.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags};

use super::{RestoreError, Result};
use crate::sqlite::BUSY_TIMEOUT;

/// The temporary file beside the ledger (`.NAME.restore-PID`), removed with whatever SQLite
/// and the lock made beside it unless [`swap`] renamed it onto the ledger.
pub(super) struct Temp(PathBuf);

impl Temp {
    /// New and empty beside `file` (the ledger's canonical path, so that the rename stays on
    /// one file system), readable by its owner only.
    pub(super) fn beside(file: &Path) -> Result<Temp> {
        let mut name = std::ffi::OsString::from(".");
        name.push(file.file_name().unwrap_or_default());
        name.push(format!(".restore-{}", std::process::id()));
        let path = file.with_file_name(name);
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .map_err(io_err("create", &path))?;
        Ok(Temp(path))
    }

    pub(super) fn path(&self) -> &Path {
        &self.0
    }

    /// Gives the new ledger the owner, group and mode of the ledger at `file` (a new ledger
    /// keeps 0600: it holds account numbers and amounts), then syncs it. Refused when this
    /// user may not give it that owner: a ledger the relay's user could not open would stop
    /// the relay, and the old one would be gone from its path.
    pub(super) fn finish_like(&self, file: &Path) -> Result<()> {
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&self.0)
            .map_err(io_err("open", &self.0))?;
        let mode = match fs::metadata(file) {
            Ok(old) => {
                std::os::unix::fs::fchown(&f, Some(old.uid()), Some(old.gid())).map_err(io_err(
                    "give the new ledger the owner and group of the ledger at",
                    file,
                ))?;
                old.mode() & 0o7777
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => 0o600,
            Err(e) => return Err(io_err("look up", file)(e)),
        };
        f.set_permissions(fs::Permissions::from_mode(mode))
            .map_err(io_err("set the mode of", &self.0))?;
        f.sync_all().map_err(io_err("sync", &self.0))
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        // After the swap only the companions can be left (SQLite removes -wal and -shm when
        // the last connection closes; the lock file of the shared lock `Ledger::open` took
        // stays, since a shared holder never removes it).
        for suffix in ["", "-wal", "-shm", "-journal", ".relay.lock"] {
            let _ = fs::remove_file(suffixed(&self.0, suffix));
        }
    }
}

/// `YYYYMMDDThhmmssZ`, now (UTC).
pub(super) fn stamp_now() -> String {
    let format = time::macros::format_description!("[year][month][day]T[hour][minute][second]Z");
    time::OffsetDateTime::now_utc()
        .format(&format)
        .unwrap_or_default()
}

/// Where the ledger at `file` is kept: `FILE.before-restore-STAMP`.
pub(super) fn before_restore(file: &Path, stamp: &str) -> PathBuf {
    suffixed(file, &format!(".before-restore-{stamp}"))
}

/// Folds the WAL of the ledger at `file` into it and closes it, so that the file kept holds
/// every committed claim and no -wal is left to be replayed into the new ledger. Reading
/// first rolls back a hot rollback journal, if one is there, while the file is still the
/// ledger's.
pub(super) fn fold_wal(file: &Path) -> Result<()> {
    let sql = |what| {
        move |cause| RestoreError::Sql {
            what,
            path: file.to_path_buf(),
            cause,
        }
    };
    {
        let conn = Connection::open_with_flags(
            file,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(sql("open the ledger it replaces,"))?;
        conn.busy_timeout(BUSY_TIMEOUT)
            .map_err(sql("open the ledger it replaces,"))?;
        conn.query_row("SELECT count(*) FROM sqlite_master", [], |_| Ok(()))
            .map_err(sql("read the ledger it replaces,"))?;
        let busy: i64 = conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get(0))
            .map_err(sql("fold the WAL into the ledger it replaces,"))?;
        if busy != 0 {
            return Err(RestoreError::OldWal {
                path: file.to_path_buf(),
                why: "the checkpoint was blocked".into(),
            });
        }
    }
    wal_is_empty(file)
}

/// Refuses to go on while the -wal beside `file` holds anything: every commit must be in
/// the file itself before it is kept or moved (a -wal left behind would be lost, or replayed
/// into a file it does not belong to).
pub(super) fn wal_is_empty(file: &Path) -> Result<()> {
    let wal = suffixed(file, "-wal");
    match fs::metadata(&wal) {
        Ok(m) if m.len() > 0 => Err(RestoreError::OldWal {
            path: file.to_path_buf(),
            why: format!("{} still holds {} bytes", wal.display(), m.len()),
        }),
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io_err("look up", &wal)(e)),
    }
}

/// Puts the new ledger in `temp` at `file`: the ledger there first gets its second name
/// `kept` (a hard link: until the rename, `file` still names it), then the rename, then the
/// old ledger's empty companions go and the folder is synced.
pub(super) fn swap(temp: Temp, file: &Path, kept: Option<&Path>) -> Result<()> {
    if let Some(kept) = kept {
        fs::hard_link(file, kept).map_err(|e| match e.kind() {
            io::ErrorKind::AlreadyExists => RestoreError::Exists(kept.to_path_buf()),
            _ => io_err("keep the ledger it replaces as", kept)(e),
        })?;
    }
    if let Err(e) = fs::rename(temp.path(), file) {
        // The old ledger stays at `file`, with one name again.
        if let Some(kept) = kept {
            let _ = fs::remove_file(kept);
        }
        return Err(io_err("rename the new ledger onto", file)(e));
    }
    for suffix in ["-wal", "-shm", "-journal"] {
        let _ = fs::remove_file(suffixed(file, suffix));
    }
    let dir = file.parent().unwrap_or(Path::new("."));
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err("sync the folder", dir))?;
    drop(temp);
    Ok(())
}

fn suffixed(path: &Path, suffix: &str) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(suffix);
    PathBuf::from(p)
}

fn io_err(what: &'static str, path: &Path) -> impl FnOnce(io::Error) -> RestoreError {
    let path = path.to_path_buf();
    move |source| RestoreError::Io { what, path, source }
}
