//! The tools' flags, each written once: those naming the core (`core`), the others they
//! share (`tool`), and the whole set resolve and reprocess share (`batch`). A flag with an environment twin is declared in the tool by a macro given
//! the tool's prefix (`"RELAY_"`), so that its name, default, range and help stay one text.

#[cfg(feature = "core")]
mod batch;
#[cfg(feature = "core")]
mod core;
mod tool;

#[cfg(feature = "core")]
pub use self::core::{Core, CoreUrl, masked_userinfo};
pub use self::tool::{JsonFlag, batch_access};
#[doc(hidden)]
pub use anyhow;
/// `--parallel`'s default and its most: the core client's (`core_client::MAX_IDLE`).
#[cfg(feature = "core")]
pub use core_client::{DEFAULT_PARALLEL, MAX_IDLE as MAX_PARALLEL};
pub use ledger::Access;
