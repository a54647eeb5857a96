//! The restore procedure of docs/operations.md (*Restoring an SQLite ledger*), followed as
//! written, end to end (issue 38.6, contract §11): transfers booked before a backup, after it,
//! and after the core's journal was exported; the relay gone; `restore --journal`; the relay
//! started again (recovering), every GUID a channel ever sent resent, reprocess run, reconcile
//! clean, recovery ended, a new transfer. Each GUID booked once, each `0000` replayed byte for
//! byte. Its negative control puts the same backup back the old way (copied over the ledger,
//! without the seal that makes every tool refuse it, as a backup made by other means would be)
//! and sees the resends booked a second time: the checks above can see the bug they guard.
//! SQLite's alone (`restore` is SQLite's; PostgreSQL's way back is `inspect recovery`, tested
//! in `inspect::recovery` and `relay::recovery` on both backends).

use std::path::{Path, PathBuf};

use crate::util::*;

/// What a channel sent and was answered.
type Answered = Vec<(Vec<u8>, Vec<u8>)>;

/// Sends `n` new transfers `PREFIX-i` through the relay at `addr`, each answered `0000`.
fn book(addr: &str, prefix: &str, n: u64) -> Answered {
    let mut ch = Channel::connect(addr);
    (0..n)
        .map(|i| {
            let m = msg(&format!("{prefix}-{i}"), 1000 + i, "");
            let reply = ch.call(&m);
            assert_code(&reply, "0000");
            (m, reply)
        })
        .collect()
}

/// Where everything stood when the relay went away: the ledger, the core (its journal at
/// `journal`), the backup, the journal as exported after the second batch, and what each
/// batch was answered (before the backup, after it, after the export).
struct Lost {
    db: TempLedger,
    core: Core,
    dir: tempfile::TempDir,
    backup: PathBuf,
    journal: PathBuf,
    export: PathBuf,
    before: Answered,
    after: Answered,
    unexported: Answered,
}

impl Lost {
    fn everything(&self) -> impl Iterator<Item = &(Vec<u8>, Vec<u8>)> {
        self.before
            .iter()
            .chain(&self.after)
            .chain(&self.unexported)
    }
}

/// Books, backs up, books more, exports the journal, books more, and kills the relay.
fn lose_the_ledger(tag: &str) -> Lost {
    let dir = tempfile::tempdir().expect("temp dir");
    let journal = dir.path().join("core-journal.jsonl");
    let core = Core::start(&["--journal", journal.to_str().unwrap()]);
    let db = temp_ledger();
    let mut relay = start_relay(&db, &core.url(), &[]);
    let before = book(&relay.addr, &format!("G-RP{tag}-A"), 12);
    let backup = dir.path().join("ledger-backup.db");
    let r = tool(
        "backup",
        &["--db", db.arg(), "--to", backup.to_str().unwrap(), "--json"],
    );
    r.expect_code(EXIT_SETTLED);
    assert!(r.json()["snapshot_at"].is_string(), "{}", r.stdout());
    let after = book(&relay.addr, &format!("G-RP{tag}-B"), 12);
    let export = dir.path().join("journal-export.jsonl");
    std::fs::copy(&journal, &export).expect("export the core's journal");
    let unexported = book(&relay.addr, &format!("G-RP{tag}-C"), 6);
    relay.kill();
    Lost {
        db,
        core,
        dir,
        backup,
        journal,
        export,
        before,
        after,
        unexported,
    }
}

fn arg(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 temp path")
}

/// Asserts that every GUID the core ever booked was booked exactly once.
#[track_caller]
fn each_booked_once(core: &Core) {
    let twice: Vec<_> = core
        .by_guid()
        .into_iter()
        .filter(|(_, n)| *n != 1)
        .collect();
    assert!(twice.is_empty(), "booked more than once: {twice:?}");
}

