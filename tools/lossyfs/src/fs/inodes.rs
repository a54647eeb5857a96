//! The node ids handed to the kernel, and where each node is in the backing folder (parent
//! and name, so that a renamed directory carries its children along).
//!
//! Node ids are ours (a counter), not the backing inode numbers: a backing inode number can be
//! reused once its file is deleted for good, and a node id the kernel still knows must never
//! come to mean another file.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

use crate::model::TRASH_NAME;

/// The root's node id (FUSE's).
pub const ROOT: u64 = 1;
/// The trash folder's node id: ours only, never handed to the kernel.
const TRASH: u64 = 2;
/// The first node id handed out.
const FIRST: u64 = 16;
/// Deeper than this, a parent chain is taken for a loop.
const MAX_DEPTH: usize = 4096;

#[derive(Debug)]
struct Node {
    parent: u64,
    name: OsString,
    /// The inode number in the backing folder.
    backing: u64,
    /// The kernel's lookup count (FUSE's `nlookup`).
    lookups: u64,
}

/// Node id -> node, and backing inode number -> node id.
#[derive(Debug)]
pub struct Inodes {
    nodes: HashMap<u64, Node>,
    by_backing: HashMap<u64, u64>,
    next: u64,
}

impl Inodes {
    /// The table with the root (whose backing inode number is `root_backing`) and the trash.
    pub fn new(root_backing: u64) -> Self {
        let mut nodes = HashMap::new();
        let pinned = |parent, name: &str, backing| Node {
            parent,
            name: OsString::from(name),
            backing,
            lookups: u64::MAX / 2,
        };
        nodes.insert(ROOT, pinned(ROOT, "", root_backing));
        nodes.insert(TRASH, pinned(ROOT, TRASH_NAME, 0));
        Self {
            nodes,
            by_backing: HashMap::from([(root_backing, ROOT)]),
            next: FIRST,
        }
    }

    /// Whether `name` in `parent` is the trash folder (which the mount never shows).
    pub fn is_trash(parent: u64, name: &OsStr) -> bool {
        parent == ROOT && name == TRASH_NAME
    }

    /// Where node `ino` is, relative to the backing folder (the root is "").
    pub fn path(&self, ino: u64) -> Option<PathBuf> {
        let mut names = Vec::new();
        let mut current = ino;
        while current != ROOT {
            let node = self.nodes.get(&current)?;
            names.push(node.name.as_os_str());
            current = node.parent;
            if names.len() > MAX_DEPTH {
                return None;
            }
        }
        Some(names.iter().rev().collect())
    }

    /// Where `name` in directory `parent` is.
    pub fn child(&self, parent: u64, name: &OsStr) -> Option<PathBuf> {
        Some(self.path(parent)?.join(name))
    }

    /// The node id of the parent of `ino`.
    pub fn parent(&self, ino: u64) -> Option<u64> {
        self.nodes.get(&ino).map(|node| node.parent)
    }

    /// The node id the kernel knows a backing inode by, if any.
    pub fn known(&self, backing: u64) -> Option<u64> {
        self.by_backing.get(&backing).copied()
    }

    /// The kernel is told about `name` in `parent` (backing inode `backing`): its node id,
    /// with one more lookup. A node id that was elsewhere belonged to a deleted file whose
    /// inode number was reused: the file gets a new one.
    pub fn remember(&mut self, parent: u64, name: &OsStr, backing: u64) -> u64 {
        if let Some(ino) = self.known(backing)
            && let Some(node) = self.nodes.get_mut(&ino)
            && node.parent == parent
            && node.name == name
        {
            node.lookups += 1;
            return ino;
        }
        let ino = self.next;
        self.next += 1;
        let name = name.to_os_string();
        self.nodes.insert(
            ino,
            Node {
                parent,
                name,
                backing,
                lookups: 1,
            },
        );
        self.by_backing.insert(backing, ino);
        ino
    }

    /// The backing inode `backing` is now `name` in `parent`.
    pub fn moved(&mut self, backing: u64, parent: u64, name: &OsStr) {
        if let Some(node) = self.known(backing).and_then(|ino| self.nodes.get_mut(&ino)) {
            node.parent = parent;
            node.name = name.to_os_string();
        }
    }

    /// The backing inode `backing` is now `name` in the trash folder.
    pub fn trashed(&mut self, backing: u64, name: &str) {
        self.moved(backing, TRASH, OsStr::new(name));
    }

    /// The kernel dropped `count` lookups of `ino`.
    pub fn forget(&mut self, ino: u64, count: u64) {
        let Some(node) = self.nodes.get_mut(&ino) else {
            return;
        };
        node.lookups = node.lookups.saturating_sub(count);
        if node.lookups == 0 {
            let backing = node.backing;
            self.nodes.remove(&ino);
            if self.by_backing.get(&backing) == Some(&ino) {
                self.by_backing.remove(&backing);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn paths_follow_renames_and_reused_inode_numbers_get_new_ids() {
        let mut inodes = Inodes::new(100);
        let dir = inodes.remember(ROOT, OsStr::new("d"), 200);
        let file = inodes.remember(dir, OsStr::new("f"), 300);
        assert_eq!(inodes.path(file).as_deref(), Some(Path::new("d/f")));
        inodes.moved(200, ROOT, OsStr::new("e"));
        assert_eq!(inodes.path(file).as_deref(), Some(Path::new("e/f")));
        assert_eq!(inodes.remember(dir, OsStr::new("f"), 300), file);
        inodes.trashed(300, "7");
        assert_eq!(
            inodes.path(file).as_deref(),
            Some(Path::new(".lossyfs-trash/7"))
        );
        let reused = inodes.remember(dir, OsStr::new("g"), 300);
        assert_ne!(reused, file);
        inodes.forget(reused, 1);
        assert_eq!(inodes.path(reused), None);
        assert_eq!(inodes.known(300), None);
        assert_eq!(inodes.path(ROOT).as_deref(), Some(Path::new("")));
    }
}
