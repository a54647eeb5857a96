//! The drop: putting back in the backing folder what was durable, all of it or a seeded part.
//!
//! Choices are drawn from `fastrand::Rng::with_seed(seed)` in a fixed order (files in the
//! order they became dirty, blocks in file order, then the directory prefix, then the torn
//! length), so the same operations and the same seed drop the same things.
//!
//! `subset` and lengths: a file keeps its current length only if every dirty block where the
//! current and the durable lengths differ was kept; otherwise it goes back to its durable
//! length (kept blocks past that length are cut with it).

use std::collections::BTreeSet;
use std::io;

use fastrand::Rng;

use super::Tracker;
use super::data::FileData;
use super::mode::{DropReport, Mode};

impl Tracker {
    /// Forgets what was not durable, as `mode` says, then empties the trash. The model is
    /// spent afterwards: nothing is dirty any more.
    pub fn drop_unsynced(&mut self, mode: Mode, seed: u64) -> io::Result<DropReport> {
        let mut rng = Rng::with_seed(seed);
        let mut files: Vec<FileData> = self.files.drain().map(|(_, f)| f).collect();
        files.sort_by_key(|f| f.order);

        let mut report = DropReport {
            blocks_dirty: files.iter().map(|f| f.blocks.len() as u64).sum(),
            ..DropReport::default()
        };
        for file in &files {
            report.blocks_dropped += revert_file(file, mode, &mut rng)?;
        }

        let ops = self.journal.take();
        let kept = match mode {
            Mode::Subset => rng.usize(0..=ops.len()),
            Mode::All | Mode::Torn => 0,
        };
        report.entries_dirty = ops.len() as u64;
        report.entries_dropped = (ops.len() - kept) as u64;
        for op in ops[kept..].iter().rev() {
            op.undo(&self.root, &self.trash)?;
        }

        if mode == Mode::Torn {
            report.torn_bytes = tear_last_write(&files, &mut rng)?;
        }
        self.trash.clear()?;
        self.in_trash.clear();
        Ok(report)
    }
}

/// Reverts one file as `mode` says; returns how many of its blocks went back.
fn revert_file(file: &FileData, mode: Mode, rng: &mut Rng) -> io::Result<u64> {
    match mode {
        Mode::All | Mode::Torn => file.apply(file.durable_len, |_| true),
        Mode::Subset => {
            let kept: BTreeSet<u64> = file.blocks.keys().copied().filter(|_| rng.bool()).collect();
            let current = file.current_len()?;
            let length_kept = file
                .blocks
                .keys()
                .filter(|&&index| file.affects_length(index, current))
                .all(|index| kept.contains(index));
            let len = if length_kept {
                current
            } else {
                file.durable_len
            };
            file.apply(len, |index| !kept.contains(&index))
        }
    }
}

/// Puts back a prefix of the last write not durable (a multiple of 512 bytes, never all of
/// it), over the reverted file. Returns the prefix's length.
fn tear_last_write(files: &[FileData], rng: &mut Rng) -> io::Result<u64> {
    let last = files
        .iter()
        .filter_map(|f| f.last_write.as_ref().map(|w| (f, w)))
        .max_by_key(|(_, w)| w.seq);
    let Some((file, write)) = last else {
        return Ok(0);
    };
    let len = write.data.len() as u64;
    if len == 0 {
        return Ok(0);
    }
    let prefix = rng.u64(0..=(len - 1) / 512) * 512;
    if prefix > 0 {
        let n = usize::try_from(prefix).unwrap_or(usize::MAX);
        file.write_at(&write.data[..n], write.offset)?;
    }
    Ok(prefix)
}
