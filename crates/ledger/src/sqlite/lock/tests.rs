//! The ledger's locks: one lock file for every name of the file, the slots' conflicts (which
//! hold within one process too: they belong to open files), and the refusals.

use std::os::unix::fs::{PermissionsExt, symlink};

use super::*;

/// A folder with an (empty) ledger file `ledger.db` in it.
fn ledger() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    fs::write(&path, b"").unwrap();
    (dir, path)
}

fn held_by(r: Result<LedgerLock, LockError>) -> Holder {
    match r {
        Err(LockError::Held { by, .. }) => by,
        other => panic!("expected Held, got {other:?}"),
    }
}

fn me() -> Holder {
    Holder::Relay {
        pid: Some(std::process::id()),
    }
}

#[test]
fn the_lock_file_is_named_after_the_canonical_path() {
    let (dir, path) = ledger();
    let real = fs::canonicalize(&path).unwrap();
    let want = PathBuf::from(format!("{}.relay.lock", real.display()));
    fs::create_dir(dir.path().join("sub")).unwrap();
    symlink(&path, dir.path().join("link.db")).unwrap();
    for name in [
        path.clone(),
        dir.path().join("link.db"),
        dir.path().join("sub/../ledger.db"),
    ] {
        assert_eq!(lock_path(&name).unwrap(), want, "{}", name.display());
    }
    // A ledger not made yet: its folder's canonical path and its name.
    let new = dir.path().join("sub/../new.db");
    assert_eq!(canonical(&new).unwrap(), real.with_file_name("new.db"));
}

#[test]
fn a_relay_blocks_a_relay_under_every_name() {
    let (dir, path) = ledger();
    let first = LedgerLock::relay(&path).unwrap();
    let written = fs::read_to_string(first.path()).unwrap();
    assert_eq!(written, format!("{}\n", std::process::id()));
    fs::create_dir(dir.path().join("sub")).unwrap();
    symlink(&path, dir.path().join("link.db")).unwrap();
    for name in [
        path.clone(),
        dir.path().join("link.db"),
        dir.path().join("sub/../ledger.db"),
    ] {
        let e = LedgerLock::relay(&name).unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("already in use by another relay")
                && text.contains(&format!("pid {}", std::process::id()))
                && text.contains(&name.display().to_string()),
            "{text}"
        );
        assert_eq!(held_by(Err(e)), me());
    }
    drop(first);
    // Released with its descriptor: the next one takes it (the stale pid is overwritten).
    let next = LedgerLock::relay(dir.path().join("link.db").as_path()).unwrap();
    assert_eq!(next.kind, Kind::Relay);
}

#[test]
fn a_hard_linked_ledger_is_refused_by_everyone() {
    let (dir, path) = ledger();
    let other = dir.path().join("other.db");
    fs::hard_link(&path, &other).unwrap();
    for name in [&path, &other] {
        for take in [LedgerLock::shared, LedgerLock::relay, LedgerLock::exclusive] {
            match take(name) {
                Err(e @ LockError::HardLinked { names: 2, .. }) => {
                    let text = e.to_string();
                    assert!(
                        text.contains("2 names") && text.contains("-samefile"),
                        "{text}"
                    );
                }
                other => panic!("expected HardLinked, got {other:?}"),
            }
        }
    }
    fs::remove_file(&other).unwrap();
    LedgerLock::relay(&path).expect("one name again");
}

#[test]
fn a_dangling_symlink_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("link.db");
    symlink(dir.path().join("gone.db"), &link).unwrap();
    match LedgerLock::relay(&link) {
        Err(e @ LockError::DanglingSymlink { .. }) => {
            assert!(e.to_string().contains("gone.db"), "{e}");
        }
        other => panic!("expected DanglingSymlink, got {other:?}"),
    }
    assert!(!dir.path().join("gone.db").exists(), "nothing created");
}

#[test]
fn shared_locks_live_together_on_separate_descriptors_too() {
    let (_dir, path) = ledger();
    let a = LedgerLock::shared(&path).unwrap();
    let b = LedgerLock::shared(&path).unwrap();
    assert!(Arc::ptr_eq(&a.file, &b.file), "one descriptor per process");
    // Two descriptors of their own (as two processes would have) share it as well.
    let target = |kind| {
        Target {
            ledger: &path,
            file: &path,
            lock: lock_path(&path).unwrap(),
        }
        .take_new(kind)
    };
    let c = target(Kind::Shared).unwrap();
    let d = target(Kind::Shared).unwrap();
    assert!(!Arc::ptr_eq(&c.file, &d.file));
    // And a relay beside them: the relay's own connections hold the shared slot.
    let relay = LedgerLock::relay(&path).unwrap();
    drop((a, b, c, d, relay));
}

