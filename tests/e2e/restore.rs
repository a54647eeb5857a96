//! `restore` end to end (contract §11): refused while a relay holds the ledger, and for a
//! backup that is corrupt or of a newer schema, with the ledger untouched; the ledger it
//! replaces kept beside it with its WAL folded in, the backup in place with the old owner and
//! mode, marked recovering since the snapshot minus 5 minutes; the core's journal entered
//! (a missing booking written DONE/0000, a FAILED row the core booked settled, a double
//! reported); a backup without a snapshot time needs --since. SQLite's alone.
//!
//! The ledgers restored onto are read here with connections of the test's own, never through
//! `TempLedger`'s store: that store holds the ledger open (its "use" lock) for the test's
//! life, and restore is refused while anything does.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use rusqlite::{Connection, OpenFlags};
use serde_json::Value;

use crate::util::*;

/// `restore --from FROM --db DB EXTRA…`
fn restore(db: &str, from: &Path, extra: &[&str]) -> Run {
    let from = from.to_str().expect("UTF-8 temp path");
    tool("restore", &[&["--from", from, "--db", db], extra].concat())
}

/// `backup --db DB --to TO`, which must succeed; its `snapshot_at`.
fn backup_to(db: &str, to: &Path) -> String {
    let r = tool(
        "backup",
        &["--db", db, "--to", to.to_str().unwrap(), "--json"],
    );
    r.expect_code(EXIT_SETTLED);
    r.json()["snapshot_at"]
        .as_str()
        .expect("snapshot_at")
        .to_string()
}

/// A folder for backups and journals, beside no ledger.
fn side_dir() -> tempfile::TempDir {
    tempfile::tempdir().expect("temp dir")
}

/// A ledger file at `path` holding a DONE row for each of `guids`, made and closed (no lock
/// is held afterwards).
fn ledger_with(path: &Path, guids: &[&str]) {
    let l = ledger::Ledger::open(path).expect("make a ledger");
    for g in guids {
        l.connection()
            .execute(
                "INSERT INTO tx (guid, state, rsp_code) VALUES (?1, 'DONE', '0000')",
                [g],
            )
            .expect("insert a row");
    }
}

/// Opens the file at `path` read-only, alone.
fn read_only(path: &Path) -> Connection {
    Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY).expect("open read-only")
}

/// The (guid, state, rsp_code, response) of every row of the file at `path`, by GUID.
type RawRow = (String, String, Option<String>, Option<Vec<u8>>);
fn raw_rows(path: &Path) -> Vec<RawRow> {
    let c = read_only(path);
    let mut s = c
        .prepare("SELECT guid, state, rsp_code, response FROM tx ORDER BY guid")
        .unwrap();
    s.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap()
}

fn guids(path: &Path) -> Vec<String> {
    raw_rows(path).into_iter().map(|r| r.0).collect()
}

/// The names in `dir`, sorted.
fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Asserts a refusal: exit 1, one line on stderr saying `what`, nothing on stdout.
fn assert_refused(r: &Run, what: &str) {
    r.expect_code(EXIT_FATAL);
    let err = r.stderr().trim_end();
    assert!(!err.contains('\n'), "one line: {err}");
    assert!(err.starts_with("restore: ") && err.contains(what), "{err}");
    assert_eq!(r.stdout(), "");
}

