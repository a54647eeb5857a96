//! Why a backup was not made (`backup::BackupError`), each as the one line the tool prints.

use std::fmt;
use std::io;
use std::path::PathBuf;

use super::space::NoRoom;
use crate::sqlite::access::Denied;
use crate::sqlite::lock::LockError;

/// Why a backup was not made. No file was left behind (the target, if it was there, is as
/// it was), except after [`BackupError::Prune`], where the backup was made.
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
    /// Copies were to be kept by count, but the target's name holds no time to tell its
    /// series by (`keep`).
    NoSeries(PathBuf),
    /// Writing the copy would leave less than the floor free on the target's filesystem
    /// (`space`): nothing was written.
    NoRoom(Box<NoRoom>),
    /// The backup was made, but an older copy of its series could not be deleted.
    Prune {
        made: PathBuf,
        path: PathBuf,
        source: io::Error,
    },
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
            BackupError::NoSeries(p) => write!(
                f,
                "{} holds no time in its name (at least {} digits, as in \
                 ledger-YYYYMMDD-HHMM.db), so its older copies cannot be told by name to keep \
                 the newest",
                p.display(),
                super::keep::MIN_DIGITS
            ),
            BackupError::NoRoom(refusal) => refusal.fmt(f),
            BackupError::Prune { made, path, source } => write!(
                f,
                "the backup {} was made, but the older copy {} could not be deleted \
                 (--keep): {source}",
                made.display(),
                path.display()
            ),
            BackupError::Io { what, path, source } => {
                write!(f, "cannot {what} {}: {source}", path.display())
            }
            BackupError::Sql { what, source } => write!(f, "{what}: {source}"),
            BackupError::Check(why) => write!(f, "the copy failed its check: {why}"),
        }
    }
}

/// Written by hand, not derived with `thiserror`, which would make the fields named `source`
/// (`Prune`, `Io` and `Sql`) the error's `source()`: the message says the cause already, and
/// the tool prints this error with anyhow's `{:#}` (`cli::exit_code`), which would say it
/// a second time. So no `source()`, as for `LedgerError`.
impl std::error::Error for BackupError {}
