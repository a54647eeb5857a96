//! The relay's library: the ledger's states (`state`), the one interface to it (`store`) and
//! its two implementations, SQLite (`sqlite`, with the relay's group commit in
//! `group_commit`) and PostgreSQL (`postgres`), chosen by `--db` (`db`); the channel wire
//! format (`wire`), the core client and its failure classification (`core_client`,
//! `core_tls`, `pre_send`), the handling of one transfer (`transfer`), the TCP server
//! (`server`), its metrics and admin port (`metrics`, `admin`) and the batch tools (`batch`).
//! The binaries only parse flags and call into this crate.

pub mod admin;
pub mod batch;
pub mod core_client;
pub mod core_tls;
pub mod db;
pub mod double_booking;
pub mod error;
pub mod group_commit;
pub mod late;
pub mod metrics;
pub mod migrate;
pub mod postgres;
pub mod pre_send;
pub mod server;
pub mod sqlite;
pub mod state;
pub mod store;
pub mod transfer;
pub mod wire;

pub use db::{Access, Db};
pub use error::LedgerError;
pub use group_commit::{GroupCommit, Pool};
pub use sqlite::Ledger;
pub use state::{Change, Row, State};
pub use store::{Durability, Store};
