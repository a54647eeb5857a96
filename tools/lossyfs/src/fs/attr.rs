//! A backing file's metadata as FUSE attributes.

use std::fs::Metadata;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{FileAttr, FileType, INodeNo};

use crate::model::Tracker;

/// How long the kernel may keep attributes and entries: nobody else changes the backing
/// folder while it is mounted.
pub const TTL: Duration = Duration::from_secs(1);

/// The attributes of node `ino`, whose backing metadata is `meta`. Its names waiting in the
/// trash are gone as the mount sees it: they do not count in its link count.
pub fn attr(ino: u64, meta: &Metadata, tracker: &Tracker) -> FileAttr {
    let nlink = meta
        .nlink()
        .saturating_sub(tracker.hidden_links(meta.ino()));
    FileAttr {
        ino: INodeNo(ino),
        size: meta.size(),
        blocks: meta.blocks(),
        atime: time(meta.atime(), meta.atime_nsec()),
        mtime: time(meta.mtime(), meta.mtime_nsec()),
        ctime: time(meta.ctime(), meta.ctime_nsec()),
        crtime: UNIX_EPOCH,
        kind: kind(meta.file_type()),
        perm: (meta.permissions().mode() & 0o7777) as u16,
        nlink: u32::try_from(nlink).unwrap_or(u32::MAX),
        uid: meta.uid(),
        gid: meta.gid(),
        rdev: u32::try_from(meta.rdev()).unwrap_or(0),
        blksize: u32::try_from(meta.blksize()).unwrap_or(4096),
        flags: 0,
    }
}

/// FUSE's kind of a file.
pub fn kind(file_type: std::fs::FileType) -> FileType {
    FileType::from_std(file_type).unwrap_or(FileType::RegularFile)
}

/// A time from stat's seconds and nanoseconds (before 1970 too).
fn time(secs: i64, nanos: i64) -> SystemTime {
    let nanos = Duration::from_nanos(u64::try_from(nanos).unwrap_or(0));
    match u64::try_from(secs) {
        Ok(secs) => UNIX_EPOCH + Duration::from_secs(secs) + nanos,
        Err(_) => UNIX_EPOCH - Duration::from_secs(secs.unsigned_abs()) + nanos,
    }
}
