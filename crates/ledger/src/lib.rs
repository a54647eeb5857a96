//! The relay's library: the ledger and its transitions (`store`), the channel wire format
//! (`wire`), the core client and its failure classification (`core_client`), the handling of
//! one transfer (`transfer`) and the TCP server (`server`). The binaries only parse flags
//! and call into this crate.

pub mod batch;
pub mod core_client;
pub mod server;
pub mod store;
pub mod transfer;
pub mod wire;

pub use store::{GroupCommit, Ledger, LedgerError, Pool, Row, State, Store};
