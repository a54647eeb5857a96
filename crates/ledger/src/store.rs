//! The one interface to the ledger, whatever holds it: everything the relay and the batch
//! tools need (claims, guarded transitions, selections, counts, purge), by role (`roles`:
//! `Transfers`, `Inquiries`, `Retention`, `Reports`, `Recovering`, `Settling`), and all of
//! them as [`Store`]. What only the tests read is not here (`testkit::probes`). Implemented for
//! SQLite (`sqlite`, once over whatever holds its connections: one connection under a lock,
//! for the tools; `group_commit`: the relay's writer thread and read pool) and PostgreSQL
//! (`postgres`: a pool of connections, each operation with a client-side deadline). The
//! transfer path and the batch tools are written once against it.
//!
//! Every change is ONE guarded statement whose row count decides; no implementation reads a
//! row to decide a write.

use std::time::Duration;

use serde::Serialize;

use crate::error::{LedgerError, Result};

/// The GUID of `/healthz`'s probe row: spaces and a slash, so no channel can ever send it
/// (CONTRACT §2: 1–36 of `[0-9A-Za-z._-]`; §9's Idempotency-Key obeys the same rule). The
/// row is inserted and rolled back in the same transaction, never committed.
pub const HEALTH_PROBE_GUID: &str = "txrelay /healthz probe";

/// purge deletes at most this many rows per transaction, so that the write lock is never
/// held long enough for a claim or a result to wait out its busy timeout.
pub const PURGE_CHUNK: usize = 1000;

/// After this many failed inquiries about one GUID, resolve stops asking and leaves it to an
/// operator (`resolve --max-inquiries`, `inspect --max-inquiries`).
pub const DEFAULT_MAX_INQUIRIES: u32 = 20;

/// reprocess's usual `--max-attempts` (its wrapper's default): a FAILED/E902 row with this
/// many attempts is left to an operator (the relay's gauge and `inspect` count it so).
pub const DEFAULT_MAX_ATTEMPTS: i64 = 3;

/// The longest wait between two inquiries about one GUID. After its n-th failed inquiry a
/// GUID is not asked about again for `min(min_age × 2^(n-1), INQUIRY_BACKOFF_CAP)`, where
/// `min_age` is the `--min-age` of the run that recorded the failure.
pub const INQUIRY_BACKOFF_CAP: Duration = Duration::from_secs(3600);

/// The longest doubling exponent the backoff computes with (the cap is reached long before:
/// 1 s × 2^20 is 12 days), so that the arithmetic can never overflow.
pub const INQUIRY_BACKOFF_MAX_DOUBLINGS: i64 = 20;

/// How much of an inquiry's error text a record keeps.
pub const LAST_ERROR_MAX_CHARS: usize = 500;

/// One GUID's failed inquiries, as the side table `tx_inquiry` holds them (the `tx` table
/// keeps the contract's columns only). A successful inquiry deletes the record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InquiryRecord {
    pub guid: String,
    /// Inquiries that failed in a row.
    pub failures: i64,
    /// The last failure's error.
    pub last_error: Option<String>,
    /// The next inquiry is not made before this (UTC, `YYYY-MM-DD HH:MM:SS`, the database's
    /// clock).
    pub next_at: String,
}

/// `error` cut to `LAST_ERROR_MAX_CHARS` characters.
pub fn last_error_text(error: &str) -> &str {
    match error.char_indices().nth(LAST_ERROR_MAX_CHARS) {
        Some((at, _)) => &error[..at],
        None => error,
    }
}

/// The backoff cap in whole seconds, as the SQL binds it.
pub(crate) fn backoff_cap_secs() -> i64 {
    INQUIRY_BACKOFF_CAP.as_secs() as i64
}

/// `--min-age` as the backoff's SQL binds it: never above the cap, so that doubling it
/// cannot overflow.
pub(crate) fn backoff_base_secs(min_age_secs: u64) -> i64 {
    i64::try_from(min_age_secs)
        .unwrap_or(i64::MAX)
        .min(backoff_cap_secs())
}

/// The read half of the health round trip: the row the write just stamped must be there.
pub(crate) fn health_read_back(at: Option<String>) -> Result<()> {
    match at {
        Some(_) => Ok(()),
        None => Err(LedgerError::Writer(
            "the health row written was not read back".into(),
        )),
    }
}

mod roles;

/// Every role, for code that calls the ledger on a concrete store (`PgStore`, a holder) rather
/// than through `dyn Store`: `use ledger::store::prelude::*`.
pub mod prelude {
    pub use super::{Inquiries, Recovering, Reports, Retention, Settling, Store, Transfers};
    pub use crate::writes::*;
}

pub use roles::{Inquiries, Recovering, Reports, Retention, Settling, Transfers};

/// The one interface to the ledger, whatever holds it: every role (`roles`) at once, as the
/// relay and the tools hold it (`Arc<dyn Store>`).
pub trait Store:
    Transfers + Inquiries + Retention + Reports + Recovering + Settling + Send + Sync
{
}

impl<T: Transfers + Inquiries + Retention + Reports + Recovering + Settling + Send + Sync> Store
    for T
{
}

/// What one connection's durability rests on, as its database reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Durability {
    Sqlite {
        journal_mode: String,
        /// `PRAGMA synchronous`: 2 is FULL.
        synchronous: i64,
    },
    Postgres {
        synchronous_commit: String,
    },
}

impl Durability {
    /// A commit is on disk (and on a synchronous standby, if one is configured) before it
    /// returns: SQLite in WAL mode with `synchronous=FULL`; PostgreSQL with
    /// `synchronous_commit` `on` or `remote_apply` (`DURABLE_COMMIT`).
    pub fn is_durable(&self) -> bool {
        match self {
            Durability::Sqlite {
                journal_mode,
                synchronous,
            } => journal_mode.eq_ignore_ascii_case("wal") && *synchronous >= 2,
            Durability::Postgres { synchronous_commit } => {
                DURABLE_COMMIT.contains(&synchronous_commit.as_str())
            }
        }
    }
}

/// The `synchronous_commit` values whose commit returns only once it is flushed to disk and,
/// where `synchronous_standby_names` names standbys, flushed (`on`) or applied
/// (`remote_apply`) on them too. `local` never waits for a standby and `remote_write` only
/// for the standby's operating system: a primary lost then can take with it a claim the
/// relay already acted on. Every other value is set to `on` in our sessions.
pub const DURABLE_COMMIT: [&str; 2] = ["on", "remote_apply"];
