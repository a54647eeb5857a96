//! `--db`: a path (an SQLite ledger, the embedded default) or a `postgres://` URL (a
//! PostgreSQL ledger several relays can share), and opening the store behind it.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::error::{LedgerError, Result};
use crate::group_commit::GroupCommit;
use crate::postgres::{self, PgStore, PgUrl};
use crate::sqlite::{BUSY_TIMEOUT, Ledger};
use crate::store::Store;

/// Where the ledger is.
#[derive(Debug, Clone)]
pub enum Db {
    Sqlite(PathBuf),
    Postgres(Box<PgUrl>),
}

impl FromStr for Db {
    type Err = LedgerError;
    fn from_str(s: &str) -> Result<Db> {
        if postgres::is_pg_url(s) {
            return s
                .parse()
                .map(|u| Db::Postgres(Box::new(u)))
                .map_err(LedgerError::PgUrl);
        }
        if s.is_empty() {
            return Err(LedgerError::BadPath {
                path: PathBuf::new(),
                why: "the path is empty".into(),
            });
        }
        Ok(Db::Sqlite(PathBuf::from(s)))
    }
}

/// The ledger as logs and errors may name it: a URL's password is masked.
impl fmt::Display for Db {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Db::Sqlite(p) => write!(f, "{}", p.display()),
            Db::Postgres(u) => u.fmt(f),
        }
    }
}

/// Who opens the ledger, which decides how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// The relay: creates an SQLite ledger if missing; group commit and a read pool.
    Relay,
    /// A batch tool: an SQLite ledger must exist already (a mistyped path would otherwise
    /// report that nothing needed doing).
    Tool,
    /// A batch tool working on several rows at once (`resolve`/`reprocess --parallel` above
    /// 1): as `Tool`, but an SQLite ledger is written through group commit, so that the
    /// settlements of rows finishing together share one commit (each still its own guarded
    /// statement), and read through a pool.
    Batch,
    /// `inspect`: read-only, no pragma, no schema change.
    ReadOnly,
}

/// Connections a PostgreSQL relay keeps (measured: beyond this the relay is CPU-bound).
pub const PG_RELAY_CONNECTIONS: usize = 32;
/// Connections a PostgreSQL batch tool keeps.
pub const PG_TOOL_CONNECTIONS: usize = 8;
/// Each PostgreSQL operation's client-side deadline: the same wait SQLite's busy timeout
/// allows.
pub const PG_OP_DEADLINE: Duration = BUSY_TIMEOUT;

impl Db {
    /// Opens the store; `who` names the program in the database's session list.
    pub fn open(&self, access: Access, who: &str) -> Result<Arc<dyn Store>> {
        match self {
            Db::Sqlite(path) => Ok(match access {
                Access::Relay => Arc::new(GroupCommit::open(path, who)?),
                Access::Tool => Arc::new(Mutex::new(Ledger::open_existing(path)?.acting_as(who))),
                Access::Batch => Arc::new(GroupCommit::open_existing(path, who)?),
                Access::ReadOnly => Arc::new(Mutex::new(Ledger::open_read_only(path)?)),
            }),
            Db::Postgres(url) => {
                let settings = postgres::Settings {
                    max: if access == Access::Relay {
                        PG_RELAY_CONNECTIONS
                    } else {
                        PG_TOOL_CONNECTIONS
                    },
                    op_deadline: PG_OP_DEADLINE,
                    read_only: access == Access::ReadOnly,
                    application_name: format!("txrelay-{who}"),
                    who: who.to_string(),
                };
                Ok(Arc::new(PgStore::open(PgUrl::clone(url), settings)?))
            }
        }
    }
}
