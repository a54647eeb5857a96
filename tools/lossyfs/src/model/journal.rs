//! The directory operations that are not durable, in the order they were made, and how each
//! is undone.
//!
//! Durability is that of an ordered metadata journal (ext4's, XFS's): an fsyncdir of a
//! directory makes durable every pending operation up to the last one that touched that
//! directory, so what is not durable is always a suffix of what was done, and undoing it in
//! reverse order always finds the names as each operation left them. For operations in a
//! single directory (SQLite's case) this is exactly "since that directory's last fsyncdir".
//! Directories are known by their inode number, so a renamed directory stays the same one.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::trash::Trash;

/// A removed or replaced entry, waiting in the trash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stashed {
    /// Its name in the trash folder.
    pub name: String,
    /// Its inode number in the backing folder.
    pub ino: u64,
}

/// One directory operation; paths are relative to the backing folder, as they were then.
#[derive(Debug, Clone)]
pub(super) enum EntryOp {
    Create {
        path: PathBuf,
    },
    Mkdir {
        path: PathBuf,
    },
    /// A new name `path` for an existing file (its other names are untouched).
    Link {
        path: PathBuf,
    },
    Unlink {
        path: PathBuf,
        stashed: Stashed,
    },
    Rmdir {
        path: PathBuf,
        stashed: Stashed,
    },
    Rename {
        from: PathBuf,
        to: PathBuf,
        replaced: Option<Stashed>,
    },
}

impl EntryOp {
    /// What its removal put in the trash, if anything.
    pub(super) fn stashed(&self) -> Option<&Stashed> {
        match self {
            EntryOp::Unlink { stashed, .. } | EntryOp::Rmdir { stashed, .. } => Some(stashed),
            EntryOp::Rename { replaced, .. } => replaced.as_ref(),
            EntryOp::Create { .. } | EntryOp::Mkdir { .. } | EntryOp::Link { .. } => None,
        }
    }

    /// Puts the names back as they were just before it.
    pub(super) fn undo(&self, root: &Path, trash: &Trash) -> io::Result<()> {
        match self {
            // A linked file keeps its other names.
            EntryOp::Create { path } | EntryOp::Link { path } => fs::remove_file(root.join(path)),
            EntryOp::Mkdir { path } => fs::remove_dir(root.join(path)),
            EntryOp::Unlink { path, stashed } | EntryOp::Rmdir { path, stashed } => {
                trash.restore(&stashed.name, &root.join(path))
            }
            EntryOp::Rename { from, to, replaced } => {
                fs::rename(root.join(to), root.join(from))?;
                match replaced {
                    Some(stashed) => trash.restore(&stashed.name, &root.join(to)),
                    None => Ok(()),
                }
            }
        }
    }
}

/// A pending operation and the directories (inode numbers) it changed.
#[derive(Debug)]
struct Pending {
    op: EntryOp,
    dirs: Vec<u64>,
}

/// The operations not durable yet, oldest first.
#[derive(Debug, Default)]
pub(super) struct Journal {
    pending: Vec<Pending>,
}

impl Journal {
    pub(super) fn record(&mut self, op: EntryOp, dirs: Vec<u64>) {
        self.pending.push(Pending { op, dirs });
    }

    pub(super) fn len(&self) -> usize {
        self.pending.len()
    }

    /// An fsyncdir of directory `dir`: returns the operations it made durable.
    pub(super) fn sync_dir(&mut self, dir: u64) -> Vec<EntryOp> {
        match self.pending.iter().rposition(|p| p.dirs.contains(&dir)) {
            Some(last) => self.pending.drain(..=last).map(|p| p.op).collect(),
            None => Vec::new(),
        }
    }

    /// Takes all pending operations, oldest first.
    pub(super) fn take(&mut self) -> Vec<EntryOp> {
        self.pending.drain(..).map(|p| p.op).collect()
    }
}
