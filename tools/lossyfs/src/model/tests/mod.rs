//! Unit tests of the model on plain files in a temp folder, no FUSE.

mod data;
mod entries;
mod links;
mod modes;

use std::fs::{self, File, OpenOptions};
use std::path::{Path, PathBuf};

use super::Tracker;

/// A temp backing folder and a tracker on it.
struct Fixture {
    _dir: tempfile::TempDir,
    root: PathBuf,
    tracker: Tracker,
}

impl Fixture {
    /// A backing folder holding `files` (durable: they were there before the tracker).
    fn with(files: &[(&str, &[u8])]) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().to_path_buf();
        for (name, content) in files {
            fs::write(root.join(name), content).expect("seed file");
        }
        let tracker = Tracker::open(&root).expect("tracker");
        Self {
            _dir: dir,
            root,
            tracker,
        }
    }

    fn open(&self, rel: &str) -> File {
        OpenOptions::new()
            .read(true)
            .write(true)
            .open(self.root.join(rel))
            .expect("open")
    }

    fn read(&self, rel: &str) -> Vec<u8> {
        fs::read(self.root.join(rel)).expect("read")
    }

    fn exists(&self, rel: &str) -> bool {
        self.root.join(rel).exists()
    }

    /// The names in the backing folder, the trash folder excluded.
    fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(&self.root)
            .expect("list")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .filter(|n| n != super::TRASH_NAME)
            .collect();
        names.sort();
        names
    }

    fn write(&mut self, rel: &str, offset: u64, data: &[u8]) {
        let file = self.open(rel);
        self.tracker.write(&file, offset, data).expect("write");
    }

    fn fsync(&mut self, rel: &str) {
        let file = self.open(rel);
        self.tracker.fsync(&file).expect("fsync");
    }

    fn fsyncdir(&mut self) {
        self.tracker.fsyncdir(Path::new("")).expect("fsyncdir");
    }
}

/// `len` bytes of `byte`.
fn bytes(byte: u8, len: usize) -> Vec<u8> {
    vec![byte; len]
}
