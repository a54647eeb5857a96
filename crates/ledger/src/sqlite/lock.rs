//! One SQLite ledger file, one relay — and nothing replaces a ledger while anyone uses it.
//!
//! Every lock of a ledger lives in one file beside it, `<canonical>.relay.lock`, named after
//! the ledger's canonical path (symlinks and `..` resolved; for a ledger not made yet, its
//! folder's canonical path and its name), so that every name that reaches the file through
//! the directory tree reaches the same lock: `--db link.db` or `--db dir/../ledger.db` meets
//! the relay that runs on `ledger.db`. The file is created mode 0600 (as root, given to the
//! ledger's owner, so that a relay running as that user can open it later) and is never
//! removed by the relay or the tools (removing it would race whoever opens it next); a stale
//! one is simply locked again.
//!
//! A hard link is a second name the canonical path cannot see: two relays on `a.db` and on
//! `b.db` (one file, two names) would each lock their own lock file and book twice. So a
//! ledger file with more than one name (`st_nlink` above 1) is refused by every relay and
//! tool, naming how many names it has; the operator removes the extra one (the names are
//! counted when a process first locks the ledger, not again for each connection). A dangling
//! symlink as `--db` is refused too: a relay would otherwise create a new, empty ledger
//! wherever it points.
//!
//! Two slots, as Linux open-file-description byte-range locks (`F_OFD_SETLK`, never waiting):
//! they belong to the open file, not to the process, so two opens in one process conflict as
//! two processes do, and closing the descriptor (or the process ending, even by SIGKILL)
//! releases them.
//! - byte 0, "use": every connection that opens the ledger read-write holds it shared for
//!   its life (one descriptor per process and ledger, shared by its connections); `backup
//!   --to` and `restore` take it exclusive, and are refused while anyone uses the ledger.
//! - byte 1, "relay": the relay holds it exclusive for its life, and writes its pid into the
//!   file so that a refusal can name it.
//!
//! An exclusive holder takes both bytes. The ledger's database file itself is never opened
//! here: closing a second descriptor of that file would drop every POSIX lock SQLite holds on
//! it in this process (SQLite's "How To Corrupt", §2.2).
//!
//! Why `fcntl` and not `std::fs::File::try_lock` (issue 41 asked): std's lock is `flock(2)` on
//! the whole file, one slot per file, and cannot say who holds it (`F_OFD_GETLK` names the
//! relay's pid in a refusal). Two lock files with std's lock would do the slots' work, but
//! relays and tools of the version before would lock the old file and not see them during an
//! upgrade on one host: two relays could run on one ledger. So the two `fcntl` calls below
//! stay, each with its SAFETY note.
//!
//! After locking, the taker checks that the path still names the file it locked, and tries
//! again if not: an exclusive holder that created the lock file (a backup onto a file that
//! was no ledger) removes it when it lets go, and whoever opened it just before must not end
//! up holding a lock on a file nobody else can reach.

use std::collections::HashMap;
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use super::access::{self, Denied};

/// Which lock, and so which slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The "use" slot, shared: a read-write connection.
    Shared,
    /// The "relay" slot, exclusive: the one relay.
    Relay,
    /// Both slots, exclusive: nothing else may use the ledger (backup --to, restore).
    Exclusive,
}

/// Who holds what was wanted, as far as the lock file tells.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Holder {
    /// A relay, with the pid it wrote (if it could be read).
    Relay { pid: Option<u32> },
    /// A tool or another program with the ledger open read-write (no relay).
    Tool,
    /// A `backup --to` or `restore` replacing the file.
    Replacing,
}

/// A lock of a ledger, held until dropped.
#[derive(Debug)]
pub struct LedgerLock {
    /// The lock file's descriptor; shared locks of one ledger share it within a process.
    file: Arc<File>,
    lock: PathBuf,
    kind: Kind,
    /// Whether this lock made the file (an exclusive holder then removes it on drop).
    created: bool,
}

