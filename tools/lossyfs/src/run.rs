//! A run: mount, serve the control socket, wait for a drop, a signal or an unmount from
//! outside, take the mount down.
//!
//! Taking the mount down tries umount(2) first; a mount still in use (a process holds a file
//! open on it, as after a power cut) is detached instead (umount -l) and the process exits:
//! the kernel then fails what those processes still do on it. A mount left behind by a crash
//! of lossyfs itself is taken down the same way: `umount -l MNT`.

use std::fs;
use std::io;
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread;

use fuser::{Config, MountOption, Session, SessionUnmounter};
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use crate::control::{self, Dropped};
use crate::error::Error;
use crate::fs::LossyFs;
use crate::gate::Gate;
use crate::model::{DropReport, Tracker};
use crate::state::{Shared, State};

/// What `lossyfs` is asked to do.
#[derive(Debug, Clone)]
pub struct Options {
    pub backing: PathBuf,
    pub mount: PathBuf,
    pub control: PathBuf,
    pub crash_after: Option<u64>,
}

/// How a run ended.
#[derive(Debug)]
pub enum Outcome {
    /// A drop reverted the backing folder.
    Dropped(DropReport),
    /// Unmounted without a drop (a signal, or an unmount from outside).
    Unmounted,
}

enum Event {
    Dropped(Dropped),
    Signal,
    /// The FUSE session ended by itself (an unmount from outside, or an error).
    Ended(io::Result<()>),
}

/// Mounts, calls `on_ready` once the mount answers, and serves until the end.
pub fn run(options: &Options, on_ready: impl FnOnce()) -> Result<Outcome, Error> {
    let backing_error = |e| Error::Backing(options.backing.clone(), e);
    let backing = fs::canonicalize(&options.backing).map_err(backing_error)?;
    let tracker = Tracker::open(&backing).map_err(backing_error)?;
    let shared = Shared::new(State {
        gate: Gate::new(options.crash_after),
        tracker,
    });
    // Before mounting: a signal from now on unmounts.
    let mut signals = Signals::new([SIGTERM, SIGINT]).map_err(Error::Signals)?;
    let listener = bind(&options.control)?;
    let filesystem = LossyFs::new(shared.clone()).map_err(backing_error)?;

    let mut config = Config::default();
    config.mount_options = vec![MountOption::FSName("lossyfs".to_string())];
    let mut session = match Session::new(filesystem, &options.mount, &config) {
        Ok(session) => session,
        Err(e) => {
            // Leave the backing folder and the socket's folder as they were.
            let _ = shared.finish();
            let _ = fs::remove_file(&options.control);
            return Err(Error::Mount(options.mount.clone(), e));
        }
    };
    let mut unmounter = session.unmount_callable();

    let (events, next_event) = mpsc::channel();
    let ended = events.clone();
    let session_thread = thread::spawn(move || {
        let _ = ended.send(Event::Ended(session.run()));
    });
    let signalled = events.clone();
    thread::spawn(move || {
        if signals.forever().next().is_some() {
            let _ = signalled.send(Event::Signal);
        }
    });
    let control_state = shared.clone();
    thread::spawn(move || {
        let dropped = control::serve(&listener, &control_state);
        let _ = events.send(Event::Dropped(dropped));
    });
    on_ready();

    let event = next_event.recv().unwrap_or(Event::Ended(Ok(())));
    let _ = fs::remove_file(&options.control);
    let outcome = match event {
        Event::Dropped(Dropped::Done(report)) => Outcome::Dropped(report),
        Event::Dropped(Dropped::Failed(e)) => {
            unmount(&mut unmounter, &options.mount)?;
            return Err(Error::Revert(e));
        }
        Event::Ended(Err(e)) => {
            unmount(&mut unmounter, &options.mount)?;
            return Err(Error::Session(e));
        }
        Event::Signal | Event::Ended(Ok(())) => Outcome::Unmounted,
    };
    if unmount(&mut unmounter, &options.mount)? == Down::Unmounted {
        let _ = session_thread.join();
    }
    if matches!(outcome, Outcome::Unmounted) {
        shared.finish().map_err(Error::Finish)?;
    }
    Ok(outcome)
}

/// Binds the control socket, replacing a stale one.
fn bind(path: &Path) -> Result<UnixListener, Error> {
    let error = |e| Error::Control(path.to_path_buf(), e);
    if let Ok(meta) = fs::symlink_metadata(path) {
        if !meta.file_type().is_socket() {
            return Err(error(io::Error::from(io::ErrorKind::AlreadyExists)));
        }
        fs::remove_file(path).map_err(error)?;
    }
    UnixListener::bind(path).map_err(error)
}

#[derive(Debug, PartialEq, Eq)]
enum Down {
    /// Unmounted: the session ends.
    Unmounted,
    /// Detached while in use: the session goes on until the process exits.
    Detached,
}

/// umount(2), or a lazy unmount if the mount is in use.
fn unmount(unmounter: &mut SessionUnmounter, mount: &Path) -> Result<Down, Error> {
    match unmounter.unmount() {
        Ok(()) => Ok(Down::Unmounted),
        Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
            detach(mount).map_err(|e| Error::Unmount(mount.to_path_buf(), e))?;
            Ok(Down::Detached)
        }
        Err(e) => Err(Error::Unmount(mount.to_path_buf(), e)),
    }
}

/// umount2(MNT_DETACH), what `umount -l` does.
fn detach(mount: &Path) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(mount.as_os_str().as_bytes())?;
    // SAFETY: a valid NUL-terminated path.
    if unsafe { libc::umount2(path.as_ptr(), libc::MNT_DETACH) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
