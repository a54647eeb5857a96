//! The relay's library: the ledger's states (`state`), its SQL (`store`) and the relay's
//! group-commit access to it (`group_commit`), the channel wire format (`wire`), the core
//! client and its failure classification (`core_client`, `pre_send`), the handling of one
//! transfer (`transfer`), the TCP server (`server`) and the batch tools (`batch`). The
//! binaries only parse flags and call into this crate.

pub mod batch;
pub mod core_client;
pub mod error;
pub mod group_commit;
pub mod pre_send;
pub mod server;
pub mod state;
pub mod store;
pub mod transfer;
pub mod wire;

pub use error::LedgerError;
pub use group_commit::{GroupCommit, Pool};
pub use state::{Change, Row, State};
pub use store::{Ledger, Store};
