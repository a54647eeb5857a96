//! `subset` and `torn`: seeded, reproducible, and what they keep.

use std::path::Path;

use super::{Fixture, bytes};
use crate::model::{BLOCK, Mode};

const BLOCKS: usize = 64;

/// A durable file of 64 blocks of 'o', every block overwritten with 'n', then `drop subset`.
/// Returns which blocks are back to 'o', and the report.
fn subset_of_overwritten_blocks(seed: u64) -> (Vec<bool>, crate::model::DropReport) {
    let len = BLOCKS * BLOCK as usize;
    let mut fx = Fixture::with(&[("f", &bytes(b'o', len))]);
    fx.write("f", 0, &bytes(b'n', len));
    let report = fx.tracker.drop_unsynced(Mode::Subset, seed).expect("drop");
    let content = fx.read("f");
    assert_eq!(content.len(), len, "the length was durable already");
    let reverted = content
        .chunks(BLOCK as usize)
        .map(|block| {
            assert!(
                block.iter().all(|&b| b == block[0]),
                "a block is kept or reverted whole"
            );
            block[0] == b'o'
        })
        .collect();
    (reverted, report)
}

#[test]
fn subset_keeps_some_blocks_and_reverts_others_reproducibly() {
    let (reverted, report) = subset_of_overwritten_blocks(42);
    let count = reverted.iter().filter(|&&r| r).count() as u64;
    assert_eq!(report.blocks_dropped, count);
    assert_eq!(report.blocks_dirty, BLOCKS as u64);
    assert!(
        count > 0 && count < BLOCKS as u64,
        "{count} of {BLOCKS} reverted"
    );
    assert_eq!(
        subset_of_overwritten_blocks(42).0,
        reverted,
        "same seed, same choice"
    );
    assert_ne!(
        subset_of_overwritten_blocks(43).0,
        reverted,
        "another seed, another choice"
    );
}

#[test]
fn subset_keeps_the_new_length_only_if_every_block_past_the_old_one_was_kept() {
    let mut kept_lengths = 0;
    for seed in 0..16 {
        let mut fx = Fixture::with(&[("f", &bytes(b'o', 100))]);
        fx.write("f", 100, &bytes(b'n', 3 * BLOCK as usize));
        fx.tracker.drop_unsynced(Mode::Subset, seed).expect("drop");
        let content = fx.read("f");
        match content.len() {
            100 => assert_eq!(content, bytes(b'o', 100)),
            n if n == 100 + 3 * BLOCK as usize => {
                kept_lengths += 1;
                assert!(content[100..].iter().all(|&b| b == b'n'), "seed {seed}");
            }
            n => panic!("seed {seed}: length {n}"),
        }
    }
    // 4 blocks (0..=3) past or at the old end: all kept with p = 1/16.
    assert!(kept_lengths < 16);
}

#[test]
fn subset_keeps_a_prefix_of_the_directory_operations() {
    let mut seen = std::collections::BTreeSet::new();
    for seed in 0..20 {
        let mut fx = Fixture::with(&[]);
        for name in ["a", "b", "c", "d"] {
            fx.tracker
                .create(Path::new(name), 0o644, true)
                .expect("create");
        }
        let report = fx.tracker.drop_unsynced(Mode::Subset, seed).expect("drop");
        let names = fx.names();
        let kept = 4 - report.entries_dropped as usize;
        assert_eq!(names, ["a", "b", "c", "d"][..kept], "seed {seed}: a prefix");
        seen.insert(kept);
    }
    assert!(seen.len() > 2, "prefixes of several lengths: {seen:?}");
}

#[test]
fn torn_keeps_a_512_multiple_prefix_of_the_last_write() {
    let mut prefixes = std::collections::BTreeSet::new();
    for seed in 0..12 {
        let mut fx = Fixture::with(&[("f", &bytes(b'o', 10_000)), ("g", b"g")]);
        fx.write("f", 0, &bytes(b'x', 3000)); // not the last write: reverted
        fx.write("g", 0, b"G"); // nor this one
        fx.write("f", 1000, &bytes(b'n', 8192)); // the last write: torn
        let report = fx.tracker.drop_unsynced(Mode::Torn, seed).expect("drop");
        let prefix = report.torn_bytes as usize;
        assert_eq!(prefix % 512, 0);
        assert!(prefix < 8192);
        let mut expected = bytes(b'o', 10_000);
        expected[1000..1000 + prefix].fill(b'n');
        assert_eq!(fx.read("f"), expected, "seed {seed}");
        assert_eq!(fx.read("g"), b"g");
        assert_eq!(report.blocks_dropped, report.blocks_dirty);
        prefixes.insert(prefix);
    }
    assert!(prefixes.len() > 3, "several tears: {prefixes:?}");
}

#[test]
fn torn_tears_nothing_when_everything_was_synced() {
    let mut fx = Fixture::with(&[("f", b"f")]);
    fx.write("f", 0, &bytes(b'n', 4096));
    fx.fsync("f");
    let report = fx.tracker.drop_unsynced(Mode::Torn, 9).expect("drop");
    assert_eq!(report.torn_bytes, 0);
    assert_eq!(fx.read("f"), bytes(b'n', 4096));
}
