//! The ledger's errors, typed so that callers can tell "cannot open" from "statement failed".

use std::fmt;
use std::path::PathBuf;

#[derive(Debug)]
pub enum LedgerError {
    /// The file could not be created, opened or prepared.
    Open {
        path: PathBuf,
        source: rusqlite::Error,
    },
    /// A batch tool was pointed at a file that does not exist (a mistyped --db would
    /// otherwise create an empty ledger and report that nothing needed doing).
    Missing(PathBuf),
    /// `--db` was not a plain path (an SQLite URI could weaken locking or durability).
    NotAPath(String),
    /// `--db` cannot name a ledger file: empty, a directory, or in a missing directory.
    BadPath { path: PathBuf, why: String },
    /// The SQLite ledger's lock (`sqlite::lock`) was not taken: a backup or restore is
    /// replacing the file, the file has several names, a dangling symlink, the lock file.
    Lock(Box<crate::sqlite::lock::LockError>),
    /// The ledger, a companion file or a folder on the way exists but this process's user
    /// may not use it (`sqlite::access`): said as such, never as "does not exist".
    Denied(Box<crate::sqlite::access::Denied>),
    /// A pragma the durability of claims depends on did not take effect.
    Pragma {
        path: PathBuf,
        pragma: &'static str,
        got: String,
    },
    /// A statement failed (busy past the timeout, disk full, read-only file, ...).
    Sql(rusqlite::Error),
    /// A write gathered by the group-commit writer was not committed.
    Writer(String),
    /// Every pooled connection stayed busy past the wait.
    PoolExhausted,
    /// A PostgreSQL statement failed (the server's error, or the connection's).
    Pg(postgres::Error),
    /// The PostgreSQL ledger could not be opened (`url` has its password masked).
    PgOpen { url: String, why: String },
    /// `--db` looked like a PostgreSQL URL but is not a usable one.
    PgUrl(BadPgUrl),
    /// The database did not answer in time: the connection is dropped, the outcome of the
    /// statement unknown (a claim in that state is not won).
    Deadline {
        what: &'static str,
        after: std::time::Duration,
    },
    /// No connection to the database can be had right now.
    Unavailable(String),
    /// A session's commits would not be durable.
    NotDurable(String),
    /// A COMMIT came back with PostgreSQL's warning that its wait for the synchronous
    /// standby was cancelled (contract §7, v1.3): on the primary alone, lost in a failover.
    /// The write counts as not made (a claim not won, a result not written) and its
    /// connection was closed. Not retried: the row may be there on this primary.
    NotReplicated { what: &'static str },
    /// `migrate` moved this SQLite ledger to `to` (a URL, its password masked) at `at`:
    /// nothing may use it any more (its rows live on there).
    Moved {
        path: PathBuf,
        to: String,
        at: String,
    },
    /// The file is a sealed backup copy (contract §11) put where a ledger was expected:
    /// written to, it would serve a ledger that has forgotten every claim since the snapshot.
    BackupCopy { path: PathBuf, snapshot_at: String },
    /// An instant given to the ledger is not RFC 3339 with an offset.
    BadInstant(String),
    /// The ledger's schema is newer than this build knows (`ledger`: a path, or a URL with
    /// its password masked): a later version wrote it, and this one might misread it or undo
    /// what it relies on.
    NewerSchema {
        ledger: String,
        found: i64,
        known: i64,
    },
}

impl fmt::Display for LedgerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LedgerError::Open { path, source } => {
                write!(f, "cannot open ledger {}: {source}", path.display())
            }
            LedgerError::Pragma { path, pragma, got } => write!(
                f,
                "ledger {}: cannot set {pragma} (SQLite answered {got:?})",
                path.display()
            ),
            LedgerError::Missing(path) => write!(
                f,
                "ledger {} does not exist (the relay creates it; check --db)",
                path.display()
            ),
            LedgerError::NotAPath(db) => write!(
                f,
                "ledger {db:?} is an SQLite URI; give a plain file path (URI options such as \
                 nolock, immutable or vfs could weaken how claims are arbitrated)"
            ),
            LedgerError::BadPath { path, why } => {
                write!(
                    f,
                    "ledger {:?}: {why} (check --db)",
                    path.display().to_string()
                )
            }
            LedgerError::Lock(e) => e.fmt(f),
            LedgerError::Denied(d) => d.fmt(f),
            LedgerError::Sql(e) => write!(f, "ledger statement failed: {e}"),
            LedgerError::Writer(msg) => write!(f, "ledger write failed: {msg}"),
            LedgerError::PoolExhausted => f.write_str("no ledger connection became free in time"),
            LedgerError::Pg(e) => {
                write!(f, "ledger statement failed: {e}")?;
                // The client's errors keep their cause (refused, timed out, ...) one level down.
                let mut cause = std::error::Error::source(e);
                while let Some(c) = cause {
                    write!(f, ": {c}")?;
                    cause = c.source();
                }
                Ok(())
            }
            LedgerError::PgOpen { url, why } => write!(f, "cannot open ledger {url}: {why}"),
            LedgerError::PgUrl(e) => e.fmt(f),
            LedgerError::Deadline { what, after } => write!(
                f,
                "the database did not answer within {} ms ({what}); connection dropped",
                after.as_millis()
            ),
            LedgerError::Unavailable(why) => write!(f, "ledger unavailable: {why}"),
            LedgerError::NotDurable(got) => write!(
                f,
                "the database session's commits would not be durable ({got}); refusing it"
            ),
            LedgerError::NotReplicated { what } => write!(
                f,
                "{what}: the commit was not replicated to the synchronous standby (its wait \
                 was cancelled: committed on the primary alone, lost in a failover); treated \
                 as not written, connection closed"
            ),
            LedgerError::Moved { path, to, at } => write!(
                f,
                "ledger {} was moved to {to} by migrate at {at} UTC; use --db with that \
                 ledger (this file is kept for the record only)",
                path.display()
            ),
            LedgerError::BadInstant(s) => write!(
                f,
                "{s:?} is not an instant in RFC 3339 with an offset (2026-12-06T09:30:00Z)"
            ),
            LedgerError::BackupCopy { path, snapshot_at } => write!(
                f,
                "ledger {} is a backup copy (snapshot_at={snapshot_at}) put in place without \
                 restore: serving it would forget every claim since the snapshot and book their \
                 resends again; put it back with `restore --from BACKUP --db {}` instead",
                path.display(),
                path.display()
            ),
            LedgerError::NewerSchema {
                ledger,
                found,
                known,
            } => write!(
                f,
                "ledger {ledger}: its schema is version {found}, newer than this build knows \
                 ({known}); refusing it (run the tools of the version that wrote it)"
            ),
        }
    }
}

/// Written by hand, not derived with `thiserror`: it would make `Open`'s field `source` the
/// error's `source()`.
impl std::error::Error for LedgerError {
    /// None: `Display` already says the cause, and error chains printed in one line (anyhow's
    /// `{:#}`, how every tool prints its fatal error: `cli::exit_code`) would say it twice.
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        None
    }
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
