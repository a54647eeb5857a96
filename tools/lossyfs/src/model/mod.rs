//! The durability model, with no FUSE in it: it carries out each mutating operation on the
//! backing folder and remembers what that operation made that is not durable yet (file
//! blocks since the file's last fsync, directory operations since the directory's last
//! fsyncdir), so that a `drop` can put back the durable state, or a seeded part of it.
//!
//! Files are known by their inode number in the backing folder, and the model keeps a
//! descriptor of every dirty file: data is reverted through it wherever the file's name went.
//!
//! Hard links: file data follows the inode, never a name. A file with several names is one
//! entry in `files` (keyed by its backing inode number), so a write through any of its names
//! captures each block's durable bytes once, an fsync through any of them makes all of it
//! durable, and a drop reverts it once, through its descriptor, whatever names it has by
//! then. Each name is a directory entry of its own: a link is journaled like a create, an
//! unlink of one name moves that name (not the file) into the trash.

mod data;
mod entries;
mod journal;
mod mode;
mod revert;
mod trash;

/// Positional reads, as the model captures durable bytes and the mount serves reads.
pub(crate) use data::read_up_to;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

pub use data::BLOCK;
pub use entries::Renamed;
pub use journal::Stashed;
pub use mode::{DropReport, Mode};
pub use trash::TRASH_NAME;

use data::{FileData, Write};
use journal::Journal;
use trash::Trash;

/// What is not durable in one backing folder, and the means to forget it.
#[derive(Debug)]
pub struct Tracker {
    root: PathBuf,
    trash: Trash,
    /// Dirty files by inode number.
    files: HashMap<u64, FileData>,
    /// Inode number -> how many of its names wait in the trash.
    in_trash: HashMap<u64, u64>,
    journal: Journal,
    /// The order of the mutating operations.
    seq: u64,
}

impl Tracker {
    /// Starts with everything in `root` durable, and an empty trash folder in it.
    pub fn open(root: &Path) -> io::Result<Self> {
        Ok(Self {
            root: root.to_path_buf(),
            trash: Trash::open(root)?,
            files: HashMap::new(),
            in_trash: HashMap::new(),
            journal: Journal::default(),
            seq: 0,
        })
    }

    /// The backing folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Writes `data` at `offset` in `file` (which must be open for reading and writing),
    /// first capturing the durable bytes of the blocks it changes.
    pub fn write(&mut self, file: &File, offset: u64, data: &[u8]) -> io::Result<()> {
        let seq = self.next_seq();
        let end = offset + data.len() as u64;
        let tracked = self.file_data(file)?;
        tracked.capture(offset, end)?;
        file.write_all_at(data, offset)?;
        tracked.last_write = Some(Write {
            seq,
            offset,
            data: data.to_vec(),
        });
        Ok(())
    }

    /// Sets the length of `file` to `len`, first capturing the durable bytes it cuts.
    pub fn truncate(&mut self, file: &File, len: u64) -> io::Result<()> {
        self.next_seq();
        let current = file.metadata()?.len();
        self.file_data(file)?.capture_truncate(current, len)?;
        file.set_len(len)
    }

    /// An fsync or fdatasync of `file`: all its data is durable.
    pub fn fsync(&mut self, file: &File) -> io::Result<()> {
        self.next_seq();
        let ino = file.metadata()?.ino();
        self.files.remove(&ino);
        Ok(())
    }

    /// How many blocks are not durable.
    pub fn dirty_blocks(&self) -> u64 {
        self.files.values().map(|f| f.blocks.len() as u64).sum()
    }

    /// How many directory operations are not durable.
    pub fn dirty_entries(&self) -> u64 {
        self.journal.len() as u64
    }

    /// How many names of the backing inode `ino` wait in the trash: they are gone as the
    /// mount sees it, so its link count is that much lower than the backing one.
    pub fn hidden_links(&self, ino: u64) -> u64 {
        self.in_trash.get(&ino).copied().unwrap_or(0)
    }

    /// A clean end (unmounted without a drop): what happened stays, the trash goes.
    pub fn clear_trash(&self) -> io::Result<()> {
        self.trash.clear()
    }

    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// The tracking of `file`, started (clean until now) if it was not dirty.
    fn file_data(&mut self, file: &File) -> io::Result<&mut FileData> {
        let ino = file.metadata()?.ino();
        if !self.files.contains_key(&ino) {
            let order = self.seq;
            self.files.insert(ino, FileData::new(file, order)?);
        }
        Ok(self.files.get_mut(&ino).expect("just inserted"))
    }
}
