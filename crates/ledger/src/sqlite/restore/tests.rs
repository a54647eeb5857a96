//! `restore` on files of the test's own: the backup put in place, the old ledger kept with its
//! WAL folded in, its owner and mode kept, the recovery mark, every refusal leaving the
//! ledger as it was, and the journal entered.

use std::fs;
use std::os::unix::fs::PermissionsExt;

use rusqlite::config::DbConfig;
use wire::Transfer;

use crate::state::State;

use super::*;
use crate::sqlite::backup::backup;

const WHO: &str = "restore (by tester)";

/// A folder with a ledger path `l.db` in it (no file yet).
fn folder() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("l.db");
    (dir, db)
}

/// A request message for `guid` and `amount`.
fn request(guid: &str, amount: u64) -> Vec<u8> {
    wire::encode_request(&Transfer {
        guid: guid.into(),
        from_account: "1".into(),
        to_account: "2".into(),
        amount,
        memo: String::new(),
    })
    .unwrap()
}

/// Runs `sql` on the ledger at `db` (made if missing) through `Ledger::open`, then closes
/// it: no lock is held afterwards.
fn write(db: &Path, sql: &str) {
    let l = Ledger::open(db).unwrap();
    l.connection().execute_batch(sql).unwrap();
}

/// Inserts a row holding `request(guid, amount)` in `state`.
fn put(db: &Path, guid: &str, state: &str, amount: u64) {
    let l = Ledger::open(db).unwrap();
    l.connection()
        .execute(
            "INSERT INTO tx (guid, tx_code, state, request, attempts) \
             VALUES (?1, 'TRNF', ?2, ?3, 1)",
            rusqlite::params![guid, state, request(guid, amount)],
        )
        .unwrap();
}

/// The GUIDs of the file at `p` (opened read-only, alone), sorted.
fn guids(p: &Path) -> Vec<String> {
    let c = Connection::open_with_flags(p, OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    let mut s = c.prepare("SELECT guid FROM tx ORDER BY guid").unwrap();
    s.query_map([], |r| r.get(0))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap()
}

/// The names in the folder of `p`, sorted.
fn names(p: &Path) -> Vec<String> {
    let mut n: Vec<String> = fs::read_dir(p.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    n.sort();
    n
}

fn run(
    from: &Path,
    db: &Path,
    since: Option<&str>,
    bookings: &[JournalBooking],
) -> Result<Restored> {
    restore(&Restore {
        from,
        db,
        since,
        bookings,
        who: WHO,
    })
}

#[test]
fn the_backup_is_put_in_place_the_old_ledger_kept_and_the_ledger_recovering() {
    let (dir, db) = folder();
    put(&db, "G1", "DONE", 100);
    let b = dir.path().join("b.db");
    let taken = backup(&db, &b, false).unwrap();
    // G2 is claimed after the backup, and left in the -wal when its connection closes.
    {
        let c = Connection::open(&db).unwrap();
        c.set_db_config(DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true)
            .unwrap();
        c.execute_batch("INSERT INTO tx (guid, state) VALUES ('G2', 'SENT')")
            .unwrap();
    }
    let wal = dir.path().join("l.db-wal");
    assert!(fs::metadata(&wal).unwrap().len() > 0, "G2 is in the -wal");
    fs::set_permissions(&db, fs::Permissions::from_mode(0o640)).unwrap();

    let done = run(&b, &db, None, &[]).unwrap();
    assert_eq!(
        done.snapshot_at.as_deref(),
        Some(taken.snapshot_at.as_str())
    );
    let since = minus_secs(&taken.snapshot_at, SNAPSHOT_MARGIN_SECS).unwrap();
    assert_eq!(done.recovering_since, since);
    assert_eq!(done.rows, BTreeMap::from([("DONE".to_string(), 1)]));
    let kept = done.before_restore.clone().unwrap();
    let kept_name = kept.file_name().unwrap().to_string_lossy().into_owned();
    assert!(kept_name.starts_with("l.db.before-restore-"), "{kept_name}");
    assert_eq!(
        kept_name.len(),
        "l.db.before-restore-20261206T100000Z".len()
    );

    let left = names(&db);
    assert!(
        left.iter()
            .all(|n| !n.contains(".restore-") && !n.ends_with("-wal")),
        "no temporary file, no -wal (before anything reads them): {left:?}"
    );
    assert_eq!(guids(&db), ["G1"], "the backup's rows");
    assert_eq!(
        guids(&kept),
        ["G1", "G2"],
        "the old ledger, its -wal folded in"
    );
    let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&db), 0o640, "the mode of the ledger it replaces");

    let l = Ledger::open(&db).expect("a restored ledger is no sealed copy");
    let mark = l.recovery().unwrap().unwrap();
    assert_eq!(
        (mark.since.as_str(), mark.who.as_str()),
        (since.as_str(), WHO)
    );
    let events = l.events(10).unwrap();
    let restored = events.iter().find(|e| e.event == "restored").unwrap();
    assert_eq!(restored.who, WHO);
    assert!(
        restored.detail.as_deref().unwrap().contains("b.db"),
        "{restored:?}"
    );
    assert_eq!(backup_seal::snapshot_at(l.connection()).unwrap(), None);
}