#[test]
fn a_shared_lock_blocks_an_exclusive_one_until_it_goes() {
    let (_dir, path) = ledger();
    let used = LedgerLock::shared(&path).unwrap();
    let e = LedgerLock::exclusive(&path).unwrap_err();
    assert!(e.to_string().contains("is in use (a batch tool"), "{e}");
    assert_eq!(held_by(Err(e)), Holder::Tool);
    drop(used);
    let replacing = LedgerLock::exclusive(&path).unwrap();
    // While it is held, nobody may use or serve the file.
    assert_eq!(held_by(LedgerLock::shared(&path)), Holder::Replacing);
    assert_eq!(held_by(LedgerLock::relay(&path)), Holder::Replacing);
    assert_eq!(held_by(LedgerLock::exclusive(&path)), Holder::Replacing);
    drop(replacing);
    LedgerLock::shared(&path).unwrap();
}

#[test]
fn a_relay_blocks_an_exclusive_lock_naming_its_pid() {
    let (_dir, path) = ledger();
    let _relay = LedgerLock::relay(&path).unwrap();
    let e = LedgerLock::exclusive(&path).unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains(&format!("in use by a relay (pid {}", std::process::id())),
        "{text}"
    );
    // Shared users are not held up by the relay's slot.
    LedgerLock::shared(&path).unwrap();
}

#[test]
fn the_lock_file_is_private_and_left_in_place() {
    let (_dir, path) = ledger();
    let lock = LedgerLock::shared(&path).unwrap();
    let file = lock.path().to_path_buf();
    assert_eq!(
        fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    drop(lock);
    assert!(file.exists(), "the shared slot's holder leaves it");
    let relay = LedgerLock::relay(&path).unwrap();
    drop(relay);
    assert!(file.exists(), "the relay leaves it");
    // An exclusive holder that found it leaves it too.
    drop(LedgerLock::exclusive(&path).unwrap());
    assert!(file.exists());
}

#[test]
fn an_exclusive_holder_removes_the_lock_file_it_made() {
    let (_dir, path) = ledger();
    let lock = LedgerLock::exclusive(&path).unwrap();
    let file = lock.path().to_path_buf();
    assert!(file.exists());
    drop(lock);
    assert!(!file.exists(), "made by it, removed by it");
}

#[test]
fn a_lock_file_replaced_after_its_open_is_not_trusted() {
    let (_dir, path) = ledger();
    let target = Target {
        ledger: &path,
        file: &path,
        lock: lock_path(&path).unwrap(),
    };
    let (opened, _) = target.open().unwrap();
    assert!(target.still_names(&opened).unwrap());
    fs::remove_file(&target.lock).unwrap();
    assert!(!target.still_names(&opened).unwrap(), "gone");
    fs::write(&target.lock, b"").unwrap();
    assert!(!target.still_names(&opened).unwrap(), "another file now");
}

#[test]
fn a_symlink_as_lock_file_is_never_followed() {
    let (dir, path) = ledger();
    let victim = dir.path().join("victim");
    fs::write(&victim, b"keep me").unwrap();
    symlink(&victim, lock_path(&path).unwrap()).unwrap();
    assert!(matches!(
        LedgerLock::relay(&path),
        Err(LockError::Io { .. })
    ));
    assert_eq!(fs::read(&victim).unwrap(), b"keep me");
}

#[test]
fn a_failed_file_operation_keeps_the_system_error_as_its_source() {
    let (dir, path) = ledger();
    let victim = dir.path().join("victim");
    fs::write(&victim, b"keep me").unwrap();
    symlink(&victim, lock_path(&path).unwrap()).unwrap();
    let err = LedgerLock::relay(&path).unwrap_err();
    let LockError::Io { source: io, .. } = &err else {
        panic!("expected Io, got {err:?}");
    };
    // The chain: the system's error is the source, and the message still says it.
    let cause = std::error::Error::source(&err).expect("the system's error as source");
    let cause = cause.downcast_ref::<io::Error>().expect("an io::Error");
    assert_eq!(cause.raw_os_error(), io.raw_os_error());
    assert_eq!(cause.to_string(), io.to_string());
    assert!(err.to_string().starts_with("cannot "), "{err}");
    assert!(err.to_string().ends_with(&format!(": {io}")), "{err}");
    // The ledger's error says it once, in its message, and hands on no source: a chain printed
    // with anyhow's `{:#}` (a tool's fatal line) does not repeat the cause.
    let text = err.to_string();
    let wrapped = crate::error::LedgerError::Lock(Box::new(err));
    assert_eq!(wrapped.to_string(), text);
    assert!(std::error::Error::source(&wrapped).is_none());
}
