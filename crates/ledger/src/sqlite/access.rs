//! Why a path that exists cannot be used by this process. SQLite says only "unable to open
//! database file" for a ledger it may not read, and `Path::exists` answers false for a file
//! behind a folder this user may not enter: both would send an operator looking for a file
//! that is there. When an open fails, the path is examined here instead — each folder on the
//! way, then the file and what must be created beside it — and the first thing this process's
//! user may not do is named, with its owner, its mode and the user the process runs as.
//!
//! Only a real refusal is reported (`EACCES` from `faccessat` with the effective ids): when
//! nothing is denied, the caller keeps the error it had. Root passes these checks for read
//! and write whatever the mode, so for root the original error stands.

use std::ffi::{CStr, CString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::error::LedgerError;

/// A path this process may not use as it needs to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "permission denied: {what} {} cannot be {need} by user {user}, as which this process runs \
     (owner {owner}, mode {:04o}); run it as that owner or fix the permissions",
    .path.display(),
    .mode & 0o7777
)]
pub struct Denied {
    /// The path refused: the ledger, one of its companion files, or a folder.
    pub path: PathBuf,
    /// What it is, for the message ("the ledger", "the folder", …).
    pub what: &'static str,
    /// What this process cannot do with it ("read and written", …).
    pub need: &'static str,
    /// Its owner and group, by name where the system knows them.
    pub owner: String,
    /// Its permission bits.
    pub mode: u32,
    /// The user this process runs as (its effective uid).
    pub user: String,
}

/// The first folder on the way to `path` that this process may not enter, if any (what
/// makes a `stat` of `path` fail with "permission denied").
pub fn reach(path: &Path) -> Option<Denied> {
    let abs = absolute(path);
    let mut folders: Vec<&Path> = abs.ancestors().skip(1).collect();
    folders.reverse();
    folders.into_iter().find_map(|d| {
        refused(
            d,
            libc::X_OK,
            "the folder",
            "entered (no search permission)",
        )
    })
}

/// Why the ledger at `path` cannot be opened for reading and writing: a folder on the way,
/// the file itself, its -wal or -shm file, or (for one of them still to be made) its folder.
pub fn ledger(path: &Path) -> Option<Denied> {
    reach(path)
        .or_else(|| read_write_or_create(path, "the ledger", NEW_LEDGER))
        .or_else(|| read_write_or_create(&suffixed(path, "-wal"), COMPANION, NEW_COMPANION))
        .or_else(|| read_write_or_create(&suffixed(path, "-shm"), COMPANION, NEW_COMPANION))
}

/// Why the ledger at `path` cannot be read (a backup's source).
pub fn readable(path: &Path) -> Option<Denied> {
    reach(path).or_else(|| refused(path, libc::R_OK, "the ledger", "read"))
}

/// Why the lock file at `path` cannot be opened for reading and writing, or created.
pub fn lock_file(path: &Path) -> Option<Denied> {
    reach(path).or_else(|| {
        read_write_or_create(
            path,
            "the lock file",
            "written (the ledger's lock file must be created in it)",
        )
    })
}

const NEW_LEDGER: &str = "written (a new ledger must be created in it)";
const COMPANION: &str = "the ledger's companion file";
const NEW_COMPANION: &str = "written (SQLite creates the ledger's -wal and -shm files in it)";

/// Whether the ledger at `path` is there. A file behind a folder this user may not enter is
/// said to be that, not missing; a symlink to nothing is refused, naming where it points.
pub(crate) fn exists(path: &Path) -> Result<bool, LedgerError> {
    match std::fs::metadata(path) {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => Err(not_reached(path, e)),
        Err(_) => {
            super::lock::canonical(path).map_err(|e| LedgerError::Lock(Box::new(e)))?;
            Ok(false)
        }
    }
}

/// `stat` of `path` was refused: the folder on the way this user may not enter, named.
pub(crate) fn not_reached(path: &Path, e: io::Error) -> LedgerError {
    match reach(path) {
        Some(denied) => LedgerError::Denied(Box::new(denied)),
        None => LedgerError::BadPath {
            path: path.to_path_buf(),
            why: format!("cannot look it up: {e}"),
        },
    }
}

/// `path` read and written if it exists (`what` names it); else its folder must take a new
/// file (`made` says which, for the message).
fn read_write_or_create(path: &Path, what: &'static str, made: &'static str) -> Option<Denied> {
    match std::fs::symlink_metadata(path) {
        Ok(_) => refused(path, libc::R_OK | libc::W_OK, what, "read and written"),
        Err(e) if e.kind() == io::ErrorKind::NotFound => refused(
            &folder_of(path),
            libc::W_OK | libc::X_OK,
            "the folder",
            made,
        ),
        Err(_) => None,
    }
}