/// The recovery mark of the file at `path`: (since, who).
fn recovery_mark(path: &Path) -> Option<(String, String)> {
    use rusqlite::OptionalExtension;
    read_only(path)
        .query_row(
            "SELECT since, who FROM ledger_recovery WHERE id = 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()
        .unwrap()
}

/// `instant` minus five minutes, as the ledger stores it.
fn five_minutes_before(instant: &str) -> String {
    ledger::recovery::minus_secs(instant, 300).expect("an RFC 3339 instant")
}

sqlite_only! { "restore puts back an SQLite file",
fn refused_while_a_relay_holds_the_ledger() {
    let s = Scene::new().core(&[]).relay(&[]).build();
    assert_code(&s.call(&msg("G-RS-BUSY-1", 5, "")), "0000");
    let side = side_dir();
    let file = side.path().join("b.db");
    backup_to(s.db.arg(), &file);
    assert_code(&s.call(&msg("G-RS-BUSY-2", 5, "")), "0000");
    let before = names_in(s.db.dir());

    let r = restore(s.db.arg(), &file, &[]);
    assert_refused(&r, "in use by a relay");
    assert_eq!(names_in(s.db.dir()), before, "nothing kept, nothing made");
    assert_eq!(names_in(side.path()), ["b.db"]);
    assert_eq!(guids(s.db.path()), ["G-RS-BUSY-1", "G-RS-BUSY-2"]);
    assert_code(&s.call(&msg("G-RS-BUSY-3", 5, "")), "0000");
}}

sqlite_only! { "restore checks an SQLite backup",
fn a_corrupt_backup_or_a_newer_schema_is_refused() {
    let db = TempLedger::new();
    ledger_with(db.path(), &["G-RS-OLD"]);
    let side = side_dir();
    let src = side.path().join("src.db");
    ledger_with(&src, &["G-RS-B1", "G-RS-B2"]);
    let file = side.path().join("b.db");
    backup_to(src.to_str().unwrap(), &file);
    let before = names_in(db.dir());

    let newer = side.path().join("newer.db");
    fs::copy(&file, &newer).unwrap();
    Connection::open(&newer)
        .unwrap()
        .execute_batch("PRAGMA user_version = 99")
        .unwrap();
    assert_refused(&restore(db.arg(), &newer, &[]), "newer than this build knows");

    let torn = side.path().join("torn.db");
    let mut bytes = fs::read(&file).unwrap();
    let half = bytes.len() / 2;
    bytes[4096..half].fill(0x5a);
    fs::write(&torn, bytes).unwrap();
    assert_refused(&restore(db.arg(), &torn, &[]), "integrity check");

    assert_refused(
        &restore(db.arg(), &side.path().join("none.db"), &[]),
        "no backup file",
    );
    assert_eq!(names_in(db.dir()), before, "the ledger untouched");
    assert_eq!(guids(db.path()), ["G-RS-OLD"]);

    let r = restore("postgres://txrelay:secret@localhost/txrelay", &file, &[]);
    r.expect_code(EXIT_USAGE);
    let err = r.stderr().trim_end();
    assert!(!err.contains('\n') && !err.contains("secret"), "{err}");
    assert!(err.contains("PITR") && err.contains("inspect recovery --begin"), "{err}");
}}

sqlite_only! { "restore keeps an SQLite file's WAL, owner and mode",
fn the_ledger_replaced_is_kept_and_the_backup_in_place_is_recovering() {
    let mut s = Scene::new().core(&[]).relay(&[]).build();
    let before_backup = msg("G-RS-KEEP-1", 5, "");
    assert_code(&s.call(&before_backup), "0000");
    let side = side_dir();
    let file = side.path().join("b.db");
    let snapshot_at = backup_to(s.db.arg(), &file);
    let after_backup = msg("G-RS-KEEP-2", 5, "");
    assert_code(&s.call(&after_backup), "0000");
    // Killed: its last claims may still be in the -wal.
    s.relay_mut().kill();
    let db = s.db.path();
    fs::set_permissions(db, fs::Permissions::from_mode(0o640)).unwrap();
    // As root, the ledger is given to another user, which the restored one must keep.
    let _ = std::os::unix::fs::chown(db, Some(65534), Some(65534));
    let owner = fs::metadata(db).map(|m| (m.uid(), m.gid())).unwrap();

    let r = restore(s.db.arg(), &file, &[]);
    r.expect_code(EXIT_SETTLED);
    let line = r.stdout().trim_end();
    let since = five_minutes_before(&snapshot_at);
    for part in [
        format!("restore: {} from {}", s.db.arg(), file.display()),
        format!("(snapshot_at={snapshot_at})"),
        "1 rows (DONE 1)".to_string(),
        format!("recovering since {since}"),
        "kept ".to_string(),
        ".before-restore-".to_string(),
        "journal: none given".to_string(),
    ] {
        assert!(line.contains(&part), "{part:?} in {line}");
    }

    let kept: Vec<String> = names_in(s.db.dir())
        .into_iter()
        .filter(|n| n.starts_with("ledger.db.before-restore-"))
        .collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert!(!s.db.dir().join("ledger.db-wal").exists(), "no -wal of the old ledger");
    assert_eq!(guids(db), ["G-RS-KEEP-1"], "the backup's rows");
    let kept = s.db.dir().join(&kept[0]);
    assert_eq!(
        guids(&kept),
        ["G-RS-KEEP-1", "G-RS-KEEP-2"],
        "the old ledger, its -wal folded in"
    );
    let meta = fs::metadata(db).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o640);
    assert_eq!((meta.uid(), meta.gid()), owner);

    let (mark_since, who) = recovery_mark(db).expect("recovering");
    assert_eq!(mark_since, since);
    assert!(who.starts_with("restore (by "), "{who}");
    let events: Vec<String> = {
        let c = read_only(db);
        let mut st = c.prepare("SELECT event FROM ledger_events ORDER BY id").unwrap();
        st.query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect()
    };
    assert!(events.contains(&"restored".to_string()), "{events:?}");
    // The backup itself is as it was: still a sealed copy.
    assert!(recovery_mark(&file).is_none());
}}

