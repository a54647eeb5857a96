//! The SQLite ledger: opening a file (pragmas, schema), and its selections and reads as SQL
//! (the PostgreSQL twin is `postgres`; the writes, both backends' in one file each, are
//! `crate::writes`). `sql` and `statements` hold the reads and the `Ledger`'s methods that run
//! them, `decode` how rows are read, `store` the one `Store` over whatever holds the
//! connections (one under a lock here; the relay's group commit).
//!
//! Every transition is ONE statement whose WHERE clause names the state it leaves; its row
//! count says whether it happened. Nothing here reads a row to decide a write: two threads
//! (or two processes) racing for the same GUID are arbitrated by SQLite, not by us.

pub mod access;
pub mod backup;
pub mod backup_seal;
mod decode;
mod durability;
mod history_table;
#[cfg(test)]
mod history_tests;
pub mod lock;
pub mod migrations;
pub(crate) mod moved;
mod page;
mod reconcile;
pub(crate) mod recovery;
pub mod restore;
mod settle_request;
mod sql;
mod statements;
mod store;
#[cfg(test)]
mod tests;

use std::cell::Cell;
use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, params};

pub use crate::error::{LedgerError, Result};
pub use crate::state::{Change, Evidence, HistoryRow, Row, State};
pub use crate::store::{Durability, HEALTH_PROBE_GUID, InquiryRecord, PURGE_CHUNK, Store};
use sql::{ACTOR_IN, ACTOR_OUT};
pub use store::Hold;

/// The schema file at the repository root, built into every binary.
pub const SCHEMA: &str = include_str!("../../../../schema.sql");

/// The schema version of these tools, which `PRAGMA user_version` records: how many of the
/// steps listed in `migrations` a file has had (each step says what its version added).
pub const SCHEMA_VERSION: i64 = migrations::LATEST;

/// How long a statement waits for another writer before giving up (then: E905).
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// One SQLite connection to the ledger, configured for durable claims.
/// A `Ledger` is used by one thread at a time (it is `Send`, not `Sync`).
pub struct Ledger {
    pub(crate) conn: Connection,
    /// Who the history names for this connection's changes.
    pub(crate) who: String,
    /// The `tx_actor` row naming `who` for a whole group-commit transaction, while one is
    /// open (see [`Ledger::begin_batch`]).
    batch_actor: Cell<Option<i64>>,
    /// The ledger's shared "use" lock (`lock`) for a read-write connection; declared after
    /// `conn`, so that it is let go only once the connection has closed.
    _in_use: Option<lock::LedgerLock>,
}

impl Ledger {
    /// Opens a ledger that must already exist: for the tools that work on the relay's ledger.
    pub fn open_existing(path: &Path) -> Result<Ledger> {
        if !access::exists(check_path(path)?)? {
            return Err(LedgerError::Missing(path.to_path_buf()));
        }
        Ledger::open(path)
    }