#[test]
fn a_new_ledger_is_made_readable_by_its_owner_only() {
    let (dir, src) = folder();
    put(&src, "G1", "DONE", 100);
    let b = dir.path().join("b.db");
    backup(&src, &b, false).unwrap();
    let db = dir.path().join("new.db");
    let done = run(&b, &db, None, &[]).unwrap();
    assert_eq!(done.before_restore, None);
    assert_eq!(guids(&db), ["G1"]);
    let mode = fs::metadata(&db).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
}

#[test]
fn a_ledger_in_use_is_refused_and_left_as_it_was() {
    let (dir, db) = folder();
    put(&db, "G1", "DONE", 100);
    let b = dir.path().join("b.db");
    backup(&db, &b, false).unwrap();
    put(&db, "G2", "DONE", 100);
    let before = names(&db);
    let open = Ledger::open(&db).unwrap();
    let e = run(&b, &db, None, &[]).unwrap_err();
    assert!(matches!(e, RestoreError::Lock(_)), "{e}");
    assert!(e.to_string().contains("in use"), "{e}");
    drop(open);
    assert_eq!(names(&db), before, "nothing made, nothing kept");
    assert_eq!(guids(&db), ["G1", "G2"]);
}

#[test]
fn a_corrupt_newer_or_missing_backup_is_refused() {
    let (dir, db) = folder();
    put(&db, "G1", "DONE", 100);
    let b = dir.path().join("b.db");
    backup(&db, &b, false).unwrap();

    let newer = dir.path().join("newer.db");
    fs::copy(&b, &newer).unwrap();
    Connection::open(&newer)
        .unwrap()
        .execute_batch("PRAGMA user_version = 99")
        .unwrap();
    let e = run(&newer, &db, None, &[]).unwrap_err();
    assert!(
        matches!(e, RestoreError::NewerSchema { found: 99, .. }),
        "{e}"
    );

    let torn = dir.path().join("torn.db");
    let mut bytes = fs::read(&b).unwrap();
    let half = bytes.len() / 2;
    bytes[4096..half].fill(0x5a);
    fs::write(&torn, bytes).unwrap();
    let e = run(&torn, &db, None, &[]).unwrap_err();
    assert!(matches!(e, RestoreError::Corrupt { .. }), "{e}");

    let notes = dir.path().join("notes.db");
    Connection::open(&notes)
        .unwrap()
        .execute_batch("CREATE TABLE notes (t TEXT)")
        .unwrap();
    let e = run(&notes, &db, None, &[]).unwrap_err();
    assert!(matches!(e, RestoreError::NotALedger(_)), "{e}");

    let e = run(&dir.path().join("none.db"), &db, None, &[]).unwrap_err();
    assert!(matches!(e, RestoreError::NoBackup(_)), "{e}");
    let e = run(&db, &db, None, &[]).unwrap_err();
    assert!(matches!(e, RestoreError::SameFile(_)), "{e}");

    assert_eq!(guids(&db), ["G1"]);
    let left = names(&db);
    assert!(left.iter().all(|n| !n.contains("restore")), "{left:?}");
}

#[test]
fn a_backup_without_a_snapshot_needs_since_and_the_earlier_instant_wins() {
    let (dir, src) = folder();
    put(&src, "G1", "DONE", 100);
    // A ledger file copied by hand: no seal, no snapshot time.
    let plain = dir.path().join("plain.db");
    fs::copy(&src, &plain).unwrap();
    let db = dir.path().join("r.db");
    let e = run(&plain, &db, None, &[]).unwrap_err();
    assert!(matches!(e, RestoreError::NoSnapshot(_)), "{e}");
    assert!(e.to_string().contains("--since"), "{e}");
    let e = run(&plain, &db, Some("yesterday"), &[]).unwrap_err();
    assert!(matches!(e, RestoreError::BadSince(_)), "{e}");
    assert!(!db.exists());
    let done = run(&plain, &db, Some("2026-12-06T11:00:00+01:00"), &[]).unwrap();
    assert_eq!(done.recovering_since, "2026-12-06T10:00:00Z");
    assert_eq!(done.snapshot_at, None);

    let b = dir.path().join("b.db");
    let taken = backup(&src, &b, false).unwrap();
    let from_snapshot = minus_secs(&taken.snapshot_at, SNAPSHOT_MARGIN_SECS).unwrap();
    let later = minus_secs(&taken.snapshot_at, -3600).unwrap();
    let done = run(&b, &db, Some(&later), &[]).unwrap();
    assert_eq!(
        done.recovering_since, from_snapshot,
        "a later --since is not taken"
    );
    // A second restore keeps the ledger it replaces again, under its own stamp.
    assert!(done.before_restore.is_some());
}

