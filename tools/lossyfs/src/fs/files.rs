//! File operations: attributes, open, read, write (through the model), fsync, release.

use std::ffi::CString;
use std::fs::{self, OpenOptions};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use fuser::{Errno, FileAttr, OpenAccMode, OpenFlags, TimeOrNow};

use super::LossyFs;
use super::attr::attr;
use super::handles::Handle;
use crate::gate::Mutation;
use crate::model::read_up_to;

/// The attribute changes of a setattr that lossyfs carries out.
#[derive(Debug, Default)]
pub(super) struct SetAttr {
    pub mode: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub size: Option<u64>,
    pub atime: Option<TimeOrNow>,
    pub mtime: Option<TimeOrNow>,
}

impl LossyFs {
    pub(super) fn do_getattr(&self, ino: u64, fh: Option<u64>) -> Result<FileAttr, Errno> {
        let (local, state) = self.lock();
        state.gate.check()?;
        let meta = match fh.map(|fh| local.handles.file(fh)) {
            Some(Ok(file)) => file.metadata()?,
            _ => {
                let rel = local.inodes.path(ino).ok_or(Errno::ENOENT)?;
                fs::symlink_metadata(self.root.join(rel))?
            }
        };
        Ok(attr(ino, &meta, &state.tracker))
    }

    pub(super) fn do_setattr(
        &self,
        ino: u64,
        fh: Option<u64>,
        set: &SetAttr,
    ) -> Result<FileAttr, Errno> {
        let (local, mut state) = self.lock();
        match set.size {
            Some(_) => state.gate.admit(Mutation::Truncate)?,
            None => state.gate.check()?,
        }
        let abs = self.root.join(local.inodes.path(ino).ok_or(Errno::ENOENT)?);
        if let Some(size) = set.size {
            match fh.map(|fh| local.handles.file(fh)) {
                Some(Ok(file)) => state.tracker.truncate(file, size)?,
                _ => {
                    let file = OpenOptions::new().read(true).write(true).open(&abs)?;
                    state.tracker.truncate(&file, size)?;
                }
            }
        }
        if let Some(mode) = set.mode {
            fs::set_permissions(&abs, fs::Permissions::from_mode(mode & 0o7777))?;
        }
        if set.uid.is_some() || set.gid.is_some() {
            std::os::unix::fs::lchown(&abs, set.uid, set.gid)?;
        }
        if set.atime.is_some() || set.mtime.is_some() {
            set_times(&abs, set.atime, set.mtime)?;
        }
        Ok(attr(ino, &fs::symlink_metadata(&abs)?, &state.tracker))
    }

    /// Opens the backing file (for reading and writing if writing is asked: the model reads
    /// a block before it changes it; never O_APPEND: the kernel gives the offsets).
    pub(super) fn do_open(&self, ino: u64, flags: OpenFlags) -> Result<u64, Errno> {
        let (mut local, state) = self.lock();
        state.gate.check()?;
        let abs = self.root.join(local.inodes.path(ino).ok_or(Errno::ENOENT)?);
        let writable = flags.acc_mode() != OpenAccMode::O_RDONLY;
        let file = OpenOptions::new()
            .read(true)
            .write(writable)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&abs)?;
        if file.metadata()?.is_dir() {
            return Err(Errno::EISDIR);
        }
        Ok(local.handles.insert(Handle::File(file)))
    }

    pub(super) fn do_read(&self, fh: u64, offset: u64, size: u32) -> Result<Vec<u8>, Errno> {
        let (local, state) = self.lock();
        state.gate.check()?;
        let file = local.handles.file(fh)?;
        Ok(read_up_to(file, offset, u64::from(size))?)
    }

    pub(super) fn do_write(&self, fh: u64, offset: u64, data: &[u8]) -> Result<u32, Errno> {
        let (local, mut state) = self.lock();
        state.gate.admit(Mutation::Write)?;
        let file = local.handles.file(fh)?;
        state.tracker.write(file, offset, data)?;
        u32::try_from(data.len()).map_err(|_| Errno::EINVAL)
    }

    /// fsync and fdatasync alike: all of the file's data is durable.
    pub(super) fn do_fsync(&self, fh: u64) -> Result<(), Errno> {
        let (local, mut state) = self.lock();
        state.gate.admit(Mutation::Fsync)?;
        let file = local.handles.file(fh)?;
        Ok(state.tracker.fsync(file)?)
    }

    /// flush (each close): nothing to do, but it fails once frozen.
    pub(super) fn do_flush(&self) -> Result<(), Errno> {
        Ok(self.shared.lock().gate.check()?)
    }

    /// release and releasedir: the handle goes, frozen or not.
    pub(super) fn do_release(&self, fh: u64) {
        self.local().handles.remove(fh);
    }
}

/// utimensat(2) on `path`, leaving alone what is not given.
fn set_times(path: &Path, atime: Option<TimeOrNow>, mtime: Option<TimeOrNow>) -> io::Result<()> {
    let times = [timespec(atime), timespec(mtime)];
    let path = CString::new(path.as_os_str().as_bytes())?;
    // SAFETY: a valid NUL-terminated path and an array of two timespecs.
    let rc = unsafe {
        libc::utimensat(
            libc::AT_FDCWD,
            path.as_ptr(),
            times.as_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn timespec(time: Option<TimeOrNow>) -> libc::timespec {
    let (tv_sec, tv_nsec) = match time {
        None => (0, libc::UTIME_OMIT),
        Some(TimeOrNow::Now) => (0, libc::UTIME_NOW),
        Some(TimeOrNow::SpecificTime(time)) => since_epoch(time),
    };
    libc::timespec { tv_sec, tv_nsec }
}

fn since_epoch(time: SystemTime) -> (libc::time_t, libc::c_long) {
    match time.duration_since(UNIX_EPOCH) {
        Ok(d) => (
            d.as_secs() as libc::time_t,
            libc::c_long::from(d.subsec_nanos()),
        ),
        Err(e) => {
            let d = e.duration();
            let (secs, nanos) = (
                d.as_secs() as libc::time_t,
                libc::c_long::from(d.subsec_nanos()),
            );
            if nanos == 0 {
                (-secs, 0)
            } else {
                (-secs - 1, 1_000_000_000 - nanos)
            }
        }
    }
}