/// Why a lock was not taken.
///
/// `Io` returns the system's error as its `source()` (its text is in the message too). No
/// wrapper hands this error on as its own source (`LedgerError::Lock`, `RestoreError::Lock`,
/// `BackupError::TargetLock`, the relay's `StartError::Lock` say it in their message and have
/// no `source()`), so a chain printed by anyhow's `{:#}` (every tool's fatal line) never says
/// the cause twice.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another holder has it. `ledger` is the path as given, `file` its canonical path.
    #[error(fmt = held)]
    Held {
        ledger: PathBuf,
        file: PathBuf,
        lock: PathBuf,
        wanted: Kind,
        by: Holder,
    },
    /// The ledger file has `names` names (hard links).
    #[error(
        "ledger {} has {names} names (hard links): a relay or tool on another name would not \
         see this one's lock, and two relays could book a transfer twice; remove the extra \
         names (find / -samefile {}) and keep one",
        .ledger.display(),
        .file.display()
    )]
    HardLinked {
        ledger: PathBuf,
        file: PathBuf,
        names: u64,
    },
    /// The ledger path is a symlink to nothing.
    #[error(
        "ledger {} is a symlink to {}, which does not exist (check --db)",
        .ledger.display(),
        .target.display()
    )]
    DanglingSymlink { ledger: PathBuf, target: PathBuf },
    /// This process may not use the lock file or a folder on the way.
    #[error(transparent)]
    Denied(Box<Denied>),
    /// A file operation failed (`what` says which) with the system's error.
    #[error("cannot {what} {}: {source}", .path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// The text of `LockError::Held`: who holds what was wanted.
fn held(
    ledger: &Path,
    file: &Path,
    lock: &Path,
    wanted: &Kind,
    by: &Holder,
    f: &mut fmt::Formatter<'_>,
) -> fmt::Result {
    write!(f, "ledger {}", ledger.display())?;
    if file != ledger {
        write!(f, " (the file {})", file.display())?;
    }
    let lock = lock.display();
    match (wanted, by) {
        (_, Holder::Replacing) => write!(
            f,
            " is being replaced (a backup --to or restore holds it, lock {lock}); try again \
             once that is done"
        ),
        (Kind::Relay, Holder::Relay { pid }) => write!(
            f,
            " is already in use by another relay ({}, lock {lock}); two relays on one SQLite \
             ledger could book a transfer twice",
            pid_text(*pid)
        ),
        (_, Holder::Relay { pid }) => {
            write!(f, " is in use by a relay ({}, lock {lock})", pid_text(*pid))
        }
        (_, Holder::Tool) => write!(
            f,
            " is in use (a batch tool or another program has it open, lock {lock})"
        ),
    }
}

fn pid_text(pid: Option<u32>) -> String {
    pid.map_or("pid unknown".into(), |p| format!("pid {p}"))
}

/// The ledger's canonical path: the file's, or for one not made yet its folder's and its
/// name. A dangling symlink is refused.
pub fn canonical(ledger: &Path) -> Result<PathBuf, LockError> {
    match fs::symlink_metadata(ledger) {
        Ok(m) => {
            if m.file_type().is_symlink()
                && fs::metadata(ledger).is_err_and(|e| e.kind() == io::ErrorKind::NotFound)
            {
                return Err(LockError::DanglingSymlink {
                    ledger: ledger.to_path_buf(),
                    target: fs::read_link(ledger).unwrap_or_default(),
                });
            }
            fs::canonicalize(ledger).map_err(|e| path_error("resolve", ledger, e))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let Some(name) = ledger.file_name() else {
                let e = io::Error::new(io::ErrorKind::InvalidInput, "not a file name");
                return Err(path_error("resolve", ledger, e));
            };
            let folder = access::folder_of(ledger);
            let folder =
                fs::canonicalize(&folder).map_err(|e| path_error("resolve", &folder, e))?;
            Ok(folder.join(name))
        }
        Err(e) => Err(path_error("look up", ledger, e)),
    }
}

/// The lock file of the ledger at `ledger`: `<canonical>.relay.lock`.
pub fn lock_path(ledger: &Path) -> Result<PathBuf, LockError> {
    canonical(ledger).map(|c| suffixed(&c))
}

impl LedgerLock {
    /// The "use" slot, shared: held by every read-write connection to the ledger. Refused
    /// only while a backup or restore replaces the file.
    pub fn shared(ledger: &Path) -> Result<LedgerLock, LockError> {
        take(ledger, Kind::Shared)
    }

    /// The "relay" slot, exclusive, with this process's pid written into the lock file:
    /// refused while another relay runs on the same file (under any name).
    pub fn relay(ledger: &Path) -> Result<LedgerLock, LockError> {
        take(ledger, Kind::Relay)
    }

