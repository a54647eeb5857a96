//! The node ids handed to the kernel, and where each node is in the backing folder (its
//! names, each a parent and a name, so that a renamed directory carries its children along).
//!
//! Node ids are ours (a counter), not the backing inode numbers: a backing inode number can be
//! reused once its file is deleted for good, and a node id the kernel still knows must never
//! come to mean another file. The model says when a file is deleted for good ([`dead`]): a
//! reused inode number then gets a new node id.
//!
//! Hard links: one node per backing inode, holding every name the kernel was told about (a
//! lookup, a create, a link) and still there. Any of them reaches the file; a name in the
//! trash folder is kept only while the file has no other known name (removed, still open).
//!
//! [`dead`]: Inodes::dead

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
    /// Its names: (parent node id, name). Only a directory's first name counts (one name).
    names: Vec<(u64, OsString)>,
    /// The inode number in the backing folder.
    backing: u64,
    /// The kernel's lookup count (FUSE's `nlookup`).
    lookups: u64,
}

impl Node {
    /// The name to reach it by: one outside the trash if it has any.
    fn name(&self) -> Option<&(u64, OsString)> {
        let mut names = self.names.iter();
        names
            .clone()
            .find(|(parent, _)| *parent != TRASH)
            .or_else(|| names.next())
    }

    fn has(&self, parent: u64, name: &OsStr) -> bool {
        self.names.iter().any(|(p, n)| *p == parent && n == name)
    }

    fn remove(&mut self, parent: u64, name: &OsStr) {
        self.names.retain(|(p, n)| !(*p == parent && n == name));
    }
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
            names: vec![(parent, OsString::from(name))],
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

    /// Where node `ino` is, relative to the backing folder (the root is ""): by any of its
    /// names, all of which reach it.
    pub fn path(&self, ino: u64) -> Option<PathBuf> {
        let mut names = Vec::new();
        let mut current = ino;
        while current != ROOT {
            let (parent, name) = self.nodes.get(&current)?.name()?;
            names.push(name.as_os_str());
            current = *parent;
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

    /// The node id of the parent of `ino` (a directory: it has one name).
    pub fn parent(&self, ino: u64) -> Option<u64> {
        self.nodes.get(&ino)?.name().map(|(parent, _)| *parent)
    }

    /// The node id the kernel knows a backing inode by, if any.
    pub fn known(&self, backing: u64) -> Option<u64> {
        self.by_backing.get(&backing).copied()
    }

    /// The kernel is told about `name` in `parent` (backing inode `backing`): its node id,
    /// with one more lookup. A file already known under another name (a hard link) keeps its
    /// node id and gains the name.
    pub fn remember(&mut self, parent: u64, name: &OsStr, backing: u64) -> u64 {
        if let Some(ino) = self.known(backing)
            && self.linked(ino, parent, name)
        {
            return ino;
        }
        let ino = self.next;
        self.next += 1;
        let node = Node {
            names: vec![(parent, name.to_os_string())],
            backing,
            lookups: 1,
        };
        self.nodes.insert(ino, node);
        self.by_backing.insert(backing, ino);
        ino
    }

    /// Node `ino` has the name `name` in `parent` too, and one more lookup (a link, or a
    /// lookup of a name it has). False if the node is gone.
    pub fn linked(&mut self, ino: u64, parent: u64, name: &OsStr) -> bool {
        let Some(node) = self.nodes.get_mut(&ino) else {
            return false;
        };
        if !node.has(parent, name) {
            node.names.push((parent, name.to_os_string()));
        }
        node.lookups += 1;
        true
    }

    /// The name `from` of the backing inode `backing` is now `to`; its other names stay.
    pub fn renamed(&mut self, backing: u64, from: (u64, &OsStr), to: (u64, &OsStr)) {
        if let Some(node) = self.known(backing).and_then(|ino| self.nodes.get_mut(&ino)) {
            node.remove(from.0, from.1);
            node.remove(to.0, to.1);
            node.names.push((to.0, to.1.to_os_string()));
        }
    }

    /// The name `at` of the backing inode `backing` went to the trash as `trash_name`. A file
    /// with another name keeps it; one without is reached in the trash (removed, still open).
    pub fn unlinked(&mut self, backing: u64, at: (u64, &OsStr), trash_name: &str) {
        if let Some(node) = self.known(backing).and_then(|ino| self.nodes.get_mut(&ino)) {
            node.remove(at.0, at.1);
            if node.names.iter().all(|(parent, _)| *parent == TRASH) {
                node.names = vec![(TRASH, OsString::from(trash_name))];
            }
        }
    }

    /// The backing inode `backing` is deleted for good: its number, if reused, is another
    /// file's (a node the kernel still holds keeps its id, and means the deleted file).
    pub fn dead(&mut self, backing: u64) {
        self.by_backing.remove(&backing);
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

    fn at(inodes: &Inodes, ino: u64) -> Option<PathBuf> {
        inodes.path(ino)
    }

    #[test]
    fn paths_follow_renames_and_dead_inode_numbers_get_new_ids() {
        let mut inodes = Inodes::new(100);
        let dir = inodes.remember(ROOT, OsStr::new("d"), 200);
        let file = inodes.remember(dir, OsStr::new("f"), 300);
        assert_eq!(at(&inodes, file).as_deref(), Some(Path::new("d/f")));
        inodes.renamed(200, (ROOT, OsStr::new("d")), (ROOT, OsStr::new("e")));
        assert_eq!(at(&inodes, file).as_deref(), Some(Path::new("e/f")));
        assert_eq!(inodes.remember(dir, OsStr::new("f"), 300), file);
        inodes.unlinked(300, (dir, OsStr::new("f")), "7");
        assert_eq!(
            at(&inodes, file).as_deref(),
            Some(Path::new(".lossyfs-trash/7"))
        );
        inodes.dead(300);
        let reused = inodes.remember(dir, OsStr::new("g"), 300);
        assert_ne!(reused, file);
        inodes.forget(reused, 1);
        assert_eq!(at(&inodes, reused), None);
        assert_eq!(inodes.known(300), None);
        assert_eq!(at(&inodes, ROOT).as_deref(), Some(Path::new("")));
    }

    #[test]
    fn a_hard_linked_file_is_one_node_that_lives_on_under_its_other_name() {
        let mut inodes = Inodes::new(100);
        let tmp = inodes.remember(ROOT, OsStr::new("tmp"), 300);
        assert!(inodes.linked(tmp, ROOT, OsStr::new("final")));
        assert_eq!(inodes.remember(ROOT, OsStr::new("final"), 300), tmp);
        inodes.unlinked(300, (ROOT, OsStr::new("tmp")), "1");
        assert_eq!(at(&inodes, tmp).as_deref(), Some(Path::new("final")));
        inodes.renamed(300, (ROOT, OsStr::new("final")), (ROOT, OsStr::new("last")));
        assert_eq!(at(&inodes, tmp).as_deref(), Some(Path::new("last")));
        inodes.forget(tmp, 2);
        assert_eq!(at(&inodes, tmp).as_deref(), Some(Path::new("last")));
        inodes.forget(tmp, 1);
        assert_eq!(inodes.known(300), None);
    }
}
