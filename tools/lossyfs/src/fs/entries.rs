//! Names: lookup, and the directory operations (each carried out by the model).

use std::ffi::OsStr;
use std::fs;
use std::os::unix::fs::MetadataExt;

use fuser::{Errno, FileAttr, RenameFlags};

use super::LossyFs;
use super::attr::attr;
use super::handles::Handle;
use super::inodes::Inodes;
use crate::gate::Mutation;

impl LossyFs {
    pub(super) fn do_lookup(&self, parent: u64, name: &OsStr) -> Result<FileAttr, Errno> {
        let (mut local, state) = self.lock();
        state.gate.check()?;
        if Inodes::is_trash(parent, name) {
            return Err(Errno::ENOENT);
        }
        let rel = local.inodes.child(parent, name).ok_or(Errno::ENOENT)?;
        let meta = fs::symlink_metadata(self.root.join(rel))?;
        let ino = local.inodes.remember(parent, name, meta.ino());
        Ok(attr(ino, &meta, &state.tracker))
    }

    pub(super) fn do_mkdir(&self, parent: u64, name: &OsStr, mode: u32) -> Result<FileAttr, Errno> {
        let (mut local, mut state) = self.lock();
        state.gate.admit(Mutation::Mkdir)?;
        let rel = local.inodes.child(parent, name).ok_or(Errno::ENOENT)?;
        state.tracker.mkdir(&rel, mode)?;
        let meta = fs::symlink_metadata(self.root.join(rel))?;
        let ino = local.inodes.remember(parent, name, meta.ino());
        Ok(attr(ino, &meta, &state.tracker))
    }

    /// Creates and opens a regular file; returns its attributes and its handle.
    pub(super) fn do_create(
        &self,
        parent: u64,
        name: &OsStr,
        mode: u32,
        exclusive: bool,
    ) -> Result<(FileAttr, u64), Errno> {
        let (mut local, mut state) = self.lock();
        state.gate.admit(Mutation::Create)?;
        let rel = local.inodes.child(parent, name).ok_or(Errno::ENOENT)?;
        let (file, _) = state.tracker.create(&rel, mode, exclusive)?;
        let meta = file.metadata()?;
        let ino = local.inodes.remember(parent, name, meta.ino());
        let fh = local.handles.insert(Handle::File(file));
        Ok((attr(ino, &meta, &state.tracker), fh))
    }

    /// mknod: regular files only (all SQLite needs); anything else is refused.
    pub(super) fn do_mknod(&self, parent: u64, name: &OsStr, mode: u32) -> Result<FileAttr, Errno> {
        if mode & libc::S_IFMT != libc::S_IFREG {
            return Err(Errno::EPERM);
        }
        let (mut local, mut state) = self.lock();
        state.gate.admit(Mutation::Create)?;
        let rel = local.inodes.child(parent, name).ok_or(Errno::ENOENT)?;
        let (file, _) = state.tracker.create(&rel, mode, true)?;
        let meta = file.metadata()?;
        let ino = local.inodes.remember(parent, name, meta.ino());
        Ok(attr(ino, &meta, &state.tracker))
    }

    /// A hard link: the new name `new_name` in `new_parent` for node `ino`, which keeps its
    /// node id (the kernel expects it) and now counts one more link.
    pub(super) fn do_link(
        &self,
        ino: u64,
        new_parent: u64,
        new_name: &OsStr,
    ) -> Result<FileAttr, Errno> {
        let (mut local, mut state) = self.lock();
        state.gate.admit(Mutation::Link)?;
        if Inodes::is_trash(new_parent, new_name) {
            return Err(Errno::EEXIST);
        }
        let from = local.inodes.path(ino).ok_or(Errno::ENOENT)?;
        let to = local
            .inodes
            .child(new_parent, new_name)
            .ok_or(Errno::ENOENT)?;
        state.tracker.link(&from, &to)?;
        let meta = fs::symlink_metadata(self.root.join(to))?;
        if !local.inodes.linked(ino, new_parent, new_name) {
            return Err(Errno::ENOENT);
        }
        Ok(attr(ino, &meta, &state.tracker))
    }

    pub(super) fn do_unlink(&self, parent: u64, name: &OsStr) -> Result<(), Errno> {
        let (mut local, mut state) = self.lock();
        state.gate.admit(Mutation::Unlink)?;
        let rel = local.inodes.child(parent, name).ok_or(Errno::ENOENT)?;
        let stashed = state.tracker.unlink(&rel)?;
        local
            .inodes
            .unlinked(stashed.ino, (parent, name), &stashed.name);
        Ok(())
    }

    pub(super) fn do_rmdir(&self, parent: u64, name: &OsStr) -> Result<(), Errno> {
        let (mut local, mut state) = self.lock();
        state.gate.admit(Mutation::Rmdir)?;
        let rel = local.inodes.child(parent, name).ok_or(Errno::ENOENT)?;
        let stashed = state.tracker.rmdir(&rel)?;
        local
            .inodes
            .unlinked(stashed.ino, (parent, name), &stashed.name);
        Ok(())
    }

    /// rename and rename2 with RENAME_NOREPLACE; RENAME_EXCHANGE and RENAME_WHITEOUT are
    /// refused (EINVAL).
    pub(super) fn do_rename(
        &self,
        (parent, name): (u64, &OsStr),
        (new_parent, new_name): (u64, &OsStr),
        flags: RenameFlags,
    ) -> Result<(), Errno> {
        if !(flags - RenameFlags::RENAME_NOREPLACE).is_empty() {
            return Err(Errno::EINVAL);
        }
        let (mut local, mut state) = self.lock();
        state.gate.admit(Mutation::Rename)?;
        let from = local.inodes.child(parent, name).ok_or(Errno::ENOENT)?;
        let to = local
            .inodes
            .child(new_parent, new_name)
            .ok_or(Errno::ENOENT)?;
        let noreplace = flags.contains(RenameFlags::RENAME_NOREPLACE);
        let renamed = state.tracker.rename(&from, &to, noreplace)?;
        if let Some(replaced) = &renamed.replaced {
            local
                .inodes
                .unlinked(replaced.ino, (new_parent, new_name), &replaced.name);
        }
        if renamed.moved {
            local
                .inodes
                .renamed(renamed.ino, (parent, name), (new_parent, new_name));
        }
        Ok(())
    }
}
