//! The directory operations: each is carried out on the backing folder and recorded in the
//! journal until an fsyncdir makes it durable. A removed or replaced entry goes to the trash
//! (so that it can be put back) and is deleted for good once its removal is durable.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path};

use super::Tracker;
use super::journal::{EntryOp, Stashed};
use super::trash::TRASH_NAME;

/// What a rename did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Renamed {
    /// The inode number of the entry that moved.
    pub ino: u64,
    /// The entry it replaced, now in the trash.
    pub replaced: Option<Stashed>,
    /// False when `from` and `to` were already names of the same file: then nothing
    /// changed (rename(2)'s rule), both names stay.
    pub moved: bool,
}

impl Tracker {
    /// Creates the regular file `rel` with permissions `mode` and opens it for reading and
    /// writing. An existing file is opened instead unless `exclusive`. Returns the file and
    /// whether it was created.
    pub fn create(&mut self, rel: &Path, mode: u32, exclusive: bool) -> io::Result<(File, bool)> {
        check(rel)?;
        let abs = self.root.join(rel);
        let mut options = OpenOptions::new();
        options
            .read(true)
            .write(true)
            .custom_flags(libc::O_NOFOLLOW);
        match options.clone().create_new(true).mode(mode).open(&abs) {
            Ok(file) => {
                // The process umask is not the caller's: set exactly what was asked.
                file.set_permissions(fs::Permissions::from_mode(mode & 0o7777))?;
                self.next_seq();
                let dir = self.dir_ino(rel)?;
                self.journal.record(
                    EntryOp::Create {
                        path: rel.to_path_buf(),
                    },
                    vec![dir],
                );
                Ok((file, true))
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && !exclusive => {
                Ok((options.open(&abs)?, false))
            }
            Err(e) => Err(e),
        }
    }

    /// Creates the directory `rel` with permissions `mode`.
    pub fn mkdir(&mut self, rel: &Path, mode: u32) -> io::Result<()> {
        check(rel)?;
        let abs = self.root.join(rel);
        fs::create_dir(&abs)?;
        fs::set_permissions(&abs, fs::Permissions::from_mode(mode & 0o7777))?;
        self.next_seq();
        let dir = self.dir_ino(rel)?;
        self.journal.record(
            EntryOp::Mkdir {
                path: rel.to_path_buf(),
            },
            vec![dir],
        );
        Ok(())
    }

    /// Gives the file `from` (not a directory) the new name `to`, which must not exist: a
    /// directory operation in `to`'s directory, undone by removing `to`.
    pub fn link(&mut self, from: &Path, to: &Path) -> io::Result<()> {
        check(from)?;
        check(to)?;
        fs::hard_link(self.root.join(from), self.root.join(to))?;
        self.next_seq();
        let dir = self.dir_ino(to)?;
        self.journal.record(
            EntryOp::Link {
                path: to.to_path_buf(),
            },
            vec![dir],
        );
        Ok(())
    }

    /// Removes the non-directory `rel` (into the trash).
    pub fn unlink(&mut self, rel: &Path) -> io::Result<Stashed> {
        check(rel)?;
        let abs = self.root.join(rel);
        if fs::symlink_metadata(&abs)?.is_dir() {
            return Err(io::Error::from_raw_os_error(libc::EISDIR));
        }
        let stashed = self.stash(&abs)?;
        let dir = self.dir_ino(rel)?;
        let path = rel.to_path_buf();
        self.journal.record(
            EntryOp::Unlink {
                path,
                stashed: stashed.clone(),
            },
            vec![dir],
        );
        Ok(stashed)
    }

    /// Removes the empty directory `rel` (into the trash).
    pub fn rmdir(&mut self, rel: &Path) -> io::Result<Stashed> {
        check(rel)?;
        let abs = self.root.join(rel);
        if !fs::symlink_metadata(&abs)?.is_dir() {
            return Err(io::Error::from_raw_os_error(libc::ENOTDIR));
        }
        if fs::read_dir(&abs)?.next().is_some() {
            return Err(io::Error::from_raw_os_error(libc::ENOTEMPTY));
        }
        let stashed = self.stash(&abs)?;
        let dir = self.dir_ino(rel)?;
        let path = rel.to_path_buf();
        self.journal.record(
            EntryOp::Rmdir {
                path,
                stashed: stashed.clone(),
            },
            vec![dir],
        );
        Ok(stashed)
    }

    /// Renames `from` to `to`; an entry at `to` is replaced (into the trash) unless
    /// `noreplace`, which fails with EEXIST instead.
    pub fn rename(&mut self, from: &Path, to: &Path, noreplace: bool) -> io::Result<Renamed> {
        check(from)?;
        check(to)?;
        let (abs_from, abs_to) = (self.root.join(from), self.root.join(to));
        let source = fs::symlink_metadata(&abs_from)?;
        let target = match fs::symlink_metadata(&abs_to) {
            Ok(meta) => Some(meta),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(e),
        };
        if let Some(target) = &target {
            if noreplace {
                return Err(io::Error::from_raw_os_error(libc::EEXIST));
            }
            if target.ino() == source.ino() {
                return Ok(Renamed {
                    ino: source.ino(),
                    replaced: None,
                    moved: false,
                });
            }
            check_replace(&source, target, &abs_to)?;
        }
        let replaced = match target {
            Some(_) => Some(self.stash(&abs_to)?),
            None => None,
        };
        if let Err(e) = fs::rename(&abs_from, &abs_to) {
            if let Some(stashed) = &replaced {
                self.trash.restore(&stashed.name, &abs_to)?;
                self.untrashed(stashed.ino);
            }
            return Err(e);
        }
        self.next_seq();
        let dirs = vec![self.dir_ino(from)?, self.dir_ino(to)?];
        let op = EntryOp::Rename {
            from: from.to_path_buf(),
            to: to.to_path_buf(),
            replaced: replaced.clone(),
        };
        self.journal.record(op, dirs);
        Ok(Renamed {
            ino: source.ino(),
            replaced,
            moved: true,
        })
    }

    /// An fsyncdir of the directory `rel`: the directory operations up to the last one in it
    /// are durable; what they removed is deleted for good. Returns the inode numbers of the
    /// files so deleted (not those that keep another name: hard links).
    pub fn fsyncdir(&mut self, rel: &Path) -> io::Result<Vec<u64>> {
        self.next_seq();
        let dir = fs::metadata(self.root.join(rel))?.ino();
        let mut purged = Vec::new();
        for op in self.journal.sync_dir(dir) {
            if let Some(stashed) = op.stashed() {
                self.untrashed(stashed.ino);
                if self.trash.purge(&stashed.name)? {
                    // Its data no longer matters, and its inode number may be reused.
                    self.files.remove(&stashed.ino);
                    purged.push(stashed.ino);
                }
            }
        }
        Ok(purged)
    }

    fn stash(&mut self, abs: &Path) -> io::Result<Stashed> {
        let ino = fs::symlink_metadata(abs)?.ino();
        self.next_seq();
        let name = self.trash.stash(abs)?;
        *self.in_trash.entry(ino).or_default() += 1;
        Ok(Stashed { name, ino })
    }

    /// One name of `ino` left the trash.
    fn untrashed(&mut self, ino: u64) {
        if let Some(count) = self.in_trash.get_mut(&ino) {
            *count -= 1;
            if *count == 0 {
                self.in_trash.remove(&ino);
            }
        }
    }

    /// The inode number of the directory holding `rel`.
    fn dir_ino(&self, rel: &Path) -> io::Result<u64> {
        let parent = rel.parent().unwrap_or(Path::new(""));
        Ok(fs::metadata(self.root.join(parent))?.ino())
    }
}

/// `rel` must name an entry inside the backing folder, not the trash or anything in it.
fn check(rel: &Path) -> io::Result<()> {
    let mut components = rel.components();
    let first = components.next();
    let plain = rel.components().all(|c| matches!(c, Component::Normal(_)));
    match first {
        Some(Component::Normal(name)) if plain && name != TRASH_NAME => Ok(()),
        _ => Err(io::Error::from_raw_os_error(libc::EPERM)),
    }
}

/// Whether `source` may replace `target` (rename(2)'s rules).
fn check_replace(source: &fs::Metadata, target: &fs::Metadata, abs_to: &Path) -> io::Result<()> {
    match (source.is_dir(), target.is_dir()) {
        (true, false) => Err(io::Error::from_raw_os_error(libc::ENOTDIR)),
        (false, true) => Err(io::Error::from_raw_os_error(libc::EISDIR)),
        (true, true) if fs::read_dir(abs_to)?.next().is_some() => {
            Err(io::Error::from_raw_os_error(libc::ENOTEMPTY))
        }
        _ => Ok(()),
    }
}
