//! Hard links through the mount: the backup tool's way to put a finished copy in place
//! (write tmp, fsync it, link tmp to final, unlink tmp, fsync the directory), then `drop all`.

mod common;

use std::fs::{self, File};
use std::io::Write;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;

use common::{Lossy, fuse_or_skip, numbers};

fn fsync_dir(dir: &Path) {
    File::open(dir)
        .expect("open dir")
        .sync_all()
        .expect("fsyncdir");
}

/// Writes and fsyncs `tmp` (its entry made durable too if `durable_tmp`), links it to
/// `final`, checks both names are one file, then unlinks `tmp`. Returns tmp's content.
fn write_link_unlink(m: &Path, durable_tmp: bool) -> Vec<u8> {
    let content: Vec<u8> = (0..20_000u32).map(|i| (i % 241) as u8).collect();
    let mut tmp = File::create(m.join("tmp")).expect("create tmp");
    tmp.write_all(&content).expect("write tmp");
    tmp.sync_all().expect("fsync tmp");
    drop(tmp);
    if durable_tmp {
        fsync_dir(m);
    }
    fs::hard_link(m.join("tmp"), m.join("final")).expect("link tmp to final");
    let (a, b) = (
        fs::metadata(m.join("tmp")).expect("tmp"),
        fs::metadata(m.join("final")).expect("final"),
    );
    assert_eq!(a.ino(), b.ino(), "one file under two names");
    assert_eq!((a.nlink(), b.nlink()), (2, 2));
    fs::remove_file(m.join("tmp")).expect("unlink tmp");
    assert!(!m.join("tmp").exists());
    let kept = fs::metadata(m.join("final")).expect("final");
    assert_eq!(kept.nlink(), 1, "tmp's name in the trash does not count");
    assert_eq!(fs::read(m.join("final")).expect("read final"), content);
    content
}

#[test]
fn link_unlink_fsyncdir_then_drop_all_keeps_final() {
    if !fuse_or_skip("link_unlink_fsyncdir_then_drop_all_keeps_final") {
        return;
    }
    let mut fs = Lossy::start(&[]);
    let m = fs.mnt.clone();
    let content = write_link_unlink(&m, false);
    fsync_dir(&m);
    // create, write, fsync, link, unlink, fsyncdir: all durable.
    assert_eq!(
        fs.command("stats"),
        "ops 6 writes 1 syncs 2 dirty_blocks 0 dirty_entries 0 frozen 0"
    );
    let reply = fs.drop_and_exit("all", 1);
    assert_eq!(reply, "dropped blocks 0 of 0 entries 0 of 0 torn_bytes 0");
    let b = &fs.backing;
    assert_eq!(fs::read(b.join("final")).expect("final"), content);
    assert_eq!(fs::metadata(b.join("final")).expect("final").nlink(), 1);
    assert!(!b.join("tmp").exists());
    assert!(!b.join(".lossyfs-trash").exists());
}

#[test]
fn link_and_unlink_without_fsyncdir_are_undone_by_drop_all() {
    if !fuse_or_skip("link_and_unlink_without_fsyncdir_are_undone_by_drop_all") {
        return;
    }
    let mut fs = Lossy::start(&[]);
    let m = fs.mnt.clone();
    let content = write_link_unlink(&m, true);
    let reply = fs.drop_and_exit("all", 1);
    let n = numbers(&reply);
    assert_eq!((n[2], n[3]), (2, 2), "the link and the unlink: {reply}");
    let b = &fs.backing;
    assert_eq!(fs::read(b.join("tmp")).expect("tmp is back"), content);
    assert_eq!(fs::metadata(b.join("tmp")).expect("tmp").nlink(), 1);
    assert!(!b.join("final").exists());
    assert!(!b.join(".lossyfs-trash").exists());
}

#[test]
fn writes_through_two_names_are_one_file_and_reverted_once() {
    if !fuse_or_skip("writes_through_two_names_are_one_file_and_reverted_once") {
        return;
    }
    let mut fs = Lossy::start(&[]);
    let m = fs.mnt.clone();
    let durable = vec![b'd'; 8192];
    let mut a = File::create(m.join("a")).expect("create a");
    a.write_all(&durable).expect("write a");
    a.sync_all().expect("fsync a");
    fs::hard_link(m.join("a"), m.join("b")).expect("link a to b");
    fsync_dir(&m);
    let b = fs::OpenOptions::new()
        .write(true)
        .open(m.join("b"))
        .expect("open b");
    a.write_all_at(b"through a", 0).expect("write a");
    b.write_all_at(b"through b", 100).expect("write b");
    let stats = fs.command("stats");
    assert!(stats.contains(" dirty_blocks 1 "), "one file: {stats}");
    assert_eq!(
        fs::read(m.join("a")).expect("a"),
        fs::read(m.join("b")).expect("b")
    );
    drop((a, b));
    fs::remove_file(m.join("a")).expect("unlink a");
    fsync_dir(&m); // a's name is gone for good, the file lives on as b
    let reply = fs.drop_and_exit("all", 2);
    assert_eq!(reply, "dropped blocks 1 of 1 entries 0 of 0 torn_bytes 0");
    assert!(!fs.backing.join("a").exists());
    assert_eq!(fs::read(fs.backing.join("b")).expect("b"), durable);
}