    /// Opens an existing ledger read-only, as it is: no pragma, no schema change (`inspect`).
    pub fn open_read_only(path: &Path) -> Result<Ledger> {
        if !access::exists(check_path(path)?)? {
            return Err(LedgerError::Missing(path.to_path_buf()));
        }
        // SQLite would say only "unable to open database file".
        if let Some(denied) = access::readable(path) {
            return Err(LedgerError::Denied(Box::new(denied)));
        }
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|source| LedgerError::Open {
            path: path.to_path_buf(),
            cause: source,
        })?;
        moved::refuse_if_moved(&conn, path)?;
        migrations::refuse_newer(&conn, path)?;
        migrations::show_missing_columns(&conn).map_err(|source| LedgerError::Open {
            path: path.to_path_buf(),
            cause: source,
        })?;
        Ok(Ledger {
            conn,
            who: "inspect".into(),
            batch_actor: Cell::new(None),
            _in_use: None,
        })
    }

    /// Opens (creating if needed) the ledger at `path`, sets and verifies WAL and
    /// `synchronous=FULL`, and brings the schema up to date. Every read-write connection
    /// holds the ledger's shared "use" lock (`lock`) for its life.
    pub fn open(path: &Path) -> Result<Ledger> {
        // SQLite says only "unable to open database file" (at the open, or at the first
        // statement, after falling back to read-only) when the file, its -wal or -shm, or
        // their folder is not this user's to use: the real cause is looked for (`access`).
        Ledger::open_unexplained(path).map_err(|e| match e {
            LedgerError::Open { .. } | LedgerError::Sql(_) | LedgerError::Pragma { .. } => {
                access::ledger(path).map_or(e, |d| LedgerError::Denied(Box::new(d)))
            }
            e => e,
        })
    }

    fn open_unexplained(path: &Path) -> Result<Ledger> {
        let open_err = |source| LedgerError::Open {
            path: path.to_path_buf(),
            cause: source,
        };
        check_path(path)?;
        // Before SQLite touches the file: refused while a backup or restore replaces it, or
        // when it has a second name (a hard link) or is a symlink to nothing.
        let in_use = lock::LedgerLock::shared(path).map_err(|e| match e {
            // The ledger's own permissions are the likelier cause than its lock file's.
            lock::LockError::Denied(d) => {
                LedgerError::Denied(access::ledger(path).map_or(d, Box::new))
            }
            e => LedgerError::Lock(Box::new(e)),
        })?;
        create_private(path);
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(open_err)?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(open_err)?;
        settle_request::register_identity(&conn).map_err(open_err)?;
        // A backup copy put in place by hand is refused before anything is written to it (not
        // even its journal mode).
        backup_seal::refuse_if_backup(&conn, path)?;

        let mode: String = conn
            .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
            .map_err(open_err)?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(LedgerError::Pragma {
                path: path.to_path_buf(),
                pragma: "journal_mode=WAL",
                got: mode,
            });
        }
        let (pragma, want) = durability::wanted();
        conn.execute_batch(&format!("PRAGMA {pragma}"))
            .map_err(open_err)?;
        let sync: i64 = conn
            .query_row("PRAGMA synchronous", [], |r| r.get(0))
            .map_err(open_err)?;
        if sync != want {
            return Err(LedgerError::Pragma {
                path: path.to_path_buf(),
                pragma,
                got: sync.to_string(),
            });
        }
        // Before the schema is brought up to date: a moved ledger is not touched.
        moved::refuse_if_moved(&conn, path)?;
        migrations::migrate(&conn, path)?;
        Ok(Ledger {
            conn,
            who: "ledger".into(),
            batch_actor: Cell::new(None),
            _in_use: Some(in_use),
        })
    }

    /// The name the history gives to this connection's changes (`relay`, `resolve`, …).
    pub fn acting_as(mut self, who: &str) -> Ledger {
        self.who = who.to_string();
        self
    }

    /// Opens a group-commit transaction whose changes the history names after this
    /// connection (`who`): the actor row is written once for the batch, not once per
    /// statement. [`Ledger::end_batch`] must run before the COMMIT.
    pub fn begin_batch(&self) -> Result<()> {
        self.conn.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
        let row = self.set_actor(&self.who, None);
        if row.is_err() {
            let _ = self.conn.execute_batch("ROLLBACK");
        }
        self.batch_actor.set(Some(row?));
        Ok(())
    }

    /// Takes the batch's actor row out again, so that nothing committed names an actor a
    /// later change by hand could inherit. An error here means the batch must not commit.
    pub fn end_batch(&self) -> Result<()> {
        match self.batch_actor.take() {
            Some(row) => self.unset_actor(row),
            None => Ok(()),
        }
    }

    /// Forgets the batch's actor row after a ROLLBACK (which took it out already).
    pub fn abandon_batch(&self) {
        self.batch_actor.take();
    }

    fn set_actor(&self, who: &str, reason: Option<&str>) -> Result<i64> {
        self.conn
            .prepare_cached(ACTOR_IN)?
            .execute(params![who, reason])?;
        Ok(self.conn.last_insert_rowid())
    }

    fn unset_actor(&self, row: i64) -> Result<()> {
        self.conn.prepare_cached(ACTOR_OUT)?.execute([row])?;
        Ok(())
    }

    /// Runs one change `f` as `who` (default: this connection's name) for `reason`: the
    /// actor is set for the history triggers, in the caller's transaction (the relay's group
    /// commit, where the batch's actor row already names this connection) or in one of its
    /// own (the tools, autocommit). The triggers read the newest `tx_actor` row.
    pub(crate) fn as_actor<T>(
        &self,
        who: Option<&str>,
        reason: Option<&str>,
        f: impl FnOnce() -> Result<T>,
    ) -> Result<T> {
        let own = self.conn.is_autocommit();
        if !own && who.is_none() && reason.is_none() && self.batch_actor.get().is_some() {
            return f();
        }
        if own {
            self.conn.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
        }
        // The actor row goes out again even when `f` fails; `f`'s error comes first.
        let r = self
            .set_actor(who.unwrap_or(&self.who), reason)
            .and_then(|row| {
                let v = f();
                let out = self.unset_actor(row);
                v.and_then(|v| out.map(|()| v))
            });
        if own {
            let end = if r.is_ok() { "COMMIT" } else { "ROLLBACK" };
            if let Err(e) = self.conn.execute_batch(end) {
                let _ = self.conn.execute_batch("ROLLBACK");
                return Err(e.into());
            }
        }
        r
    }

    /// What this connection's durability rests on.
    pub fn durability(&self) -> Result<Durability> {
        Ok(Durability::Sqlite {
            journal_mode: self
                .conn
                .query_row("PRAGMA journal_mode", [], |r| r.get(0))?,
            synchronous: self
                .conn
                .query_row("PRAGMA synchronous", [], |r| r.get(0))?,
        })
    }

    /// The raw connection, for tests and tools that inspect the file (never for transitions).
    pub fn connection(&self) -> &Connection {
        &self.conn
    }
}

