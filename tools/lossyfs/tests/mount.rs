//! lossyfs mounted for real: files written through the mount with std::fs, then a drop (or a
//! clean unmount), then the backing folder checked.

mod common;

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::Path;

use common::{Lossy, fuse_or_skip, numbers};

fn fsync_dir(dir: &Path) {
    File::open(dir)
        .expect("open dir")
        .sync_all()
        .expect("fsyncdir");
}

#[test]
fn drop_all_keeps_what_was_synced_and_forgets_the_rest() {
    if !fuse_or_skip("drop_all_keeps_what_was_synced_and_forgets_the_rest") {
        return;
    }
    let mut fs = Lossy::start(&[]);
    let m = fs.mnt.clone();
    // Durable: a file and its entry, a directory and a file in it.
    let durable: Vec<u8> = (0..10_000u32).map(|i| (i % 253) as u8).collect();
    let mut f = File::create(m.join("kept")).expect("create");
    f.write_all(&durable).expect("write");
    f.sync_all().expect("fsync");
    fs::create_dir(m.join("dir")).expect("mkdir");
    fs::write(m.join("dir/inner"), b"inner").expect("write inner");
    File::open(m.join("dir/inner"))
        .expect("open")
        .sync_data()
        .expect("fdatasync");
    fsync_dir(&m.join("dir"));
    fsync_dir(&m);
    // Not durable: an overwrite and an append, a new file, an unlink, a rename over a file.
    f.write_all_at(b"OVERWRITTEN", 5000).expect("overwrite");
    f.write_all_at(b"appended", 10_000).expect("append");
    drop(f);
    fs::write(m.join("new"), b"never synced").expect("new file");
    fs::write(m.join("dir/other"), b"other").expect("other file");
    fs::remove_file(m.join("dir/inner")).expect("unlink");
    fs::rename(m.join("dir/other"), m.join("kept")).expect("rename over kept");
    assert_eq!(fs::read(m.join("kept")).expect("read"), b"other");
    let names: Vec<_> = fs::read_dir(&m)
        .expect("readdir")
        .map(|e| e.expect("e").file_name())
        .collect();
    assert!(
        !names.iter().any(|n| n == ".lossyfs-trash"),
        "trash visible: {names:?}"
    );
    assert!(
        fs::metadata(m.join(".lossyfs-trash")).is_err(),
        "trash reachable"
    );

    let stats = fs.command("stats");
    assert!(
        stats.starts_with("ops ") && stats.ends_with(" frozen 0"),
        "{stats}"
    );
    let reply = fs.drop_and_exit("all", 1);
    let n = numbers(&reply);
    assert_eq!(n[0], n[1], "all blocks dropped: {reply}");
    assert_eq!(n[2], n[3], "all entries dropped: {reply}");
    assert_eq!(
        n[3], 4,
        "create new, create other, unlink, rename, and nothing else: {reply}"
    );

    let b = &fs.backing;
    assert_eq!(fs::read(b.join("kept")).expect("kept"), durable);
    assert_eq!(fs::read(b.join("dir/inner")).expect("inner"), b"inner");
    assert!(!b.join("new").exists());
    assert!(!b.join("dir/other").exists());
    assert!(!b.join(".lossyfs-trash").exists());
}

#[test]
fn sigterm_unmounts_cleanly_and_keeps_everything() {
    if !fuse_or_skip("sigterm_unmounts_cleanly_and_keeps_everything") {
        return;
    }
    let mut fs = Lossy::start(&[]);
    fs::write(fs.mnt.join("a"), b"not synced but kept").expect("write");
    fs::create_dir(fs.mnt.join("d")).expect("mkdir");
    fs::write(fs.mnt.join("d/x"), b"x").expect("write");
    fs::remove_file(fs.mnt.join("d/x")).expect("unlink");
    let status = fs.terminate();
    assert!(status.success(), "{status}");
    assert_eq!(
        fs::read(fs.backing.join("a")).expect("a"),
        b"not synced but kept"
    );
    assert!(fs.backing.join("d").is_dir());
    assert!(!fs.backing.join("d/x").exists());
    assert!(!fs.backing.join(".lossyfs-trash").exists());
    assert!(!fs.mnt.join("a").exists(), "still mounted");
}

#[test]
fn freeze_fails_every_operation_with_eio() {
    if !fuse_or_skip("freeze_fails_every_operation_with_eio") {
        return;
    }
    let mut fs = Lossy::start(&[]);
    let path = fs.mnt.join("f");
    let mut f = OpenOptions::new()
        .create_new(true)
        .write(true)
        .open(&path)
        .expect("create");
    f.write_all(b"before").expect("write");
    assert_eq!(
        fs.command("stats"),
        "ops 2 writes 1 syncs 0 dirty_blocks 1 dirty_entries 1 frozen 0"
    );
    assert_eq!(fs.command("freeze"), "frozen");
    let eio = Some(libc::EIO);
    assert_eq!(
        f.write_all(b"after").map_err(|e| e.raw_os_error()),
        Err(eio)
    );
    assert_eq!(f.sync_all().map_err(|e| e.raw_os_error()), Err(eio));
    assert_eq!(fs::read(&path).map_err(|e| e.raw_os_error()), Err(eio));
    assert_eq!(
        fs::write(fs.mnt.join("g"), b"g").map_err(|e| e.raw_os_error()),
        Err(eio)
    );
    assert_eq!(
        fs.command("stats"),
        "ops 2 writes 1 syncs 0 dirty_blocks 1 dirty_entries 1 frozen 1"
    );
    drop(f);
    let reply = fs.drop_and_exit("all", 0);
    assert_eq!(reply, "dropped blocks 1 of 1 entries 1 of 1 torn_bytes 0");
    assert!(!fs.backing.join("f").exists());
}

#[test]
fn a_killed_lossyfs_leaves_a_mount_that_umount_l_takes_down() {
    if !fuse_or_skip("a_killed_lossyfs_leaves_a_mount_that_umount_l_takes_down") {
        return;
    }
    let mut fs = Lossy::start(&[]);
    let held = File::create(fs.mnt.join("held")).expect("create");
    let status = fs.kill();
    assert!(!status.success());
    let gone = fs::metadata(fs.mnt.join("held")).map_err(|e| e.raw_os_error());
    assert_eq!(
        gone.map(|_| ()),
        Err(Some(libc::ENOTCONN)),
        "the dead mount answers ENOTCONN"
    );
    let umount = std::process::Command::new("umount")
        .arg("-l")
        .arg(&fs.mnt)
        .status();
    assert!(umount.expect("run umount -l").success());
    assert!(
        fs::read_dir(&fs.mnt)
            .expect("plain folder again")
            .next()
            .is_none()
    );
    drop(held);
}
