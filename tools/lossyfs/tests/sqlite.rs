//! SQLite (WAL) on lossyfs: one row committed per transaction, a power cut (a drop), then the
//! database opened in the backing folder directly. With `synchronous=FULL` every commit that
//! returned Ok must be there and the database intact, whatever the drop forgot; with
//! `synchronous=NORMAL` (the negative control) committed rows must go missing, which proves
//! that lossyfs really forgets what was not synced.
//!
//! The connection on the mount is leaked, not closed, at the power cut: closing it would
//! checkpoint (and sync) what a power cut must find unsynced, and after the cut its shared
//! mmap of -shm must not be touched again (a page fault on a dead FUSE mount is a SIGBUS).

mod common;

use std::path::Path;

use common::{Lossy, fuse_or_skip, numbers};
use rusqlite::{Connection, params};

const ROWS: i64 = 200;

/// A row's payload: its id, spelt out so that a torn or mixed-up page shows.
fn payload(id: i64) -> String {
    format!("row {id:06} ").repeat(12)
}

/// What happened on the mount.
struct Committed {
    /// Rows whose commit returned Ok.
    ok: Vec<i64>,
    /// Rows whose commit was tried (the last one may have failed).
    tried: Vec<i64>,
}

/// Opens the database on the mount in WAL mode with `synchronous`, creates the table and
/// checkpoints it (so that the table itself is durable under either setting), then commits
/// one row per transaction until `ROWS` or the first error.
fn commit_rows(mnt: &Path, synchronous: &str) -> Committed {
    let conn = Connection::open(mnt.join("ledger.db")).expect("open on the mount");
    let mode: String = conn
        .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
        .expect("wal");
    assert_eq!(mode, "wal");
    conn.pragma_update(None, "synchronous", synchronous)
        .expect("synchronous");
    conn.execute_batch("CREATE TABLE t(id INTEGER PRIMARY KEY, payload TEXT NOT NULL)")
        .expect("create table");
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .expect("checkpoint");
    let mut committed = Committed {
        ok: Vec::new(),
        tried: Vec::new(),
    };
    for id in 1..=ROWS {
        committed.tried.push(id);
        match conn.execute(
            "INSERT INTO t(id, payload) VALUES (?1, ?2)",
            params![id, payload(id)],
        ) {
            Ok(_) => committed.ok.push(id),
            Err(_) => break,
        }
    }
    // The power cut: the process keeps its descriptors and its mmap, and never closes.
    std::mem::forget(conn);
    committed
}

/// What the backing folder holds after the drop: integrity_check's answer and the rows.
fn after_the_cut(backing: &Path) -> (String, Vec<i64>) {
    let conn = Connection::open(backing.join("ledger.db")).expect("open in the backing folder");
    let integrity: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .expect("check");
    let mut stmt = conn
        .prepare("SELECT id, payload FROM t ORDER BY id")
        .expect("select");
    let rows = stmt
        .query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))
        .expect("query")
        .map(|row| row.expect("row"))
        .inspect(|(id, text)| assert_eq!(*text, payload(*id), "row {id}'s payload"))
        .map(|(id, _)| id)
        .collect();
    (integrity, rows)
}

/// FULL: nothing acknowledged is lost, nothing is corrupt, nothing unknown appears.
fn check_full(label: &str, committed: &Committed, integrity: &str, present: &[i64]) {
    assert_eq!(integrity, "ok", "{label}");
    let lost: Vec<i64> = committed
        .ok
        .iter()
        .copied()
        .filter(|id| !present.contains(id))
        .collect();
    assert!(lost.is_empty(), "{label}: committed rows lost: {lost:?}");
    let unknown: Vec<i64> = present
        .iter()
        .copied()
        .filter(|id| !committed.tried.contains(id))
        .collect();
    assert!(
        unknown.is_empty(),
        "{label}: rows never written: {unknown:?}"
    );
}

#[test]
fn sqlite_full_keeps_every_commit_after_drop_all() {
    if !fuse_or_skip("sqlite_full_keeps_every_commit_after_drop_all") {
        return;
    }
    let mut fs = Lossy::start(&[]);
    let committed = commit_rows(&fs.mnt, "FULL");
    assert_eq!(committed.ok.len() as i64, ROWS);
    let stats = fs.command("stats");
    let reply = fs.drop_and_exit("all", 1);
    let (integrity, present) = after_the_cut(&fs.backing);
    println!(
        "FULL, drop all: {} commits, {} rows after the cut; {stats}; {reply}",
        committed.ok.len(),
        present.len()
    );
    check_full("FULL, drop all", &committed, &integrity, &present);
}

#[test]
fn sqlite_full_keeps_every_commit_after_a_cut_mid_commit_with_subset_and_torn() {
    if !fuse_or_skip("sqlite_full_keeps_every_commit_after_a_cut_mid_commit_with_subset_and_torn") {
        return;
    }
    // (mode, seed, cut at the N-th mutating operation): the setup takes about 30 of them and
    // each commit about 3 (two writes per WAL frame, one fdatasync), plus -shm writebacks.
    let cases = [
        ("subset", 1, 157),
        ("subset", 2, 290),
        ("subset", 3, 404),
        ("torn", 4, 161),
        ("torn", 5, 333),
        ("torn", 6, 512),
        ("all", 7, 222),
    ];
    for (mode, seed, cut) in cases {
        let label = format!("FULL, cut at {cut}, drop {mode} {seed}");
        let mut fs = Lossy::start(&["--crash-after", &cut.to_string()]);
        let committed = commit_rows(&fs.mnt, "FULL");
        assert!(
            !committed.ok.is_empty(),
            "{label}: the cut came before the first commit"
        );
        assert!(
            committed.tried.len() > committed.ok.len(),
            "{label}: the cut came after the last commit"
        );
        let reply = fs.drop_and_exit(mode, seed);
        let (integrity, present) = after_the_cut(&fs.backing);
        println!(
            "{label}: {} commits, {} rows after the cut; {reply}",
            committed.ok.len(),
            present.len()
        );
        check_full(&label, &committed, &integrity, &present);
    }
}

#[test]
fn sqlite_normal_loses_committed_rows_after_drop_all() {
    if !fuse_or_skip("sqlite_normal_loses_committed_rows_after_drop_all") {
        return;
    }
    let mut fs = Lossy::start(&[]);
    let committed = commit_rows(&fs.mnt, "NORMAL");
    assert_eq!(committed.ok.len() as i64, ROWS);
    let reply = fs.drop_and_exit("all", 1);
    assert!(numbers(&reply)[0] > 0, "nothing was dropped: {reply}");
    let (integrity, present) = after_the_cut(&fs.backing);
    let lost = committed
        .ok
        .iter()
        .filter(|id| !present.contains(id))
        .count();
    println!(
        "NORMAL, drop all: {} commits, {lost} committed rows lost; {reply}",
        committed.ok.len()
    );
    assert_eq!(integrity, "ok", "NORMAL loses rows, not integrity");
    assert!(
        lost >= 1,
        "synchronous=NORMAL lost no committed row: lossyfs dropped nothing that mattered"
    );
}
