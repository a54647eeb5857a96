//! The file data that is not durable: per file, the durable content of every 4096-byte block
//! touched since that file's last fsync, and the file's durable length.

use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// The granularity at which data is kept or lost.
pub const BLOCK: u64 = 4096;

/// One write, kept for the torn mode (the last write of a file since its last fsync).
#[derive(Debug, Clone)]
pub(super) struct Write {
    /// Its place in the order of all mutating operations.
    pub seq: u64,
    pub offset: u64,
    pub data: Vec<u8>,
}

/// What one file had durable at its last fsync, for what was touched since.
#[derive(Debug)]
pub(super) struct FileData {
    /// A descriptor of the file itself: reverting goes through it, wherever its name is now.
    file: File,
    /// When the file became dirty: the order in which seeded choices visit files.
    pub order: u64,
    /// Its length at its last fsync.
    pub durable_len: u64,
    /// Block index -> that block's durable bytes (those below `durable_len`, so possibly
    /// fewer than `BLOCK`, none for a block wholly past it).
    pub blocks: BTreeMap<u64, Vec<u8>>,
    /// Its last write since its last fsync.
    pub last_write: Option<Write>,
}

impl FileData {
    /// Starts tracking `file`, clean until now: its current length is its durable one.
    pub(super) fn new(file: &File, order: u64) -> io::Result<Self> {
        Ok(Self {
            durable_len: file.metadata()?.len(),
            file: file.try_clone()?,
            order,
            blocks: BTreeMap::new(),
            last_write: None,
        })
    }

    /// Captures the durable bytes of every block overlapping `start..end` not captured yet.
    /// Called before those bytes change.
    pub(super) fn capture(&mut self, start: u64, end: u64) -> io::Result<()> {
        if start >= end {
            return Ok(());
        }
        for index in start / BLOCK..=(end - 1) / BLOCK {
            if self.blocks.contains_key(&index) {
                continue;
            }
            let at = index * BLOCK;
            let wanted = self.durable_len.saturating_sub(at).min(BLOCK);
            let bytes = read_up_to(&self.file, at, wanted)?;
            self.blocks.insert(index, bytes);
        }
        Ok(())
    }

    /// Before a truncate from `current` to `new_len`: the blocks whose bytes it cuts or
    /// zeroes, as far as they were durable.
    pub(super) fn capture_truncate(&mut self, current: u64, new_len: u64) -> io::Result<()> {
        let start = current.min(new_len);
        let end = current.max(new_len).min(self.durable_len);
        self.capture(start, end)
    }

    /// The file's length now.
    pub(super) fn current_len(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    /// Whether block `index` lies (partly) where the current and the durable lengths differ:
    /// keeping the current length needs all such blocks kept.
    pub(super) fn affects_length(&self, index: u64, current: u64) -> bool {
        let (low, high) = (current.min(self.durable_len), current.max(self.durable_len));
        let (start, end) = (index * BLOCK, (index + 1) * BLOCK);
        start < high && end > low
    }

    /// Sets the length to `len`, then puts back the durable bytes of each block `revert`
    /// picks (as far as they lie below `len`). Returns how many blocks went back.
    pub(super) fn apply(&self, len: u64, revert: impl Fn(u64) -> bool) -> io::Result<u64> {
        self.file.set_len(len)?;
        let mut reverted = 0;
        for (&index, bytes) in &self.blocks {
            if !revert(index) {
                continue;
            }
            reverted += 1;
            let at = index * BLOCK;
            if at >= len {
                continue;
            }
            let n = bytes
                .len()
                .min(usize::try_from(len - at).unwrap_or(usize::MAX));
            self.file.write_all_at(&bytes[..n], at)?;
        }
        Ok(reverted)
    }

    /// Writes `data` at `offset` (the kept prefix of a torn write).
    pub(super) fn write_at(&self, data: &[u8], offset: u64) -> io::Result<()> {
        self.file.write_all_at(data, offset)
    }
}

/// Reads up to `len` bytes at `at`; fewer where the file ends.
pub(crate) fn read_up_to(file: &File, at: u64, len: u64) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; usize::try_from(len).unwrap_or(usize::MAX)];
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], at + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    buf.truncate(done);
    Ok(buf)
}
