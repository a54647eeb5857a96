//! One relay per SQLite ledger: two relays on one file each answer from their own view of
//! which claims are in flight and, with a restored or copied file, book twice. The relay
//! holds an exclusive `flock` on `<ledger>.relay.lock` beside the file for its whole life
//! (independent of the POSIX locks SQLite takes on the database file itself), and writes its
//! pid there so that a second relay can name the holder. The batch tools never take it: they
//! run beside the relay. The file is left behind at exit (removing it would race a relay
//! starting at that moment); a stale file without a lock on it is simply taken.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, Write};
use std::path::{Path, PathBuf};

/// The lock, held until dropped (the descriptor's close releases it).
#[derive(Debug)]
pub struct LedgerLock {
    _file: File,
}

/// Why the lock could not be taken.
#[derive(Debug)]
pub enum LockError {
    /// Another process holds it; `holder` is the pid it wrote, if it could be read.
    Held {
        ledger: PathBuf,
        lock: PathBuf,
        holder: Option<String>,
    },
    /// The lock file could not be created, opened or locked.
    Io { lock: PathBuf, source: io::Error },
}

impl fmt::Display for LockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LockError::Held {
                ledger,
                lock,
                holder,
            } => write!(
                f,
                "ledger {} is already in use by another relay ({}, lock {}); two relays on \
                 one SQLite ledger could book a transfer twice",
                ledger.display(),
                holder
                    .as_deref()
                    .map_or("pid unknown".to_string(), |p| format!("pid {p}")),
                lock.display()
            ),
            LockError::Io { lock, source } => {
                write!(f, "cannot take the relay lock {}: {source}", lock.display())
            }
        }
    }
}

impl std::error::Error for LockError {}

/// The lock file of the ledger at `ledger`: `<ledger>.relay.lock`.
pub fn lock_path(ledger: &Path) -> PathBuf {
    let mut p = ledger.as_os_str().to_owned();
    p.push(".relay.lock");
    PathBuf::from(p)
}

impl LedgerLock {
    /// Takes the exclusive lock of `ledger` without waiting, and records this process's pid.
    pub fn take(ledger: &Path) -> Result<LedgerLock, LockError> {
        let lock = lock_path(ledger);
        let io_err = |source| LockError::Io {
            lock: lock.clone(),
            source,
        };
        let mut file = open_private(&lock).map_err(io_err)?;
        if let Err(e) = flock_exclusive(&file) {
            if e.kind() != io::ErrorKind::WouldBlock {
                return Err(io_err(e));
            }
            let mut pid = String::new();
            let holder = file
                .read_to_string(&mut pid)
                .ok()
                .map(|_| pid.trim().to_string())
                .filter(|p| !p.is_empty());
            return Err(LockError::Held {
                ledger: ledger.to_path_buf(),
                lock,
                holder,
            });
        }
        file.set_len(0)
            .and_then(|()| file.rewind())
            .and_then(|()| writeln!(file, "{}", std::process::id()))
            .map_err(io_err)?;
        Ok(LedgerLock { _file: file })
    }
}

/// Opens (creating, owner-only) the lock file, without truncating what a holder wrote.
fn open_private(path: &Path) -> io::Result<File> {
    let mut o = OpenOptions::new();
    o.read(true).write(true).create(true).truncate(false);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.mode(0o600);
    }
    o.open(path)
}

#[cfg(unix)]
fn flock_exclusive(file: &File) -> io::Result<()> {
    use std::os::unix::io::AsRawFd;
    // SAFETY: flock on a descriptor this `File` owns and keeps open.
    let r = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(not(unix))]
fn flock_exclusive(_file: &File) -> io::Result<()> {
    Ok(())
}
