//! The trash folder: where a removed or replaced entry waits, under a fresh name, until its
//! removal is durable (then it is deleted for good) or undone (then it is moved back).

use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The folder's name inside the backing folder; the mount never shows it.
pub const TRASH_NAME: &str = ".lossyfs-trash";

/// The trash folder of one backing folder.
#[derive(Debug)]
pub(super) struct Trash {
    dir: PathBuf,
    next: u64,
}

impl Trash {
    /// Makes an empty trash folder in `root`. One left behind by an earlier run holds nothing
    /// that can still be put back (that run's model is gone), so it is removed first.
    pub(super) fn open(root: &Path) -> io::Result<Self> {
        let dir = root.join(TRASH_NAME);
        match fs::remove_dir_all(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        fs::create_dir(&dir)?;
        Ok(Self { dir, next: 0 })
    }

    /// Moves the entry at `abs` into the trash; returns its name there.
    pub(super) fn stash(&mut self, abs: &Path) -> io::Result<String> {
        self.next += 1;
        let name = self.next.to_string();
        fs::rename(abs, self.dir.join(&name))?;
        Ok(name)
    }

    /// Moves the entry `name` back to `abs`.
    pub(super) fn restore(&self, name: &str, abs: &Path) -> io::Result<()> {
        fs::rename(self.dir.join(name), abs)
    }

    /// Deletes the entry `name` for good. Returns whether its inode went with it (false for
    /// a file that still has a name outside the trash, or another one in it: a hard link).
    pub(super) fn purge(&self, name: &str) -> io::Result<bool> {
        let path = self.dir.join(name);
        let meta = match fs::symlink_metadata(&path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(true),
            Err(e) => return Err(e),
        };
        let result = if meta.is_dir() {
            fs::remove_dir_all(&path)
        } else {
            fs::remove_file(&path)
        };
        match result {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(meta.is_dir() || meta.nlink() <= 1),
        }
    }

    /// Removes the trash folder and all it holds.
    pub(super) fn clear(&self) -> io::Result<()> {
        match fs::remove_dir_all(&self.dir) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            other => other,
        }
    }
}
