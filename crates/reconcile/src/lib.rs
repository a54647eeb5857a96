//! Reconciliation of the ledger against the core's booking journal (CONTRACT §10): the
//! journal read as a stream (`journal`), the window (`window`), the stored replies read from
//! their bytes (`reply`), and the classes (`classify`). Reads only; prints nothing.

pub mod classify;
pub mod journal;
pub mod reply;
pub mod time;
pub mod window;

pub use classify::{Break, Class, Reconciler, Report};
pub use journal::{Journal, JournalError};
pub use window::{Window, WindowError};
