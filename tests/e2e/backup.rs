//! `backup` end to end: a backup taken while the relay serves channels holds every GUID
//! answered before it, and a relay restored from it (by `restore`) replays their stored
//! replies without booking again; the file is one self-contained, sound SQLite file; a copy
//! put over a ledger by hand is refused by the relay and the batch tools; an existing file is
//! refused without --force; a failed backup leaves nothing behind. SQLite's alone (a
//! PostgreSQL ledger is refused, pointing to the database's own tools). `sized`: how many
//! copies are kept (`--keep`) and the room a copy must leave (`--min-free`).

mod sized;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;

use rusqlite::{Connection, OpenFlags};

use crate::util::*;

/// `backup --db DB --to TO EXTRA…`
fn backup(db: &str, to: &Path, extra: &[&str]) -> Run {
    let to = to.to_str().expect("UTF-8 temp path");
    tool("backup", &[&["--db", db, "--to", to], extra].concat())
}

/// The names in `dir`, sorted.
fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("read the directory")
        .map(|e| {
            e.expect("an entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    names
}

/// A directory of the test's own for backups, beside nothing else.
fn backup_dir() -> tempfile::TempDir {
    tempfile::tempdir().expect("temp dir")
}

/// A fresh ledger put back from the backup at `file` by `restore` (a copy put in place by
/// hand is refused by every tool that would write it).
fn restored_from(file: &Path) -> TempLedger {
    let restored = TempLedger::new();
    let from = file.to_str().expect("UTF-8 temp path");
    tool("restore", &["--from", from, "--db", restored.arg()]).expect_code(EXIT_SETTLED);
    restored
}

/// Opens `file` read-only, alone (nothing beside it is needed).
fn open_alone(file: &Path) -> Connection {
    Connection::open_with_flags(file, OpenFlags::SQLITE_OPEN_READ_ONLY).expect("open the backup")
}

/// A transfer the relay answered: (message, reply).
type Answered = (Vec<u8>, Vec<u8>);

#[test]
fn a_backup_under_load_restores_every_guid_answered_before_it() {
    const THREADS: usize = 4;
    let s = Scene::new().core(&[]).relay(&[]).build();
    let answered: Arc<Mutex<Vec<Answered>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let senders: Vec<_> = (0..THREADS)
        .map(|t| {
            let (answered, stop, addr) = (answered.clone(), stop.clone(), s.addr().to_string());
            thread::spawn(move || {
                let mut ch = Channel::connect(&addr);
                let mut i = 0;
                while !stop.load(Ordering::Relaxed) {
                    let m = msg(&format!("G-BK-{t}-{i}"), 100 + i, "");
                    let reply = ch.call(&m);
                    assert_code(&reply, "0000");
                    answered.lock().unwrap().push((m, reply));
                    i += 1;
                }
            })
        })
        .collect();
    assert!(
        eventually(WAIT, || answered.lock().unwrap().len() >= 100),
        "the relay answers"
    );
    let before = answered.lock().unwrap().clone();
    let dir = backup_dir();
    let file = dir.path().join("ledger.backup");
    let r = backup(s.db.arg(), &file, &[]);
    r.expect_code(EXIT_SETTLED);
    assert!(
        eventually(WAIT, || answered.lock().unwrap().len()
            >= before.len() + 100),
        "the relay went on answering during and after the backup"
    );
    stop.store(true, Ordering::Relaxed);
    for h in senders {
        h.join().expect("a sender");
    }
    assert!(
        r.stdout().starts_with("backup: ") && r.stdout().contains(" rows (DONE "),
        "{}",
        r.stdout()
    );
    assert_eq!(names_in(dir.path()), ["ledger.backup"], "no temp file left");

    let restored = restored_from(&file);
    let in_backup: BTreeSet<String> = restored.rows().into_iter().map(|r| r.guid).collect();
    for (m, reply) in &before {
        let guid = guid_of(m);
        assert!(
            in_backup.contains(&guid),
            "{guid} answered before the backup"
        );
        let row = restored.row(&guid).unwrap();
        assert_eq!(row.state, State::Done, "{guid}");
        assert_eq!(
            row.response.as_deref(),
            Some(&reply[..]),
            "{guid}: stored reply"
        );
    }
    let relay = start_relay(&restored, &s.core().url(), &[]);
    for (m, reply) in before.iter().step_by(7) {
        let again = call(&relay.addr, m);
        assert_eq!(
            &again, reply,
            "a resend to the restored relay replays the reply"
        );
        assert_eq!(s.core().bookings(&guid_of(m)), 1, "booked once");
    }
    assert!(
        s.core().by_guid().values().all(|&n| n == 1),
        "nothing booked twice"
    );
}

#[test]
fn the_backup_is_one_self_contained_sound_file() {
    let s = Scene::new().core(&[]).relay(&[]).build();
    // A reader whose snapshot is older than the calls: no checkpoint copies a frame past it
    // into the file (the relay's checkpointer runs every 100 ms, and a loaded machine could
    // otherwise let it copy all 20 rows before `cp`), so the rows stay in the -wal alone.
    let reader = Connection::open(s.db.path()).unwrap();
    reader.execute_batch("BEGIN").unwrap();
    let _: i64 = reader
        .query_row("SELECT count(*) FROM tx", [], |r| r.get(0))
        .unwrap();
    for i in 0..20 {
        assert_code(&s.call(&msg(&format!("G-BK-ONE-{i}"), 1 + i, "")), "0000");
    }
    assert!(
        Path::new(&format!("{}-wal", s.db.arg())).exists(),
        "the relay's rows are in its -wal"
    );
    // Why `cp ledger.db` is no backup: the copy alone lacks what the -wal holds.
    let copied = backup_dir();
    let cp = copied.path().join("cp.db");
    std::fs::copy(s.db.path(), &cp).unwrap();
    drop(reader);
    let in_cp = open_alone(&cp).query_row("SELECT count(*) FROM tx", [], |r| r.get::<_, i64>(0));
    assert!(
        !matches!(in_cp, Ok(20)),
        "a plain copy has lost rows: {in_cp:?}"
    );
    let dir = backup_dir();
    let file = dir.path().join("one.db");
    let r = backup(s.db.arg(), &file, &["--json"]);
    r.expect_code(EXIT_SETTLED);
    let j = r.json();
    assert_eq!(j["tool"], "backup", "{j}");
    assert_eq!(j["rows"]["DONE"], 20, "{j}");
    assert_eq!(j["total"], 20, "{j}");
    assert_eq!(j["bytes"], std::fs::metadata(&file).unwrap().len(), "{j}");
    assert_eq!(names_in(dir.path()), ["one.db"], "no -wal, no temp file");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "readable by its owner only");
    }

    let conn = open_alone(&file);
    let check: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(check, "ok");
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(
        mode, "delete",
        "a rollback journal: nothing to carry beside it"
    );
    let n: i64 = conn
        .query_row("SELECT count(*) FROM tx WHERE state = 'DONE'", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(n, 20);
}

#[test]
fn an_existing_file_is_refused_without_force_and_replaced_with_it() {
    let s = Scene::new()
        .rows([RowSpec::unknown(&msg("G-BK-EX", 5, ""))])
        .build();
    let dir = backup_dir();
    let file = dir.path().join("taken.db");
    std::fs::write(&file, b"yesterday's backup").unwrap();

    let r = backup(s.db.arg(), &file, &[]);
    r.expect_code(EXIT_FATAL);
    assert_eq!(r.stdout(), "");
    let err = r.stderr().trim_end();
    assert!(!err.contains('\n'), "one line: {err}");
    assert!(
        err.contains(file.to_str().unwrap()) && err.contains("--force"),
        "{err}"
    );
    assert_eq!(
        std::fs::read(&file).unwrap(),
        b"yesterday's backup",
        "untouched"
    );
    assert_eq!(names_in(dir.path()), ["taken.db"]);

    let r = backup(s.db.arg(), &file, &["--force"]);
    r.expect_code(EXIT_SETTLED);
    assert!(r.stdout().contains("1 rows (UNKNOWN 1)"), "{}", r.stdout());
    assert_eq!(names_in(dir.path()), ["taken.db"]);
    let state: String = open_alone(&file)
        .query_row("SELECT state FROM tx WHERE guid = 'G-BK-EX'", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(state, "UNKNOWN");
}

#[test]
fn a_failed_backup_leaves_no_file_behind() {
    let s = Scene::new()
        .rows([RowSpec::unknown(&msg("G-BK-FAIL", 5, ""))])
        .build();
    let dir = backup_dir();

    let nowhere: PathBuf = dir.path().join("no-such-dir").join("b.db");
    let r = backup(s.db.arg(), &nowhere, &[]);
    r.expect_code(EXIT_FATAL);
    assert!(r.stderr().contains("no-such-dir"), "{}", r.stderr());
    assert_eq!(names_in(dir.path()), Vec::<String>::new());

    // The temporary file is made, then the copy fails: it goes again.
    let not_a_ledger = dir.path().join("notes.db");
    Connection::open(&not_a_ledger)
        .unwrap()
        .execute_batch("CREATE TABLE notes (t TEXT)")
        .unwrap();
    let r = backup(
        not_a_ledger.to_str().unwrap(),
        &dir.path().join("b.db"),
        &[],
    );
    r.expect_code(EXIT_FATAL);
    assert!(r.stderr().contains("not a ledger"), "{}", r.stderr());
    assert_eq!(
        names_in(dir.path()),
        ["notes.db"],
        "no temp file, no backup"
    );

    // A directory as --to, or as --db.
    let r = backup(s.db.arg(), dir.path(), &["--force"]);
    r.expect_code(EXIT_FATAL);
    assert!(r.stderr().contains("a directory"), "{}", r.stderr());
    let r = backup(dir.path().to_str().unwrap(), &dir.path().join("b.db"), &[]);
    r.expect_code(EXIT_FATAL);
    assert!(r.stderr().contains("not a ledger"), "{}", r.stderr());
    assert_eq!(names_in(dir.path()), ["notes.db"]);

    // Onto the ledger itself, even with --force: refused, the ledger as it was.
    let before = rows_by_guid(&s.db);
    for target in [s.db.arg().to_string(), format!("{}-wal", s.db.arg())] {
        let r = backup(s.db.arg(), Path::new(&target), &["--force"]);
        r.expect_code(EXIT_FATAL);
        assert!(
            r.stderr().contains("the ledger's own file"),
            "{}",
            r.stderr()
        );
    }
    assert_eq!(rows_by_guid(&s.db), before);
}

#[test]
fn a_missing_ledger_or_a_postgres_url_is_one_line() {
    let dir = backup_dir();
    let missing = dir.path().join("ledger.db");
    let r = backup(missing.to_str().unwrap(), &dir.path().join("b.db"), &[]);
    r.expect_code(EXIT_FATAL);
    let err = r.stderr().trim_end();
    assert!(!err.contains('\n'), "one line: {err}");
    assert!(err.contains("no ledger at"), "{err}");
    assert_eq!(
        names_in(dir.path()),
        Vec::<String>::new(),
        "no ledger created"
    );

    let r = backup(
        "postgres://txrelay:secret@localhost/txrelay",
        &dir.path().join("b.db"),
        &[],
    );
    assert_backup_refused_postgres(&r);
    let err = r.stderr();
    assert!(!err.contains("secret"), "the password is masked: {err}");
    assert_eq!(names_in(dir.path()), Vec::<String>::new());
}

#[test]
fn a_backup_copied_over_a_ledger_by_hand_is_refused_by_the_relay_and_the_tools() {
    let s = Scene::new()
        .core(&[])
        .rows([RowSpec::unknown(&msg("G-BK-CP", 5, "")).age(OLD)])
        .build();
    let dir = backup_dir();
    let file = dir.path().join("b.db");
    backup(s.db.arg(), &file, &[]).expect_code(EXIT_SETTLED);
    // The old habit: `cp backup.db ledger.db`.
    let copied = TempLedger::new();
    std::fs::copy(&file, copied.path()).expect("copy the backup over a ledger");
    let bytes = std::fs::read(copied.path()).unwrap();

    let relay = Run::command(
        relay_command(&copied, &s.core().url(), &[]),
        std::time::Duration::from_secs(30),
    );
    assert!(
        matches!(relay.code, Some(c) if c != 0),
        "the relay refuses it: {relay:?}"
    );
    assert!(
        !relay.stdout().contains("listening on"),
        "{}",
        relay.stdout()
    );
    assert!(
        relay.stderr().lines().any(|l| l.contains("restore")),
        "a line naming restore: {}",
        relay.stderr()
    );
    for r in [
        resolve(&copied, &s.core().url(), &["--min-age", "60"]),
        reprocess(&copied, &s.core().url(), &["--max-attempts", "3"]),
    ] {
        assert!(matches!(r.code, Some(c) if c != 0), "{r:?}");
        assert!(
            r.stderr().contains("restore"),
            "{:?}: {}",
            r.argv,
            r.stderr()
        );
    }
    assert_eq!(
        std::fs::read(copied.path()).unwrap(),
        bytes,
        "nothing written to it"
    );
    assert_eq!(
        s.core().inquiries() + s.core().total_bookings(),
        0,
        "the core was not asked"
    );
}

/// `backup --to` an idle ledger (no process holds it, its `-wal` still beside it, as a killed
/// relay leaves it) is refused with --force too, naming `restore`: the snapshot renamed onto it
/// would meet the old WAL, which SQLite replays into whatever file has the name.
#[test]
fn a_backup_onto_an_idle_ledger_with_its_wal_is_refused_naming_restore() {
    let s = Scene::new()
        .rows([RowSpec::unknown(&msg("G-BK-IDLE", 5, ""))])
        .build();
    let dir = backup_dir();
    let target = dir.path().join("other.db");
    // A ledger with its -wal beside it, held by nobody.
    let conn = Connection::open(&target).unwrap();
    conn.execute_batch("PRAGMA journal_mode=WAL; CREATE TABLE tx (guid TEXT PRIMARY KEY);")
        .unwrap();
    let mut wal = target.clone().into_os_string();
    wal.push("-wal");
    assert!(Path::new(&wal).exists(), "the WAL is beside it");
    let before = std::fs::read(&target).unwrap();
    let r = backup(s.db.arg(), &target, &["--force"]);
    r.expect_code(EXIT_FATAL);
    let err = r.stderr().trim_end();
    assert!(!err.contains('\n'), "one line: {err}");
    assert!(
        err.contains("is a ledger") && err.contains("restore"),
        "{err}"
    );
    assert_eq!(std::fs::read(&target).unwrap(), before, "untouched");
    drop(conn);
}