/// `Some` when this process's effective ids are refused `mode` on `path` (`EACCES`).
fn refused(
    path: &Path,
    mode: libc::c_int,
    what: &'static str,
    need: &'static str,
) -> Option<Denied> {
    let c = CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: a NUL-terminated path that lives across the call; no pointer is kept.
    let r = unsafe { libc::faccessat(libc::AT_FDCWD, c.as_ptr(), mode, libc::AT_EACCESS) };
    if r == 0 || io::Error::last_os_error().raw_os_error() != Some(libc::EACCES) {
        return None;
    }
    let meta = std::fs::metadata(path).ok()?;
    Some(Denied {
        path: path.to_path_buf(),
        what,
        need,
        owner: format!("{}:{}", user_name(meta.uid()), group_name(meta.gid())),
        mode: meta.mode(),
        user: process_user(),
    })
}

/// The user this process runs as: its name and uid.
pub fn process_user() -> String {
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    format!("{} (uid {uid})", user_name(uid))
}

/// The name of user `uid`, or the number if the system has no entry for it.
pub fn user_name(uid: u32) -> String {
    lookup(|buf, len| {
        // SAFETY: every pointer points at a live local of the right type; `buf` holds `len`
        // bytes; the result points into `pwd`/`buf`, read before they go.
        unsafe {
            let mut pwd: libc::passwd = std::mem::zeroed();
            let mut found = std::ptr::null_mut();
            let r = libc::getpwuid_r(uid, &mut pwd, buf, len, &mut found);
            (r, (!found.is_null()).then(|| name_of(pwd.pw_name)))
        }
    })
    .unwrap_or_else(|| uid.to_string())
}

/// The name of group `gid`, or the number.
fn group_name(gid: u32) -> String {
    lookup(|buf, len| {
        // SAFETY: as in `user_name`.
        unsafe {
            let mut grp: libc::group = std::mem::zeroed();
            let mut found = std::ptr::null_mut();
            let r = libc::getgrgid_r(gid, &mut grp, buf, len, &mut found);
            (r, (!found.is_null()).then(|| name_of(grp.gr_name)))
        }
    })
    .unwrap_or_else(|| gid.to_string())
}

/// Runs a `get*_r` lookup with a buffer that grows while it is too small (`ERANGE`).
fn lookup(
    mut f: impl FnMut(*mut libc::c_char, usize) -> (libc::c_int, Option<String>),
) -> Option<String> {
    let mut buf = vec![0 as libc::c_char; 1024];
    loop {
        let (r, name) = f(buf.as_mut_ptr(), buf.len());
        if r == libc::ERANGE && buf.len() < 1 << 20 {
            buf.resize(buf.len() * 2, 0);
            continue;
        }
        return name;
    }
}

/// # Safety
/// `p` is null or a NUL-terminated string alive for the call.
unsafe fn name_of(p: *const libc::c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: as the caller promises.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

fn absolute(path: &Path) -> PathBuf {
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|d| d.join(path))
            .unwrap_or_else(|_| path.to_path_buf())
    }
}

/// The folder `path` is in (`.` for a bare file name).
pub(crate) fn folder_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

fn suffixed(path: &Path, suffix: &str) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(suffix);
    PathBuf::from(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_come_from_the_user_database() {
        assert_eq!(user_name(0), "root");
        // An id without an entry is shown as its number.
        assert_eq!(user_name(4_000_000_123), "4000000123");
        assert!(process_user().contains("(uid "));
    }

    #[test]
    fn nothing_is_denied_on_a_file_of_ones_own() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("l.db");
        std::fs::write(&p, b"x").unwrap();
        assert_eq!(ledger(&p), None);
        assert_eq!(lock_file(&dir.path().join("l.db.relay.lock")), None);
        assert_eq!(readable(&p), None);
    }

    /// Unprivileged only: root may read and write whatever the mode says.
    #[test]
    fn an_unreadable_file_is_named_with_its_owner_and_mode() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("l.db");
        std::fs::write(&p, b"x").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o000)).unwrap();
        if std::fs::File::open(&p).is_ok() {
            return; // root: nothing to deny
        }
        let d = ledger(&p).expect("denied");
        assert_eq!(d.path, p);
        assert_eq!(d.mode & 0o777, 0);
        let text = d.to_string();
        assert!(text.starts_with("permission denied: the ledger "), "{text}");
        assert!(
            text.contains(&user_name(unsafe { libc::geteuid() })),
            "{text}"
        );
    }
}
