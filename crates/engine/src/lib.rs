//! The decisions: what the relay and the batch tools do with the ledger and the core, with
//! no sockets, listeners, metrics or threads of the relay's own. One transfer (`transfer`:
//! claim, send, record; `record`), late replies (`late`), possible double bookings
//! (`double_booking`), recovery mode's inquiry before a claim (`recovery`), and the batch
//! tools (`batch`: resolve, reprocess, purge, the canary). Its ports: the core (`core`, which
//! the HTTP client implements and tests script), an events sink (`events`), which the
//! relay's `server` crate implements with its metrics and late-reply waiters, and the clock
//! (`clock`), which the events sink gives (the system's, unless a simulator or a test gives
//! its own). Repeated
//! warnings are rate-limited (`log_limit`). The binaries only parse flags and call in here
//! or into `server`.

pub mod batch;
pub mod clock;
pub mod core;
pub mod double_booking;
pub mod events;
pub mod late;
pub mod record;
pub mod recovery;
pub mod transfer;