    /// Both slots, exclusive: refused while any relay or tool uses the ledger. For replacing
    /// the file (`backup --to`, `restore`).
    pub fn exclusive(ledger: &Path) -> Result<LedgerLock, LockError> {
        take(ledger, Kind::Exclusive)
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.lock
    }
}

impl Drop for LedgerLock {
    /// An exclusive holder removes the lock file it made (the file it guarded, typically a
    /// backup's target, was no ledger), while it still holds both slots: nobody else holds
    /// a lock on that file then, and whoever opened it meanwhile sees it gone and retries.
    fn drop(&mut self) {
        if self.kind == Kind::Exclusive && self.created {
            let _ = fs::remove_file(&self.lock);
        }
    }
}

/// Bytes of the lock file, each a slot.
const USE: i64 = 0;
const RELAY: i64 = 1;
/// Tries after the lock file was replaced between open and lock (see the module's doc).
const ATTEMPTS: usize = 10;

fn take(ledger: &Path, kind: Kind) -> Result<LedgerLock, LockError> {
    let file = canonical(ledger)?;
    let at = Target {
        ledger,
        file: &file,
        lock: suffixed(&file),
    };
    if kind != Kind::Shared {
        refuse_hard_links(ledger, &file)?;
        return at.take_new(kind);
    }
    // One descriptor per process and ledger for the shared slot: the relay's read pool, its
    // writer and its checkpointer would otherwise hold a lock file each.
    static OPEN: OnceLock<Mutex<HashMap<PathBuf, Weak<File>>>> = OnceLock::new();
    let mut open = OPEN
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(held) = open.get(&at.lock).and_then(Weak::upgrade) {
        return Ok(LedgerLock {
            file: held,
            lock: at.lock,
            kind,
            created: false,
        });
    }
    // Names are counted when a process first takes the ledger: a link made later must not
    // fail the running relay's next pooled connection (a second relay is refused at its start).
    refuse_hard_links(ledger, &file)?;
    let taken = at.take_new(kind)?;
    open.retain(|_, f| f.strong_count() > 0);
    open.insert(taken.lock.clone(), Arc::downgrade(&taken.file));
    Ok(taken)
}

fn refuse_hard_links(ledger: &Path, file: &Path) -> Result<(), LockError> {
    match fs::metadata(file) {
        Ok(m) if m.nlink() > 1 => Err(LockError::HardLinked {
            ledger: ledger.to_path_buf(),
            file: file.to_path_buf(),
            names: m.nlink(),
        }),
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(path_error("look up", file, e)),
    }
}

/// The ledger as given, its canonical path and its lock file.
struct Target<'a> {
    ledger: &'a Path,
    file: &'a Path,
    lock: PathBuf,
}

impl Target<'_> {
    /// Opens the lock file and takes `kind` on a descriptor of its own.
    fn take_new(self, kind: Kind) -> Result<LedgerLock, LockError> {
        for _ in 0..ATTEMPTS {
            let (file, created) = self.open()?;
            let (start, len, how) = match kind {
                Kind::Shared => (USE, 1, libc::F_RDLCK),
                Kind::Relay => (RELAY, 1, libc::F_WRLCK),
                Kind::Exclusive => (USE, 2, libc::F_WRLCK),
            };
            if let Err(e) = set_lock(&file, how, start, len) {
                if !matches!(e.raw_os_error(), Some(libc::EAGAIN | libc::EACCES)) {
                    return Err(io_error("lock", &self.lock, e));
                }
                return Err(LockError::Held {
                    ledger: self.ledger.to_path_buf(),
                    file: self.file.to_path_buf(),
                    by: holder(&file),
                    lock: self.lock,
                    wanted: kind,
                });
            }
            if !self.still_names(&file)? {
                continue; // removed or replaced between the open and the lock
            }
            if kind == Kind::Relay {
                let pid = format!("{}\n", std::process::id());
                file.set_len(0)
                    .and_then(|()| file.write_all_at(pid.as_bytes(), 0))
                    .map_err(|e| io_error("write the pid into", &self.lock, e))?;
            }
            return Ok(LedgerLock {
                file: Arc::new(file),
                lock: self.lock,
                kind,
                created,
            });
        }
        let e = io::Error::other("it was replaced at every attempt");
        Err(io_error("lock", &self.lock, e))
    }

    /// Opens the lock file, creating it (0600; never through a symlink) if it is not there.
    fn open(&self) -> Result<(File, bool), LockError> {
        let options = |create: bool| {
            let mut o = OpenOptions::new();
            o.read(true)
                .write(true)
                .create_new(create)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW);
            o
        };
        loop {
            match options(false).open(&self.lock) {
                Ok(f) => return Ok((f, false)),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(io_error("open", &self.lock, e)),
            }
            match options(true).open(&self.lock) {
                Ok(f) => {
                    self.give_to_ledger_owner(&f);
                    return Ok((f, true));
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {} // made meanwhile
                Err(e) => return Err(io_error("create", &self.lock, e)),
            }
        }
    }

    /// Root making the lock file gives it to whoever owns the ledger (or its folder, for a
    /// new one): the relay, running as that user, must be able to open it afterwards.
    fn give_to_ledger_owner(&self, lock: &File) {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return;
        }
        let owner = fs::metadata(self.file).or_else(|_| fs::metadata(access::folder_of(self.file)));
        if let Ok(m) = owner {
            let _ = std::os::unix::fs::fchown(lock, Some(m.uid()), Some(m.gid()));
        }
    }

    /// Whether the lock file's path still names the file `locked` is open on.
    fn still_names(&self, locked: &File) -> Result<bool, LockError> {
        let mine = locked
            .metadata()
            .map_err(|e| io_error("look up", &self.lock, e))?;
        Ok(match fs::symlink_metadata(&self.lock) {
            Ok(now) => now.dev() == mine.dev() && now.ino() == mine.ino(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => false,
            Err(e) => return Err(io_error("look up", &self.lock, e)),
        })
    }
}

