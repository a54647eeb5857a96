//! The ledger: one row per GUID, the states and the guarded changes between them (`state`),
//! the rules of which rows need whom (`rules`), the one interface to the ledger (`store`) and
//! its two implementations, SQLite (`sqlite`,
//! with the relay's group commit in `group_commit`) and PostgreSQL (`postgres`), chosen by
//! `--db` (`db`); `migrate` copies an SQLite ledger into PostgreSQL; `observe` reports commits
//! to whoever keeps metrics. Nothing here knows HTTP or sockets.

pub mod db;
pub mod error;
pub mod group_commit;
pub mod identity;
pub mod migrate;
pub mod observe;
pub mod page;
pub mod postgres;
pub mod reconcile;
pub mod recovery;
pub mod rules;
pub mod settle_request;
pub mod sqlite;
pub mod state;
pub mod store;
pub mod writes;

pub use db::{Access, Db};
pub use error::LedgerError;
pub use group_commit::{GroupCommit, Pool};
pub use reconcile::ReconcileRow;
pub use sqlite::Ledger;
pub use state::{Change, Row, State};
pub use store::{Durability, Store};