#[test]
fn the_documented_restore_books_nothing_twice_and_replays_every_reply() {
    let lost = lose_the_ledger("");
    let Lost { db, core, .. } = &lost;
    let total = lost.everything().count() as u64;
    assert_eq!(core.total_bookings(), total);

    // Step 3: restore, with the journal as exported.
    let r = tool(
        "restore",
        &[
            "--from",
            arg(&lost.backup),
            "--db",
            db.arg(),
            "--journal",
            arg(&lost.export),
            "--json",
        ],
    );
    r.expect_code(EXIT_SETTLED);
    let j = r.json();
    assert_eq!(
        j["journal"]["written"], 12,
        "the bookings after the backup: {j}"
    );
    assert!(
        j["journal"]["doubles"].as_array().unwrap().is_empty(),
        "{j}"
    );
    let since = j["recovering_since"]
        .as_str()
        .expect("recovering_since")
        .to_string();
    let r = tool("inspect", &["--db", db.arg(), "recovery", "--json"]);
    r.expect_code(EXIT_SETTLED);
    assert_eq!(r.json()["since"], since.as_str());

    // Step 4: the relay and the timers again, channels included: every GUID ever sent is
    // resent, and reprocess runs.
    let relay = start_relay(db, &core.url(), &[]);
    let mut ch = Channel::connect(&relay.addr);
    for (m, reply) in lost.everything() {
        assert_eq!(&ch.call(m), reply, "{}: replayed byte for byte", guid_of(m));
    }
    // The GUIDs booked after the export were in no file: recovery mode asked the core.
    assert!(core.inquiries() >= lost.unexported.len() as u64);
    let r = reprocess(db, &core.url(), &["--max-attempts", "5"]);
    assert!(r.stdout().starts_with("reprocess:"), "{}", r.stdout());
    for (m, reply) in lost.everything() {
        assert_eq!(&ch.call(m), reply, "{}: again", guid_of(m));
    }
    assert_eq!(core.total_bookings(), total, "nothing booked again");
    each_booked_once(core);

    // Step 5: reconcile the window with the core's latest journal: clean.
    let r = tool(
        "reconcile",
        &[
            "--db",
            db.arg(),
            "--journal",
            arg(&lost.journal),
            "--from",
            &since,
        ],
    );
    r.expect_code(EXIT_SETTLED);

    // Step 6: recovery ended; a new transfer is booked once, as always.
    let r = tool(
        "inspect",
        &[
            "--db",
            db.arg(),
            "recovery",
            "--end",
            "--reason",
            "reconcile clean",
        ],
    );
    r.expect_code(EXIT_SETTLED);
    let fresh = msg("G-RP-NEW", 77, "");
    assert_code(&ch.call(&fresh), "0000");
    assert_eq!(core.bookings("G-RP-NEW"), 1);
    each_booked_once(core);
}

/// The negative control: the same backup put back the old way, copied over the ledger, its
/// seal taken off (a backup made by other means has none). The relay serves it, and the
/// channels' resends of the GUIDs booked after the backup are booked a second time — what the
/// test above would catch.
#[test]
fn the_old_way_back_books_the_resends_twice() {
    let lost = lose_the_ledger("X");
    let Lost { db, core, .. } = &lost;
    let path = db.path();
    for suffix in ["-wal", "-shm"] {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        let _ = std::fs::remove_file(PathBuf::from(p));
    }
    std::fs::copy(&lost.backup, path).expect("cp the backup over the ledger");
    {
        let c = rusqlite::Connection::open(path).unwrap();
        ledger::sqlite::backup_seal::unseal(&c).unwrap();
    }
    let relay = start_relay(db, &core.url(), &[]);
    let mut ch = Channel::connect(&relay.addr);
    for (m, _) in lost.everything() {
        assert_code(&ch.call(m), "0000");
    }
    let twice: Vec<String> = core
        .by_guid()
        .into_iter()
        .filter(|(_, n)| *n == 2)
        .map(|(g, _)| g)
        .collect();
    assert_eq!(
        twice.len(),
        lost.after.len() + lost.unexported.len(),
        "every GUID booked after the backup is booked again: {twice:?}"
    );
    assert!(lost.dir.path().exists());
}