/// Takes a lock (`F_RDLCK` shared, `F_WRLCK` exclusive) on `len` bytes from `start`, never
/// waiting.
fn set_lock(file: &File, how: libc::c_int, start: i64, len: i64) -> io::Result<()> {
    let mut fl = flock(how, start, len);
    // SAFETY: fcntl on a descriptor `file` keeps open, with a pointer to a live local.
    let r = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_SETLK, &mut fl) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Whether another open file holds a lock that would refuse `how` on the given bytes.
fn conflicts(file: &File, how: libc::c_int, start: i64, len: i64) -> bool {
    let mut fl = flock(how, start, len);
    // SAFETY: as in `set_lock`; F_OFD_GETLK only writes into `fl`.
    let r = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_GETLK, &mut fl) };
    r == 0 && fl.l_type != libc::F_UNLCK as libc::c_short
}

fn flock(how: libc::c_int, start: i64, len: i64) -> libc::flock {
    // SAFETY: `flock` is plain data; all-zero is a valid value (and l_pid must be 0 here).
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = how as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = start;
    fl.l_len = len;
    fl
}

/// Who holds the lock that refused us (asked on our descriptor, which holds none): a write
/// lock on "use" is a replacer's; one on "relay" a relay's, whose pid the file holds; else
/// readers of "use" (tools, or a relay's connections).
fn holder(file: &File) -> Holder {
    if conflicts(file, libc::F_RDLCK, USE, 1) {
        return Holder::Replacing;
    }
    if conflicts(file, libc::F_WRLCK, RELAY, 1) {
        let mut buf = [0u8; 32];
        let n = file.read_at(&mut buf, 0).unwrap_or(0);
        let pid = std::str::from_utf8(&buf[..n])
            .ok()
            .and_then(|s| s.trim().parse().ok());
        return Holder::Relay { pid };
    }
    Holder::Tool
}

fn suffixed(file: &Path) -> PathBuf {
    let mut p = file.as_os_str().to_owned();
    p.push(".relay.lock");
    PathBuf::from(p)
}

/// An error on the lock file: permission denied is examined (`access`) to name its cause.
fn io_error(what: &'static str, lock: &Path, source: io::Error) -> LockError {
    if source.kind() == io::ErrorKind::PermissionDenied
        && let Some(d) = access::lock_file(lock)
    {
        return LockError::Denied(Box::new(d));
    }
    LockError::Io {
        what,
        path: lock.to_path_buf(),
        source,
    }
}

/// An error on the ledger's path or a folder on the way.
fn path_error(what: &'static str, path: &Path, source: io::Error) -> LockError {
    if source.kind() == io::ErrorKind::PermissionDenied
        && let Some(d) = access::reach(path)
    {
        return LockError::Denied(Box::new(d));
    }
    LockError::Io {
        what,
        path: path.to_path_buf(),
        source,
    }
}

#[cfg(test)]
mod tests;
