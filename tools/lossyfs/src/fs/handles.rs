//! Open file and directory handles (FUSE's `fh`).

use std::collections::HashMap;
use std::ffi::OsString;
use std::fs::File;

use fuser::{Errno, FileType};

/// One entry of a directory listing.
#[derive(Debug, Clone)]
pub struct DirEntry {
    pub ino: u64,
    pub kind: FileType,
    pub name: OsString,
}

/// What a handle holds.
#[derive(Debug)]
pub enum Handle {
    /// A descriptor of the backing file.
    File(File),
    /// The directory's listing, read at opendir (readdir offsets index it).
    Dir(Vec<DirEntry>),
}

/// The open handles.
#[derive(Debug)]
pub struct Handles {
    open: HashMap<u64, Handle>,
    next: u64,
}

impl Default for Handles {
    fn default() -> Self {
        Self {
            open: HashMap::new(),
            next: 1,
        }
    }
}

impl Handles {
    pub fn insert(&mut self, handle: Handle) -> u64 {
        let fh = self.next;
        self.next += 1;
        self.open.insert(fh, handle);
        fh
    }

    pub fn file(&self, fh: u64) -> Result<&File, Errno> {
        match self.open.get(&fh) {
            Some(Handle::File(file)) => Ok(file),
            Some(Handle::Dir(_)) => Err(Errno::EISDIR),
            None => Err(Errno::EBADF),
        }
    }

    pub fn dir(&self, fh: u64) -> Result<&[DirEntry], Errno> {
        match self.open.get(&fh) {
            Some(Handle::Dir(entries)) => Ok(entries),
            Some(Handle::File(_)) => Err(Errno::ENOTDIR),
            None => Err(Errno::EBADF),
        }
    }

    pub fn remove(&mut self, fh: u64) {
        self.open.remove(&fh);
    }
}
