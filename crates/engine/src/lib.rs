//! The engine: what the relay and the batch tools do with the ledger and the core. One
//! transfer (`transfer`: claim, send, record), late replies (`late`), possible double bookings
//! (`double_booking`), the TCP server (`server`), its metrics and admin port (`metrics`,
//! `admin`), and the batch tools (`batch`: resolve, reprocess, purge, the canary). The
//! binaries only parse flags and call into this crate.

pub mod admin;
pub mod batch;
pub mod double_booking;
pub mod late;
pub mod metrics;
pub mod server;
pub mod transfer;