/// A booking of the journal.
fn booked(guid: &str, core_ref: &str, amount: u64, booked_at: &str) -> JournalBooking {
    JournalBooking {
        guid: guid.into(),
        core_ref: core_ref.into(),
        amount,
        booked_at: booked_at.into(),
        source: "journal.jsonl".into(),
    }
}

#[test]
fn the_journal_writes_settles_and_reports_what_the_core_booked() {
    let (dir, db) = folder();
    put(&db, "G-FAILED", "FAILED", 1500);
    put(&db, "G-UNKNOWN", "UNKNOWN", 1500);
    put(&db, "G-DONE", "DONE", 1500);
    put(&db, "G-AMOUNT", "FAILED", 1500);
    write(
        &db,
        "INSERT INTO tx (guid, state) VALUES ('G-RECEIVED', 'RECEIVED')",
    );
    let b = dir.path().join("b.db");
    backup(&db, &b, false).unwrap();
    let now = crate::recovery::utc_second(time::OffsetDateTime::now_utc());
    let journal = [
        booked("G-NEW", "C-NEW", 700, &now),
        booked("G-NEW", "C-NEW", 700, &now),
        booked("G-FAILED", "C-F", 1500, &now),
        booked("G-UNKNOWN", "C-U", 1500, &now),
        booked("G-DONE", "C-D", 1500, &now),
        booked("G-AMOUNT", "C-A", 999, &now),
        booked("G-RECEIVED", "C-R", 1, &now),
        booked("G-DOUBLE", "C-1", 5, &now),
        booked("G-DOUBLE", "C-2", 5, &now),
        booked("G-OLD", "C-O", 5, "2020-01-01T00:00:00Z"),
    ];
    let done = run(&b, &db, None, &journal).unwrap();
    let j = &done.journal;
    assert_eq!(j.bookings, 9, "identical lines are one booking");
    assert_eq!(
        (j.written, j.settled, j.already_done, j.before_window),
        (1, 2, 1, 1)
    );
    assert_eq!(j.doubles, ["G-DOUBLE"]);
    let left: Vec<&str> = j.left.iter().map(|l| l.guid.as_str()).collect();
    assert_eq!(left, ["G-AMOUNT", "G-RECEIVED"], "{:?}", j.left);
    assert!(j.left[0].why.contains("amount 1500"), "{:?}", j.left);

    let l = Ledger::open(&db).unwrap();
    let new = l.get("G-NEW").unwrap().unwrap();
    assert_eq!(
        (new.state, new.rsp_code.as_deref()),
        (State::Done, Some("0000"))
    );
    assert_eq!(
        (new.request, new.attempts, new.tx_code.as_deref()),
        (None, Some(0), Some("TRNF"))
    );
    let body = wire::booking_body("C-NEW", 700, &now).unwrap();
    let reply = new.response.unwrap();
    assert_eq!(reply.len(), 90);
    assert_eq!(&reply[..45], format!("RTRNF{:<36}0000", "G-NEW").as_bytes());
    assert_eq!(&reply[45..], &body[..]);

    let settled = l.get("G-FAILED").unwrap().unwrap();
    assert_eq!(settled.state, State::Done);
    let body = wire::booking_body("C-F", 1500, &now).unwrap();
    let want = wire::reply_to(&request("G-FAILED", 1500), &OK_CODE, Some(&body));
    assert_eq!(settled.response.as_deref(), Some(&want[..]));
    let last = l.history("G-FAILED").unwrap().pop().unwrap();
    assert_eq!(last.who, WHO);
    assert_eq!(
        last.reason.as_deref(),
        Some("restore: the core's journal shows it booked (core_ref C-F)")
    );
    assert_eq!(l.get("G-UNKNOWN").unwrap().unwrap().state, State::Done);
    for (guid, state) in [("G-AMOUNT", State::Failed), ("G-RECEIVED", State::Received)] {
        assert_eq!(l.get(guid).unwrap().unwrap().state, state, "{guid} left");
    }
    for guid in ["G-DOUBLE", "G-OLD"] {
        assert_eq!(l.get(guid).unwrap(), None, "{guid} not written");
    }
    assert_eq!(done.rows["DONE"], 4);
}

const OK_CODE: wire::Code = wire::OK;

#[test]
fn one_guid_and_core_ref_booked_two_ways_refuses_the_restore() {
    let (dir, db) = folder();
    put(&db, "G1", "DONE", 100);
    let b = dir.path().join("b.db");
    backup(&db, &b, false).unwrap();
    let journal = [
        booked("G2", "C2", 5, "2026-12-06T10:00:00Z"),
        JournalBooking {
            source: "day2.jsonl".into(),
            ..booked("G2", "C2", 6, "2026-12-06T10:00:00Z")
        },
    ];
    let e = run(&b, &db, None, &journal).unwrap_err();
    assert!(matches!(e, RestoreError::Journal(_)), "{e}");
    assert!(
        e.to_string().contains("day2.jsonl") && e.to_string().contains("G2"),
        "{e}"
    );
    assert_eq!(guids(&db), ["G1"]);
    let left = names(&db);
    assert!(left.iter().all(|n| !n.contains("restore")), "{left:?}");
}
