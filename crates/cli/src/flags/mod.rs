//! The tools' flags, each written once: those naming the core (`core`), the others they
//! share (`tool`), and the whole set resolve and reprocess share (`batch`). A flag with an environment twin is declared in the tool by a macro given
//! the tool's prefix (`"RELAY_"`), so that its name, default, range and help stay one text.

mod batch;
mod core;
mod tool;

pub use self::core::{Core, CoreUrl, masked_userinfo};
pub use self::tool::{JsonFlag, batch_access};
#[doc(hidden)]
pub use anyhow;
pub use engine::batch::{DEFAULT_PARALLEL, MAX_PARALLEL};
pub use ledger::Access;
