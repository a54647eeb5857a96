//! Hard links: a link is journaled like a create; an unlink of one name keeps the file under
//! its others; file data follows the inode, whatever name it is written through.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use super::{Fixture, bytes};
use crate::model::Mode;

/// The backup tool's way to put a copy in place: a new `tmp`, written, fsynced, then linked
/// to `final`, then `tmp` unlinked. Returns tmp's (synced) content.
fn write_tmp_link_final_unlink_tmp(fx: &mut Fixture, fsyncdir_before_link: bool) -> Vec<u8> {
    let content = bytes(b'c', 10_000);
    let (tmp, _) = fx
        .tracker
        .create(Path::new("tmp"), 0o600, true)
        .expect("create tmp");
    fx.tracker.write(&tmp, 0, &content).expect("write tmp");
    fx.tracker.fsync(&tmp).expect("fsync tmp");
    if fsyncdir_before_link {
        fx.fsyncdir();
    }
    fx.tracker
        .link(Path::new("tmp"), Path::new("final"))
        .expect("link");
    fx.tracker.unlink(Path::new("tmp")).expect("unlink tmp");
    content
}

fn ino(fx: &Fixture, rel: &str) -> u64 {
    fs::metadata(fx.root.join(rel)).expect("stat").ino()
}

#[test]
fn link_then_unlink_then_fsyncdir_is_durable() {
    let mut fx = Fixture::with(&[]);
    let content = write_tmp_link_final_unlink_tmp(&mut fx, false);
    let file = ino(&fx, "final");
    assert_eq!(fx.tracker.hidden_links(file), 1, "tmp waits in the trash");
    assert_eq!(fx.tracker.dirty_entries(), 3);
    let purged = fx.tracker.fsyncdir(Path::new("")).expect("fsyncdir");
    assert!(purged.is_empty(), "the file lives on as final: {purged:?}");
    assert_eq!(fx.tracker.hidden_links(file), 0);
    assert_eq!(
        fs::metadata(fx.root.join("final")).expect("final").nlink(),
        1
    );
    let report = fx.tracker.drop_unsynced(Mode::All, 3).expect("drop");
    assert_eq!((report.entries_dirty, report.blocks_dirty), (0, 0));
    assert_eq!(fx.names(), ["final"]);
    assert_eq!(fx.read("final"), content);
}

#[test]
fn link_and_unlink_without_fsyncdir_are_undone() {
    let mut fx = Fixture::with(&[]);
    let content = write_tmp_link_final_unlink_tmp(&mut fx, true);
    assert_eq!(fx.names(), ["final"]);
    // Written through the new name, never synced: reverted, whichever name it ends under.
    let (final_file, _) = fx
        .tracker
        .create(Path::new("final"), 0o600, false)
        .expect("open final");
    fx.tracker
        .write(&final_file, 0, b"unsynced")
        .expect("write final");
    let report = fx.tracker.drop_unsynced(Mode::All, 0).expect("drop");
    assert_eq!((report.entries_dropped, report.entries_dirty), (2, 2));
    assert_eq!(fx.names(), ["tmp"], "as before the link");
    assert_eq!(fx.read("tmp"), content);
    assert_eq!(fs::metadata(fx.root.join("tmp")).expect("tmp").nlink(), 1);
}

#[test]
fn fsyncdir_between_link_and_unlink_keeps_the_link_and_undoes_the_unlink() {
    // The order `backup` really uses: link, fsyncdir, then the temporary name goes.
    let mut fx = Fixture::with(&[]);
    let content = bytes(b'b', 5000);
    let (tmp, _) = fx
        .tracker
        .create(Path::new("tmp"), 0o600, true)
        .expect("create");
    fx.tracker.write(&tmp, 0, &content).expect("write");
    fx.tracker.fsync(&tmp).expect("fsync");
    fx.tracker
        .link(Path::new("tmp"), Path::new("final"))
        .expect("link");
    fx.fsyncdir();
    fx.tracker.unlink(Path::new("tmp")).expect("unlink");
    fx.tracker.drop_unsynced(Mode::All, 0).expect("drop");
    assert_eq!(fx.names(), ["final", "tmp"]);
    assert_eq!(ino(&fx, "final"), ino(&fx, "tmp"));
    assert_eq!(fx.read("final"), content);
}

#[test]
fn data_written_under_two_names_is_tracked_once() {
    let durable = bytes(b'd', 6000);
    let mut fx = Fixture::with(&[("a", &durable)]);
    fx.tracker
        .link(Path::new("a"), Path::new("b"))
        .expect("link");
    fx.fsyncdir();
    fx.write("a", 0, b"through a");
    fx.write("b", 100, b"through b");
    assert_eq!(fx.tracker.dirty_blocks(), 1, "one file, one block");
    fx.fsync("b");
    assert_eq!(fx.tracker.dirty_blocks(), 0, "an fsync through any name");
    let synced = fx.read("a");
    fx.write("b", 5000, &bytes(b'x', 3000));
    fx.tracker.drop_unsynced(Mode::All, 0).expect("drop");
    assert_eq!(fx.read("a"), synced);
    assert_eq!(fx.read("b"), synced);
}

#[test]
fn a_durable_unlink_of_one_name_keeps_the_file_and_its_unsynced_data() {
    let durable = bytes(b'd', 100);
    let mut fx = Fixture::with(&[("a", &durable)]);
    fx.tracker
        .link(Path::new("a"), Path::new("b"))
        .expect("link");
    fx.write("b", 0, b"unsynced");
    fx.tracker.unlink(Path::new("a")).expect("unlink a");
    let purged = fx.tracker.fsyncdir(Path::new("")).expect("fsyncdir");
    assert!(purged.is_empty());
    assert_eq!(fx.tracker.dirty_blocks(), 1, "still tracked through b");
    fx.tracker.drop_unsynced(Mode::All, 0).expect("drop");
    assert_eq!(fx.names(), ["b"]);
    assert_eq!(fx.read("b"), durable);
}

#[test]
fn link_follows_link2_rules() {
    let mut fx = Fixture::with(&[("a", b"a"), ("b", b"b")]);
    fx.tracker.mkdir(Path::new("d"), 0o755).expect("mkdir");
    let code = |r: std::io::Result<()>| r.map_err(|e| e.raw_os_error());
    let tracker = &mut fx.tracker;
    assert_eq!(
        code(tracker.link(Path::new("a"), Path::new("b"))),
        Err(Some(libc::EEXIST))
    );
    assert_eq!(
        code(tracker.link(Path::new("a"), Path::new(".lossyfs-trash/a"))),
        Err(Some(libc::EPERM))
    );
    assert_eq!(
        code(tracker.link(Path::new("d"), Path::new("e"))),
        Err(Some(libc::EPERM))
    );
    assert_eq!(
        code(tracker.link(Path::new("missing"), Path::new("m"))),
        Err(Some(libc::ENOENT))
    );
    assert_eq!(tracker.dirty_entries(), 1, "only the mkdir");
}
