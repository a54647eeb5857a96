//! What can stop lossyfs.

use std::fmt;
use std::io;
use std::path::PathBuf;

#[derive(Debug)]
pub enum Error {
    /// The backing folder is unusable (missing, not a folder, its trash folder).
    Backing(PathBuf, io::Error),
    /// The control socket could not be bound.
    Control(PathBuf, io::Error),
    /// The mount failed (no /dev/fuse, not root, not a folder).
    Mount(PathBuf, io::Error),
    /// The FUSE session failed while mounted.
    Session(io::Error),
    /// The signal handlers could not be installed.
    Signals(io::Error),
    /// The mount could not be taken down.
    Unmount(PathBuf, io::Error),
    /// A drop failed half-way: the backing folder is neither what was durable nor what was
    /// written.
    Revert(io::Error),
    /// The trash folder could not be removed at a clean end.
    Finish(io::Error),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Backing(path, e) => write!(f, "backing folder {}: {e}", path.display()),
            Error::Control(path, e) => write!(f, "control socket {}: {e}", path.display()),
            Error::Mount(path, e) => write!(f, "mounting on {}: {e}", path.display()),
            Error::Session(e) => write!(f, "serving the mount: {e}"),
            Error::Signals(e) => write!(f, "installing signal handlers: {e}"),
            Error::Unmount(path, e) => write!(f, "unmounting {}: {e}", path.display()),
            Error::Revert(e) => write!(f, "reverting the backing folder: {e}"),
            Error::Finish(e) => write!(f, "removing the trash folder: {e}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Backing(_, e)
            | Error::Control(_, e)
            | Error::Mount(_, e)
            | Error::Session(e)
            | Error::Signals(e)
            | Error::Unmount(_, e)
            | Error::Revert(e)
            | Error::Finish(e) => Some(e),
        }
    }
}
