//! `lossyfs`: a FUSE pass-through of a real folder that can forget what was not synced, as a
//! power cut would. It tracks what is not durable (file blocks since the file's last fsync,
//! directory operations since the directory's last fsyncdir) and, on `drop MODE SEED` over
//! its control socket, freezes (every operation then fails with EIO) and puts back in the
//! backing folder what was durable: all of it, a seeded subset, or all but a torn last write.
//!
//! - [`model`]: what is durable and how to revert it; no FUSE in it.
//! - [`gate`]: counting, `--crash-after`, freezing.
//! - [`fs`]: the FUSE layer.
//! - [`control`]: the control socket.
//! - [`run()`]: a whole run.

pub mod control;
pub mod error;
pub mod fs;
pub mod gate;
pub mod model;
pub mod run;
pub mod state;

pub use error::Error;
pub use run::{Options, Outcome, run};
