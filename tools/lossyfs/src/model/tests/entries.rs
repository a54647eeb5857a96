//! Directory operations: undone without an fsyncdir, kept with one.

use std::path::Path;

use super::{Fixture, bytes};
use crate::model::Mode;

/// create, unlink, rename over an existing file, mkdir.
fn directory_ops(fx: &mut Fixture) {
    let (file, _) = fx
        .tracker
        .create(Path::new("new"), 0o644, true)
        .expect("create");
    fx.tracker.write(&file, 0, b"fresh").expect("write");
    fx.tracker.fsync(&file).expect("fsync");
    fx.tracker.unlink(Path::new("gone")).expect("unlink");
    let renamed = fx
        .tracker
        .rename(Path::new("src"), Path::new("dst"), false)
        .expect("rename over dst");
    assert!(renamed.replaced.is_some());
    fx.tracker.mkdir(Path::new("dir"), 0o755).expect("mkdir");
}

const SEEDED: [(&str, &[u8]); 3] = [("gone", b"gone"), ("src", b"src"), ("dst", b"dst")];

#[test]
fn directory_ops_are_undone_without_fsyncdir() {
    let mut fx = Fixture::with(&SEEDED);
    directory_ops(&mut fx);
    assert_eq!(fx.names(), ["dir", "dst", "new"]);
    assert_eq!(fx.tracker.dirty_entries(), 4);
    let report = fx.tracker.drop_unsynced(Mode::All, 5).expect("drop");
    assert_eq!((report.entries_dropped, report.entries_dirty), (4, 4));
    assert_eq!(fx.names(), ["dst", "gone", "src"]);
    assert_eq!(fx.read("dst"), b"dst");
    assert_eq!(fx.read("src"), b"src");
    assert_eq!(fx.read("gone"), b"gone");
}

#[test]
fn directory_ops_are_kept_with_fsyncdir() {
    let mut fx = Fixture::with(&SEEDED);
    directory_ops(&mut fx);
    fx.fsyncdir();
    assert_eq!(fx.tracker.dirty_entries(), 0);
    let report = fx.tracker.drop_unsynced(Mode::All, 5).expect("drop");
    assert_eq!(report.entries_dirty, 0);
    assert_eq!(fx.names(), ["dir", "dst", "new"]);
    assert_eq!(fx.read("dst"), b"src");
    assert_eq!(fx.read("new"), b"fresh");
}

#[test]
fn fsyncdir_of_another_directory_keeps_only_what_came_before_its_last_operation() {
    let mut fx = Fixture::with(&[]);
    fx.tracker.mkdir(Path::new("d"), 0o755).expect("mkdir");
    fx.tracker
        .create(Path::new("d/inner"), 0o644, true)
        .expect("create in d");
    fx.tracker
        .create(Path::new("outer"), 0o644, true)
        .expect("create in root");
    fx.tracker.fsyncdir(Path::new("d")).expect("fsyncdir d");
    assert_eq!(fx.tracker.dirty_entries(), 1);
    fx.tracker.drop_unsynced(Mode::All, 0).expect("drop");
    assert!(fx.exists("d/inner"));
    assert!(!fx.exists("outer"));
}

#[test]
fn a_durable_unlink_deletes_for_good_and_the_trash_is_hidden_from_renames() {
    let mut fx = Fixture::with(&[("f", &bytes(b'z', 10))]);
    fx.tracker.unlink(Path::new("f")).expect("unlink");
    fx.fsyncdir();
    let trash = fx.root.join(crate::model::TRASH_NAME);
    assert_eq!(std::fs::read_dir(&trash).expect("trash").count(), 0);
    let into_trash = fx
        .tracker
        .rename(Path::new("x"), Path::new(".lossyfs-trash/x"), false);
    assert_eq!(
        into_trash.map_err(|e| e.raw_os_error()),
        Err(Some(libc::EPERM))
    );
    let err = fx
        .tracker
        .rename(Path::new("missing"), Path::new("y"), false);
    assert_eq!(err.map_err(|e| e.raw_os_error()), Err(Some(libc::ENOENT)));
}

#[test]
fn rename_noreplace_and_rmdir_follow_their_rules() {
    let mut fx = Fixture::with(&[("a", b"a"), ("b", b"b")]);
    let noreplace = fx.tracker.rename(Path::new("a"), Path::new("b"), true);
    assert_eq!(
        noreplace.map_err(|e| e.raw_os_error()),
        Err(Some(libc::EEXIST))
    );
    fx.tracker.mkdir(Path::new("d"), 0o700).expect("mkdir");
    fx.tracker
        .rename(Path::new("a"), Path::new("d/a"), false)
        .expect("move in");
    let not_empty = fx.tracker.rmdir(Path::new("d"));
    assert_eq!(
        not_empty.map_err(|e| e.raw_os_error()),
        Err(Some(libc::ENOTEMPTY))
    );
    fx.tracker.unlink(Path::new("d/a")).expect("unlink");
    fx.tracker.rmdir(Path::new("d")).expect("rmdir");
    assert_eq!(fx.names(), ["b"]);
    fx.tracker.drop_unsynced(Mode::All, 0).expect("drop");
    assert_eq!(fx.names(), ["a", "b"]);
    assert_eq!(fx.read("a"), b"a");
}