/// The journal's bookings of `guid`, as the core wrote them.
fn journal_lines(journal: &Path, guid: &str) -> Vec<Value> {
    fs::read_to_string(journal)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["guid"] == guid)
        .collect()
}

sqlite_only! { "restore enters the core's journal into an SQLite file",
fn the_journal_enters_what_the_core_booked_and_reports_a_double() {
    let side = side_dir();
    let journal = side.path().join("journal.jsonl");
    let s = Scene::new()
        .core(&["--journal", journal.to_str().unwrap()])
        .relay(&[])
        .build();
    let done = msg("G-RS-J-DONE", 100, "");
    let failed = msg("G-RS-J-FAILED", 300, "");
    let double = msg("G-RS-J-DOUBLE", 400, "");
    assert_code(&s.call(&done), "0000");
    // A send the relay took for never sent, which had reached the core all the same.
    s.put(RowSpec::failed(&failed));
    let booking = s.core().book(&failed);
    let file = side.path().join("b.db");
    backup_to(s.db.arg(), &file);
    // After the backup: answered 0000, then forgotten by the restore.
    let missing = msg("G-RS-J-MISSING", 200, "");
    let answered = s.call(&missing);
    assert_code(&answered, "0000");
    s.core().book(&double);
    s.core().book(&double);

    let db = TempLedger::new();
    let r = restore(
        db.arg(),
        &file,
        &["--journal", journal.to_str().unwrap(), "--json"],
    );
    r.expect_code(EXIT_SETTLED);
    let j = r.json();
    assert_eq!(j["tool"], "restore", "{j}");
    assert_eq!(j["before_restore"], Value::Null, "{j}");
    assert!(j["snapshot_at"].is_string() && j["recovering_since"].is_string(), "{j}");
    let jr = &j["journal"];
    assert_eq!(jr["bookings"], 5, "{j}");
    assert_eq!(
        (&jr["written"], &jr["settled"], &jr["already_done"], &jr["before_window"]),
        (&Value::from(1), &Value::from(1), &Value::from(1), &Value::from(0)),
        "{j}"
    );
    assert_eq!(jr["doubles"], serde_json::json!(["G-RS-J-DOUBLE"]), "{j}");
    assert_eq!(j["rows"]["DONE"], 3, "{j}");

    let rows = raw_rows(db.path());
    let row = |g: &str| rows.iter().find(|r| r.0 == g).cloned();
    let (_, state, code, response) = row("G-RS-J-MISSING").expect("written");
    assert_eq!((state.as_str(), code.as_deref()), ("DONE", Some("0000")));
    assert_eq!(response.as_deref(), Some(&answered[..]), "the reply the channel got");
    let line = &journal_lines(&journal, "G-RS-J-MISSING")[0];
    assert_eq!(answered, booked_reply(&missing, line));
    let (_, state, _, response) = row("G-RS-J-FAILED").expect("kept");
    assert_eq!(state, "DONE", "settled");
    assert_eq!(response.unwrap(), booked_reply(&failed, &booking));
    assert!(row("G-RS-J-DOUBLE").is_none(), "a double is left alone");
    let reason: String = read_only(db.path())
        .query_row(
            "SELECT reason FROM tx_history WHERE guid = 'G-RS-J-FAILED' ORDER BY id DESC",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(
        reason.starts_with("restore: the core's journal shows it booked (core_ref "),
        "{reason}"
    );

    // A relay on the restored ledger answers the resends from the rows, booking nothing.
    let relay = start_relay(&db, &s.core().url(), &[]);
    assert_eq!(call(&relay.addr, &missing), answered);
    assert_eq!(call(&relay.addr, &failed), booked_reply(&failed, &booking));
    for m in [&done, &failed, &missing] {
        assert_eq!(s.core().bookings(&guid_of(m)), 1, "{}", guid_of(m));
    }
}}

sqlite_only! { "restore reads journals for an SQLite file",
fn a_bad_journal_refuses_the_restore_before_anything_changes() {
    let db = TempLedger::new();
    ledger_with(db.path(), &["G-RS-BADJ"]);
    let side = side_dir();
    let file = side.path().join("b.db");
    backup_to(db.arg(), &file);
    let journal = side.path().join("bad.jsonl");
    fs::write(
        &journal,
        "{\"guid\":\"G1\",\"core_ref\":\"C1\",\"amount\":5,\"booked_at\":\"2026-12-06T10:00:00Z\"}\n\
         {\"guid\":\"G2\",\"core_ref\":\"C2\"\n",
    )
    .unwrap();
    let before = names_in(db.dir());
    let r = restore(db.arg(), &file, &["--journal", journal.to_str().unwrap()]);
    assert_refused(&r, &format!("journal {} line 2", journal.display()));
    assert_eq!(names_in(db.dir()), before);
}}

sqlite_only! { "restore reads an SQLite backup's snapshot time",
fn a_backup_without_a_snapshot_time_needs_since() {
    let side = side_dir();
    // A ledger file copied by hand, closed: no seal, no snapshot time.
    let plain = side.path().join("plain.db");
    ledger_with(&plain, &["G-RS-PLAIN"]);
    let db = TempLedger::new();
    assert_refused(&restore(db.arg(), &plain, &[]), "--since");
    assert!(!db.path().exists(), "nothing made");

    let r = restore(db.arg(), &plain, &["--since", "2026-12-06T11:00:00+01:00", "--json"]);
    r.expect_code(EXIT_SETTLED);
    let j = r.json();
    assert_eq!(j["snapshot_at"], Value::Null, "{j}");
    assert_eq!(j["recovering_since"], "2026-12-06T10:00:00Z", "{j}");
    assert_eq!(guids(db.path()), ["G-RS-PLAIN"]);
    assert_eq!(
        recovery_mark(db.path()).map(|m| m.0).as_deref(),
        Some("2026-12-06T10:00:00Z")
    );

    let r = restore(db.arg(), &plain, &["--since", "yesterday"]);
    r.expect_code(EXIT_USAGE);
    assert!(r.stderr().contains("--since"), "{}", r.stderr());
}}
