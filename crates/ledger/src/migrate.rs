//! Moving an SQLite ledger into PostgreSQL: each row inserted with `ON CONFLICT (guid) DO
//! NOTHING` and its own `updated_at`; a GUID already present is compared, never overwritten.
//!
//! The copy is of a ledger nothing else writes: `migrate` holds the SQLite ledger's write
//! lock (`BEGIN IMMEDIATE`) from before it reads the first row until it has written the last
//! one into PostgreSQL, and refuses a ledger whose lock it cannot get at once (a relay or a
//! batch tool writing). When every row is there it seals the SQLite ledger in that same
//! transaction: the table `ledger_moved` says where it went (the URL, password masked), and
//! triggers refuse every later write of `tx` and `relay_health` (a relay still running gets
//! `E905`, never a claim the PostgreSQL ledger does not know). Every tool refuses to open a
//! sealed ledger (`sqlite::moved`), naming where it went.

use std::path::{Path, PathBuf};
use std::time::Duration;

use log::warn;
use serde::Serialize;

use crate::error::LedgerError;
use crate::postgres::PgStore;
use crate::settle_request::Undecided;
use crate::sqlite::{Ledger, moved};
use crate::state::Row;
use crate::store::Transfers;

/// How long `migrate` waits for the SQLite ledger's write lock: a writer's transactions are
/// short, so a lock held longer than this means a program is writing the ledger.
pub const LOCK_WAIT: Duration = Duration::from_secs(2);

/// Why `migrate` copied nothing.
#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    /// Another program holds the SQLite ledger's write lock.
    #[error(
        "ledger {} is in use: its write lock could not be had within {} s ({why}); stop \
         the relay and the batch tools first; nothing copied",
        .path.display(),
        LOCK_WAIT.as_secs()
    )]
    InUse { path: PathBuf, why: String },
    /// Its text and its `source()` are the ledger error's own (`None`: see `LedgerError`).
    #[error(transparent)]
    Ledger(#[from] LedgerError),
}

/// The SQLite ledger being moved, its write lock held (an open `BEGIN IMMEDIATE`) until it
/// is sealed or dropped (which rolls back: nothing written to it).
pub struct LockedSource {
    ledger: Ledger,
}

impl LockedSource {
    /// Opens the ledger at `path` (which must exist and not be moved yet) and takes its
    /// write lock, waiting at most `LOCK_WAIT`.
    pub fn lock(path: &Path) -> Result<LockedSource, MigrateError> {
        let ledger = Ledger::open_existing(path)?;
        let conn = ledger.connection();
        conn.busy_timeout(LOCK_WAIT).map_err(LedgerError::Sql)?;
        if let Err(e) = conn.execute_batch("BEGIN IMMEDIATE") {
            return Err(match e.sqlite_error_code() {
                Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => {
                    MigrateError::InUse {
                        path: path.to_path_buf(),
                        why: e.to_string(),
                    }
                }
                _ => MigrateError::Ledger(LedgerError::Sql(e)),
            });
        }
        Ok(LockedSource { ledger })
    }

    /// Every row, as the lock keeps them.
    pub fn rows(&self) -> Result<Vec<Row>, LedgerError> {
        self.ledger.all_rows()
    }

    /// The settlement requests still undecided (pending or expired): the copy does not carry
    /// requests (PostgreSQL records a maker only as its own session's role), so an undecided
    /// one would be left behind in a sealed ledger where nobody can decide it.
    pub fn undecided_requests(&self) -> Result<Undecided, LedgerError> {
        self.ledger.undecided_settle_requests()
    }

    /// Marks the ledger moved to `to` (a URL, its password masked), shuts its writes, and
    /// commits: the lock ends here.
    pub fn seal(self, to: &str) -> Result<(), LedgerError> {
        let conn = self.ledger.connection();
        moved::seal(conn, to)?;
        conn.execute_batch("COMMIT")?;
        Ok(())
    }
}

impl Drop for LockedSource {
    fn drop(&mut self) {
        // Not sealed (or the seal failed): let go of the lock, nothing written.
        if !self.ledger.connection().is_autocommit() {
            let _ = self.ledger.connection().execute_batch("ROLLBACK");
        }
    }
}

#[derive(Debug, Default, Serialize)]
pub struct MigrateSummary {
    pub read: usize,
    pub copied: usize,
    /// Already in the target with exactly the same content (an earlier run).
    pub present: usize,
    /// Not copied: already there with other content, or not representable.
    pub refused: usize,
    /// The refused GUIDs, for the operator.
    pub refused_guids: Vec<String>,
}

/// Copies every row of `source` into `target`.
pub fn copy(source: &LockedSource, target: &PgStore) -> Result<MigrateSummary, LedgerError> {
    let mut sum = MigrateSummary::default();
    for row in source.rows()? {
        sum.read += 1;
        match copy_one(&row, target) {
            Ok(true) => sum.copied += 1,
            Ok(false) => sum.present += 1,
            Err(why) => {
                warn!("guid={} not copied: {why}", row.guid);
                sum.refused += 1;
                sum.refused_guids.push(row.guid);
            }
        }
    }
    Ok(sum)
}

/// `Ok(true)`: copied; `Ok(false)`: already there, identical; `Err`: refused, and why.
fn copy_one(row: &Row, target: &PgStore) -> Result<bool, String> {
    if row.attempts.is_none() {
        return Err("attempts is not an integer".into());
    }
    if !canonical_time(&row.updated_at) {
        return Err(format!(
            "updated_at {:?} is not YYYY-MM-DD HH:MM:SS",
            row.updated_at
        ));
    }
    if target.copy_row(row).map_err(|e| e.to_string())? {
        return Ok(true);
    }
    match target.read(&row.guid).map_err(|e| e.to_string())? {
        Some(there) if &there == row => Ok(false),
        Some(there) => Err(format!(
            "already in the target with other content ({} {} attempts {:?}, updated {})",
            there.state,
            there.rsp_code.as_deref().unwrap_or("-"),
            there.attempts,
            there.updated_at
        )),
        None => Err("neither copied nor found (deleted meanwhile?)".into()),
    }
}

fn canonical_time(t: &str) -> bool {
    let b = t.as_bytes();
    b.len() == 19
        && b.iter().enumerate().all(|(i, c)| match i {
            4 | 7 => *c == b'-',
            10 => *c == b' ',
            13 | 16 => *c == b':',
            _ => c.is_ascii_digit(),
        })
}