/// `path`, refused if it is an SQLite URI (`file:...`): URI parameters such as `nolock=1`,
/// `immutable=1` or `vfs=` could quietly weaken how claims are arbitrated.
fn plain_path(path: &Path) -> Result<&Path> {
    if path.to_string_lossy().starts_with("file:") {
        return Err(LedgerError::NotAPath(path.display().to_string()));
    }
    Ok(path)
}

/// `path`, refused if it cannot name a ledger file: empty, an SQLite URI ([`plain_path`]),
/// a directory, or in a directory that does not exist (SQLite would say only "unable to open
/// database file", and the relay's lock file would fail first, naming another file).
pub fn check_path(path: &Path) -> Result<&Path> {
    let bad = |why: String| {
        Err(LedgerError::BadPath {
            path: path.to_path_buf(),
            why,
        })
    };
    if path.as_os_str().is_empty() {
        return bad("the path is empty".into());
    }
    plain_path(path)?;
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => return bad("it is a directory, not a ledger file".into()),
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            return Err(access::not_reached(path, e));
        }
        _ => {}
    }
    let dir = access::folder_of(path);
    match std::fs::metadata(&dir) {
        Ok(m) if m.is_dir() => Ok(path),
        Ok(_) => bad(format!("{} is not a directory", dir.display())),
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            Err(access::not_reached(&dir, e))
        }
        Err(_) => bad(format!("its directory {} does not exist", dir.display())),
    }
}

/// Creates a new ledger file readable by its owner only: it holds account numbers and
/// amounts. SQLite gives the -wal and -shm files the same mode. An existing file is left as
/// it is; any error here resurfaces, with a better message, when SQLite opens the path.
fn create_private(path: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        let _ = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path);
    }
    #[cfg(not(unix))]
    let _ = path;
}

/// A `datetime('now', ?)` modifier, bound as a parameter: no SQL is built from input.
pub(crate) fn age_modifier(n: u64, unit: &str) -> String {
    format!("-{n} {unit}")
}
