//! Why a backup was not made (`backup::BackupError`), each as the one line the tool prints.

use std::fmt;
use std::io;
use std::path::PathBuf;

use super::space::NoRoom;
use crate::sqlite::access::Denied;
use crate::sqlite::lock::LockError;

/// Why a backup was not made. No file was left behind (the target, if it was there, is as
/// it was), except after [`BackupError::Prune`], where the backup was made.
///
/// The tool prints it with anyhow's `{:#}` (`cli::exit_code`): the message, then each
/// `source()` after ": ". A system error is the `source()` of `Prune` and `Io`, and not in
/// their message; SQLite's error is in `Sql`'s message instead, not its `source()`, because
/// rusqlite's error returns SQLite's code as its own `source()`, which would add a second
/// wording of the same cause ("…: Error code 26: …") to the line.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    /// The ledger is not there (a backup never creates one).
    #[error("no ledger at {} (nothing to back up)", .0.display())]
    Missing(PathBuf),
    /// `--db` was an SQLite URI, not a path.
    #[error("{0} is an SQLite URI; give the ledger's path")]
    NotAPath(String),
    /// The path is not a ledger (a directory, or a file with no `tx` table).
    #[error("{} is not a ledger (not a file with a tx table)", .0.display())]
    NotALedger(PathBuf),
    /// The target exists, and replacing it was not asked for.
    #[error("{} exists; give --force to replace it (or another --to)", .0.display())]
    Exists(PathBuf),
    /// The target has a `-wal` or `-shm` beside it: a ledger, which only `restore` replaces.
    #[error(
        "{} is a ledger (it has a -wal or -shm beside it), not a backup: a backup copied over \
         a ledger forgets every claim since its snapshot; put a backup in place with \
         `restore --from BACKUP --db {}`",
        .0.display(),
        .0.display()
    )]
    TargetIsALedger(PathBuf),
    /// The target is the ledger itself, or one of its -wal, -shm or -journal files.
    #[error("{} is the ledger's own file; back up to another file", .0.display())]
    IsTheLedger(PathBuf),
    /// The target's lock (`lock`) was not had: a ledger in use (a relay or tool holds it),
    /// or the lock file could not be used. Said in the message, not as `source()`: a
    /// `LockError` returns its own cause as its `source()` and says it too.
    #[error(fmt = target_lock)]
    TargetLock(LockError),
    /// The ledger is there but this process's user may not read it (or reach it).
    #[error("{0}")]
    Denied(Box<Denied>),
    /// Copies were to be kept by count, but the target's name holds no time to tell its
    /// series by (`keep`).
    #[error(
        "{} holds no time in its name (at least {} digits, as in ledger-YYYYMMDD-HHMM.db), so \
         its older copies cannot be told by name to keep the newest",
        .0.display(),
        super::keep::MIN_DIGITS
    )]
    NoSeries(PathBuf),
    /// Writing the copy would leave less than the floor free on the target's filesystem
    /// (`space`): nothing was written.
    #[error("{0}")]
    NoRoom(Box<NoRoom>),
    /// The backup was made, but an older copy of its series could not be deleted.
    #[error(
        "the backup {} was made, but the older copy {} could not be deleted (--keep)",
        .made.display(),
        .path.display()
    )]
    Prune {
        made: PathBuf,
        path: PathBuf,
        source: io::Error,
    },
    /// A file operation failed.
    #[error("cannot {what} {}", .path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        source: io::Error,
    },
    /// A statement on the ledger or the copy failed.
    #[error("{what}: {cause}")]
    Sql {
        what: &'static str,
        cause: rusqlite::Error,
    },
    /// The copy did not pass its checks.
    #[error("the copy failed its check: {0}")]
    Check(String),
}

fn target_lock(e: &LockError, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    match e {
        LockError::Held { .. } => write!(
            f,
            "not replacing --to: {e}; a backup never replaces a ledger in use, even with \
             --force (nothing written)"
        ),
        e => write!(f, "cannot lock --to: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error;

    use super::*;
    use crate::error::LedgerError;
    use crate::sqlite::restore::RestoreError;

    /// The line a tool prints: anyhow's `{:#}` (`cli::exit_code`), the message and each
    /// `source()` after ": ".
    fn one_line(e: impl Error + Send + Sync + 'static) -> String {
        format!("{:#}", anyhow::Error::new(e))
    }

    fn denied() -> io::Error {
        io::Error::from_raw_os_error(13)
    }

    #[test]
    fn a_system_error_is_the_source_and_said_once() {
        let e = BackupError::Io {
            what: "create",
            path: "/b/x.db".into(),
            source: denied(),
        };
        assert_eq!(e.to_string(), "cannot create /b/x.db");
        assert_eq!(
            one_line(e),
            "cannot create /b/x.db: Permission denied (os error 13)"
        );
        let e = RestoreError::Io {
            what: "rename",
            path: "/l/ledger.db".into(),
            source: denied(),
        };
        assert_eq!(
            one_line(e),
            "cannot rename /l/ledger.db: Permission denied (os error 13)"
        );
        let e = RestoreError::Ledger {
            what: "open the restored ledger",
            source: LedgerError::Writer("disk full".into()),
        };
        assert_eq!(
            one_line(e),
            "cannot open the restored ledger: ledger write failed: disk full"
        );
    }

    #[test]
    fn an_sqlite_error_is_said_in_the_message_once_and_is_no_source() {
        let cause = rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_FULL),
            None,
        );
        let said = cause.to_string();
        let e = BackupError::Sql {
            what: "copy the ledger (VACUUM INTO)",
            cause,
        };
        assert!(e.source().is_none());
        assert_eq!(
            one_line(e),
            format!("copy the ledger (VACUUM INTO): {said}")
        );
    }

    #[test]
    fn a_lock_error_says_its_cause_itself_and_is_no_source() {
        let lock = || LockError::Io {
            what: "open",
            path: "/l/ledger.db.lock".into(),
            source: denied(),
        };
        let said = lock().to_string();
        assert_eq!(said.matches("os error 13").count(), 1, "{said}");
        for line in [
            one_line(BackupError::TargetLock(lock())),
            one_line(RestoreError::Lock(lock())),
            one_line(LedgerError::Lock(Box::new(lock()))),
        ] {
            assert_eq!(line.matches("os error 13").count(), 1, "{line}");
        }
    }
}
