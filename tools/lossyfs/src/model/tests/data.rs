//! File data: writes, truncates, fsync, and `drop all`.

use super::{Fixture, bytes};
use crate::model::Mode;

#[test]
fn writes_then_drop_all_give_back_the_durable_content_and_length() {
    let durable = bytes(b'a', 10_000);
    let mut fx = Fixture::with(&[("f", &durable)]);
    fx.write("f", 100, &bytes(b'b', 5000));
    fx.write("f", 9_000, &bytes(b'c', 4000)); // grows the file to 13_000
    assert_eq!(fx.read("f").len(), 13_000);
    assert_eq!(fx.tracker.dirty_blocks(), 4); // blocks 0, 1, 2, 3

    let report = fx.tracker.drop_unsynced(Mode::All, 1).expect("drop");
    assert_eq!(fx.read("f"), durable);
    assert_eq!((report.blocks_dropped, report.blocks_dirty), (4, 4));
    assert!(!fx.root.join(crate::model::TRASH_NAME).exists());
}

#[test]
fn fsync_makes_the_writes_durable() {
    let mut fx = Fixture::with(&[("f", b"old old old")]);
    fx.write("f", 0, b"new");
    fx.write("f", 11, b" and more");
    fx.fsync("f");
    assert_eq!(fx.tracker.dirty_blocks(), 0);
    fx.write("f", 0, b"NEW"); // after the fsync: lost
    let report = fx.tracker.drop_unsynced(Mode::All, 7).expect("drop");
    assert_eq!(fx.read("f"), b"new old old and more");
    assert_eq!(report.blocks_dropped, 1);
}

#[test]
fn truncate_then_drop_gives_back_the_cut_bytes() {
    let durable: Vec<u8> = (0..9000u32).map(|i| (i % 251) as u8).collect();
    let mut fx = Fixture::with(&[("f", &durable)]);
    let file = fx.open("f");
    fx.tracker.truncate(&file, 10).expect("shrink");
    fx.tracker.truncate(&file, 20_000).expect("grow again");
    fx.tracker
        .write(&file, 15_000, b"past the old end")
        .expect("write");
    assert_eq!(fx.read("f").len(), 20_000);
    fx.tracker.drop_unsynced(Mode::All, 3).expect("drop");
    assert_eq!(fx.read("f"), durable);
}

#[test]
fn a_new_file_written_but_not_synced_comes_back_empty_if_its_entry_is_durable() {
    let mut fx = Fixture::with(&[]);
    let (file, created) = fx
        .tracker
        .create("n".as_ref(), 0o600, true)
        .expect("create");
    assert!(created);
    fx.fsyncdir();
    fx.tracker
        .write(&file, 0, &bytes(b'x', 5000))
        .expect("write");
    fx.tracker.drop_unsynced(Mode::All, 0).expect("drop");
    assert!(fx.exists("n"));
    assert_eq!(fx.read("n"), b"");
}

#[test]
fn an_unlinked_dirty_file_comes_back_with_its_durable_content() {
    let mut fx = Fixture::with(&[("f", b"durable")]);
    let file = fx.open("f");
    fx.tracker.write(&file, 0, b"changed!").expect("write");
    fx.tracker.unlink("f".as_ref()).expect("unlink");
    fx.tracker
        .write(&file, 0, b"CHANGED")
        .expect("write after the unlink");
    assert!(!fx.exists("f"));
    fx.tracker.drop_unsynced(Mode::All, 0).expect("drop");
    assert_eq!(fx.read("f"), b"durable");
}
