//! Directory operations: listing, fsyncdir, statfs, access.

use std::ffi::{CString, OsString};
use std::fs;
use std::io;
use std::mem::MaybeUninit;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::DirEntryExt;

use fuser::{Errno, FileType};

use super::LossyFs;
use super::attr::kind;
use super::handles::{DirEntry, Handle};
use super::inodes::{Inodes, ROOT};
use crate::gate::Mutation;

impl LossyFs {
    /// Reads the directory's listing once ("." and ".." first, never the trash folder).
    pub(super) fn do_opendir(&self, ino: u64) -> Result<u64, Errno> {
        let (mut local, state) = self.lock();
        state.gate.check()?;
        let abs = self.root.join(local.inodes.path(ino).ok_or(Errno::ENOENT)?);
        if !fs::metadata(&abs)?.is_dir() {
            return Err(Errno::ENOTDIR);
        }
        let parent = local.inodes.parent(ino).unwrap_or(ROOT);
        let mut entries = vec![
            DirEntry {
                ino,
                kind: FileType::Directory,
                name: OsString::from("."),
            },
            DirEntry {
                ino: parent,
                kind: FileType::Directory,
                name: OsString::from(".."),
            },
        ];
        for entry in fs::read_dir(&abs)? {
            let entry = entry?;
            let name = entry.file_name();
            if Inodes::is_trash(ino, &name) {
                continue;
            }
            let backing = entry.ino();
            let ino = local.inodes.known(backing).unwrap_or(backing);
            entries.push(DirEntry {
                ino,
                kind: kind(entry.file_type()?),
                name,
            });
        }
        Ok(local.handles.insert(Handle::Dir(entries)))
    }

    /// The listing from `offset` on (an offset is the index of the next entry).
    pub(super) fn do_readdir(&self, fh: u64, offset: u64) -> Result<Vec<DirEntry>, Errno> {
        let (local, state) = self.lock();
        state.gate.check()?;
        let entries = local.handles.dir(fh)?;
        let from = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(entries.len());
        Ok(entries[from..].to_vec())
    }

    pub(super) fn do_fsyncdir(&self, ino: u64) -> Result<(), Errno> {
        let (mut local, mut state) = self.lock();
        state.gate.admit(Mutation::Fsyncdir)?;
        let rel = local.inodes.path(ino).ok_or(Errno::ENOENT)?;
        for backing in state.tracker.fsyncdir(&rel)? {
            local.inodes.dead(backing);
        }
        Ok(())
    }

    pub(super) fn do_statfs(&self) -> Result<libc::statvfs, Errno> {
        self.shared.lock().gate.check()?;
        let path = c_path(&self.root)?;
        let mut stat = MaybeUninit::<libc::statvfs>::uninit();
        // SAFETY: a valid NUL-terminated path and room for one statvfs.
        if unsafe { libc::statvfs(path.as_ptr(), stat.as_mut_ptr()) } != 0 {
            return Err(io::Error::last_os_error().into());
        }
        // SAFETY: statvfs succeeded, so it filled the struct.
        Ok(unsafe { stat.assume_init() })
    }

    pub(super) fn do_access(&self, ino: u64, mask: i32) -> Result<(), Errno> {
        let (local, state) = self.lock();
        state.gate.check()?;
        let abs = self.root.join(local.inodes.path(ino).ok_or(Errno::ENOENT)?);
        if mask == libc::F_OK {
            fs::symlink_metadata(&abs)?;
            return Ok(());
        }
        let path = c_path(&abs)?;
        // SAFETY: a valid NUL-terminated path.
        if unsafe { libc::access(path.as_ptr(), mask) } != 0 {
            return Err(io::Error::last_os_error().into());
        }
        Ok(())
    }
}

fn c_path(path: &std::path::Path) -> Result<CString, Errno> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| Errno::EINVAL)
}
