//! The engine: what the relay and the batch tools do with the ledger and the core. One
//! transfer (`transfer`: claim, send, record), late replies (`late`), possible double bookings
//! (`double_booking`), the TCP server (`server`), its metrics and admin port (`metrics`,
//! `admin`; `observers` routes the ledger's and the core client's reports to them), and the
//! batch tools (`batch`: resolve, reprocess, purge, the canary); recovery mode, when the
//! ledger was put back to an earlier state (`recovery`). The core is seen through a
//! trait (`core`) that the HTTP client implements, and probed once at the relay's start
//! (`core_probe`); repeated warnings are rate-limited (`log_limit`). The binaries only parse
//! flags and call into this crate.

pub mod admin;
pub mod batch;
pub mod core;
pub mod core_probe;
pub mod double_booking;
pub mod every;
pub mod late;
pub mod log_limit;
pub mod metrics;
pub mod observers;
pub mod record;
pub mod recovery;
pub mod server;
pub mod transfer;
