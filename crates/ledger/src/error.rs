//! The ledger's errors, typed so that callers can tell "cannot open" from "statement failed".

use std::fmt;
use std::path::PathBuf;

/// Each variant's message says its cause (SQLite's, PostgreSQL's, the system's) itself, and
/// `source()` is `None`: the relay logs these errors with `{}` on every request that meets
/// one (E905's warning, a result not recorded), and each such line must carry its cause;
/// the tools print them with anyhow's `{:#}`, which would say a `source()` a second time.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// The file could not be created, opened or prepared.
    #[error("cannot open ledger {}: {cause}", .path.display())]
    Open {
        path: PathBuf,
        cause: rusqlite::Error,
    },
    /// A batch tool was pointed at a file that does not exist (a mistyped --db would
    /// otherwise create an empty ledger and report that nothing needed doing).
    #[error("ledger {} does not exist (the relay creates it; check --db)", .0.display())]
    Missing(PathBuf),
    /// `--db` was not a plain path (an SQLite URI could weaken locking or durability).
    #[error(
        "ledger {0:?} is an SQLite URI; give a plain file path (URI options such as nolock, \
         immutable or vfs could weaken how claims are arbitrated)"
    )]
    NotAPath(String),
    /// `--db` cannot name a ledger file: empty, a directory, or in a missing directory.
    #[error("ledger {:?}: {why} (check --db)", .path.display().to_string())]
    BadPath { path: PathBuf, why: String },
    /// The SQLite ledger's lock (`sqlite::lock`) was not taken: a backup or restore is
    /// replacing the file, the file has several names, a dangling symlink, the lock file.
    #[error("{0}")]
    Lock(Box<crate::sqlite::lock::LockError>),
    /// The ledger, a companion file or a folder on the way exists but this process's user
    /// may not use it (`sqlite::access`): said as such, never as "does not exist".
    #[error("{0}")]
    Denied(Box<crate::sqlite::access::Denied>),
    /// A pragma the durability of claims depends on did not take effect.
    #[error("ledger {}: cannot set {pragma} (SQLite answered {got:?})", .path.display())]
    Pragma {
        path: PathBuf,
        pragma: &'static str,
        got: String,
    },
    /// A statement failed (busy past the timeout, disk full, read-only file, ...).
    #[error("ledger statement failed: {0}")]
    Sql(rusqlite::Error),
    /// A write gathered by the group-commit writer was not committed.
    #[error("ledger write failed: {0}")]
    Writer(String),
    /// Every pooled connection stayed busy past the wait.
    #[error("no ledger connection became free in time")]
    PoolExhausted,
    /// A PostgreSQL statement failed (the server's error, or the connection's).
    #[error(fmt = pg_failed)]
    Pg(postgres::Error),
    /// The PostgreSQL ledger could not be opened (`url` has its password masked).
    #[error("cannot open ledger {url}: {why}")]
    PgOpen { url: String, why: String },
    /// `--db` looked like a PostgreSQL URL but is not a usable one.
    #[error("{0}")]
    PgUrl(BadPgUrl),
    /// The database did not answer in time: the connection is dropped, the outcome of the
    /// statement unknown (a claim in that state is not won).
    #[error(
        "the database did not answer within {} ms ({what}); connection dropped",
        .after.as_millis()
    )]
    Deadline {
        what: &'static str,
        after: std::time::Duration,
    },
    /// No connection to the database can be had right now.
    #[error("ledger unavailable: {0}")]
    Unavailable(String),
    /// A session's commits would not be durable.
    #[error("the database session's commits would not be durable ({0}); refusing it")]
    NotDurable(String),
    /// A COMMIT came back with PostgreSQL's warning that its wait for the synchronous
    /// standby was cancelled (contract §7, v1.3): on the primary alone, lost in a failover.
    /// The write counts as not made (a claim not won, a result not written) and its
    /// connection was closed. Not retried: the row may be there on this primary.
    #[error(
        "{what}: the commit was not replicated to the synchronous standby (its wait was \
         cancelled: committed on the primary alone, lost in a failover); treated as not \
         written, connection closed"
    )]
    NotReplicated { what: &'static str },
    /// `migrate` moved this SQLite ledger to `to` (a URL, its password masked) at `at`:
    /// nothing may use it any more (its rows live on there).
    #[error(
        "ledger {} was moved to {to} by migrate at {at} UTC; use --db with that ledger (this \
         file is kept for the record only)",
        .path.display()
    )]
    Moved {
        path: PathBuf,
        to: String,
        at: String,
    },
    /// The file is a sealed backup copy (contract §11) put where a ledger was expected:
    /// written to, it would serve a ledger that has forgotten every claim since the snapshot.
    #[error(
        "ledger {} is a backup copy (snapshot_at={snapshot_at}) put in place without restore: \
         serving it would forget every claim since the snapshot and book their resends \
         again; put it back with `restore --from BACKUP --db {}` instead",
        .path.display(),
        .path.display()
    )]
    BackupCopy { path: PathBuf, snapshot_at: String },
    /// An instant given to the ledger is not RFC 3339 with an offset.
    #[error("{0:?} is not an instant in RFC 3339 with an offset (2026-12-06T09:30:00Z)")]
    BadInstant(String),
    /// The ledger's schema is newer than this build knows (`ledger`: a path, or a URL with
    /// its password masked): a later version wrote it, and this one might misread it or undo
    /// what it relies on.
    #[error(
        "ledger {ledger}: its schema is version {found}, newer than this build knows \
         ({known}); refusing it (run the tools of the version that wrote it)"
    )]
    NewerSchema {
        ledger: String,
        found: i64,
        known: i64,
    },
}

/// A PostgreSQL error with its causes: the client's errors keep theirs (refused, timed out,
/// ...) one level down, and they are said here, in the message (see `LedgerError`).
fn pg_failed(e: &postgres::Error, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    write!(f, "ledger statement failed: {e}")?;
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        write!(f, ": {c}")?;
        cause = c.source();
    }
    Ok(())
}

impl From<rusqlite::Error> for LedgerError {
    fn from(e: rusqlite::Error) -> Self {
        LedgerError::Sql(e)
    }
}

pub type Result<T> = std::result::Result<T, LedgerError>;

/// Why a URL was refused; its text never holds the password.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadPgUrl(pub String);
