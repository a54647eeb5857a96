//! `backup` sized (issue 40): `--keep N` keeps the N newest copies named like `--to` and
//! deletes only older ones of that series, never the copy just written nor a file of another
//! name; `--min-free` refuses a copy that would leave too little free on the target's
//! filesystem (exit 1, one line naming the free space, the estimate and the floor, nothing
//! written); `--metrics-file` records the refusal for the alert
//! (`TxrelayBackupFailing`, docs/alerts).

use std::fs;
use std::path::Path;

use rusqlite::{Connection, OpenFlags};

use super::{backup, backup_dir, names_in, open_alone};
use crate::util::*;

/// A ledger of one row, the copies' source.
fn one_row_scene(guid: &str) -> Scene {
    Scene::new()
        .rows([RowSpec::unknown(&msg(guid, 5, ""))])
        .build()
}

/// Backup copies of `s`'s ledger at `dir/name` for each name: one backup, copied (a copy of a
/// backup is sealed as one, which `--keep` alone deletes).
fn copies(s: &Scene, dir: &Path, names: &[&str]) {
    let scratch = backup_dir();
    let first = scratch.path().join("first.db");
    backup(s.db.arg(), &first, &[]).expect_code(EXIT_SETTLED);
    for name in names {
        fs::copy(&first, dir.join(name)).expect("copy a backup");
    }
}

/// Writes a stand-in file at `dir/name` (its content its name).
fn put(dir: &Path, names: &[&str]) {
    for name in names {
        fs::write(dir.join(name), name).expect("write a file");
    }
}

/// `names` and `more`, sorted, as `names_in` lists a directory.
fn sorted(names: &[&str], more: &[&str]) -> Vec<String> {
    let mut all: Vec<String> = names.iter().chain(more).map(|s| s.to_string()).collect();
    all.sort();
    all
}

/// Files of other names beside the copies: never counted, never deleted.
const OTHERS: &[&str] = &[
    "ledger-kept-by-hand.db",
    "ledger-20260101-0000.db.gz",
    "notes-20260101-0000.db",
    ".ledger-20260101-0000.db.tmp-1",
];

#[test]
fn keep_deletes_only_older_copies_of_the_series_after_a_success() {
    let s = one_row_scene("G-BK-KEEP");
    let dir = backup_dir();
    copies(
        &s,
        dir.path(),
        &[
            "ledger-20260101-0000.db",
            "ledger-20260101-0100.db",
            "ledger-20260101-0200.db",
        ],
    );
    put(dir.path(), OTHERS);
    // Named like a copy, but none (not a sealed backup): never counted, never deleted.
    put(dir.path(), &["ledger-20191231-0000.db"]);
    // A directory with a copy's name is no copy.
    fs::create_dir(dir.path().join("ledger-20200101-0000.db")).unwrap();

    let to = dir.path().join("ledger-20260102-0000.db");
    let r = backup(s.db.arg(), &to, &["--keep", "2", "--json"]);
    r.expect_code(EXIT_SETTLED);
    let j = r.json();
    let deleted: Vec<String> = j["deleted"]
        .as_array()
        .unwrap_or_else(|| panic!("{j}"))
        .iter()
        .map(|p| p.as_str().unwrap().to_string())
        .collect();
    let at = |n: &str| dir.path().join(n).to_str().unwrap().to_string();
    assert_eq!(
        deleted,
        [at("ledger-20260101-0000.db"), at("ledger-20260101-0100.db")],
        "{j}"
    );
    assert_eq!(
        names_in(dir.path()),
        sorted(
            OTHERS,
            &[
                "ledger-20191231-0000.db",
                "ledger-20200101-0000.db",
                "ledger-20260101-0200.db",
                "ledger-20260102-0000.db"
            ]
        )
    );
    let n: i64 = open_alone(&to)
        .query_row("SELECT count(*) FROM tx", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 1, "the new copy is the backup just made");

    // A copy named later than the new one (taken before the clock was set back) is never
    // deleted for it; with --keep 1 every older one goes, the new one stays.
    copies(&s, dir.path(), &["ledger-20260105-0000.db"]);
    let to = dir.path().join("ledger-20260102-0100.db");
    let r = backup(s.db.arg(), &to, &["--keep", "1"]);
    r.expect_code(EXIT_SETTLED);
    assert!(
        r.stdout()
            .contains(", 2 older copies deleted (--keep 1), snapshot_at="),
        "{}",
        r.stdout()
    );
    assert_eq!(
        names_in(dir.path()),
        sorted(
            OTHERS,
            &[
                "ledger-20191231-0000.db",
                "ledger-20200101-0000.db",
                "ledger-20260102-0100.db",
                "ledger-20260105-0000.db"
            ]
        )
    );
    for other in OTHERS.iter().chain(&["ledger-20191231-0000.db"]) {
        assert_eq!(fs::read_to_string(dir.path().join(other)).unwrap(), *other);
    }

    // The environment twin, as the timer's unit sets it.
    let to = dir.path().join("ledger-20260102-0200.db");
    let args = ["--db", s.db.arg(), "--to", to.to_str().unwrap()];
    Run::with_env("backup", &args, &[("BACKUP_KEEP", "1")]).expect_code(EXIT_SETTLED);
    assert!(!dir.path().join("ledger-20260102-0100.db").exists());
    assert!(to.exists());
}

#[test]
fn keep_needs_a_to_with_the_time_in_its_name() {
    let s = one_row_scene("G-BK-KEEP-NAME");
    let dir = backup_dir();
    put(dir.path(), &["b-20260101-0000.db"]);
    for (to, keep, said) in [
        (
            "b.db",
            "2",
            "--keep (BACKUP_KEEP) needs a --to with the time in its name",
        ),
        (
            "ledger-20260102-0000.db",
            "0",
            "invalid value '0' for '--keep <N>'",
        ),
    ] {
        let r = backup(s.db.arg(), &dir.path().join(to), &["--keep", keep]);
        r.expect_code(EXIT_USAGE);
        assert!(r.stderr().contains(said), "{to}: {}", r.stderr());
    }
    assert_eq!(
        names_in(dir.path()),
        ["b-20260101-0000.db"],
        "nothing written"
    );
}

/// `bytes` as the refusal writes it (one decimal, binary units).
fn human(bytes: u64) -> String {
    let mut value = bytes as f64;
    let mut unit = 0;
    let names = ["bytes", "KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} bytes");
    }
    while value >= 1024.0 && unit < 4 {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", names[unit])
}

/// The ledger's pages, which the refusal names as the copy's size at most.
fn estimate(db: &Path) -> u64 {
    let c = Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    let pages: i64 = c.query_row("PRAGMA page_count", [], |r| r.get(0)).unwrap();
    let size: i64 = c.query_row("PRAGMA page_size", [], |r| r.get(0)).unwrap();
    (pages * size) as u64
}

#[test]
fn min_free_refuses_a_copy_that_would_leave_too_little_and_the_metrics_file_says_so() {
    let s = one_row_scene("G-BK-ROOM");
    let dir = backup_dir();
    put(dir.path(), &["ledger-20260101-0000.db"]);
    let metrics = tempfile::tempdir().unwrap();
    let prom = metrics.path().join("backup.prom");
    let prom_arg = prom.to_str().unwrap();
    let to = dir.path().join("ledger-20260102-0000.db");

    let r = backup(
        s.db.arg(),
        &to,
        &["--min-free", "100%", "--metrics-file", prom_arg],
    );
    r.expect_code(EXIT_FATAL);
    assert_eq!(r.stdout(), "");
    let err = r.stderr().trim_end();
    assert!(!err.contains('\n'), "one line: {err}");
    let needs = format!("the copy needs up to {}", human(estimate(s.db.path())));
    for part in [
        "backup: refused, nothing written: ",
        " free, ",
        needs.as_str(),
        "under --min-free 100%",
        "on the ledger's own filesystem",
        "docs/operations.md#disk-full",
    ] {
        assert!(err.contains(part), "{part}: {err}");
    }
    assert_eq!(
        names_in(dir.path()),
        ["ledger-20260101-0000.db"],
        "nothing written"
    );
    let text = fs::read_to_string(&prom).expect("the metrics file of a refused run");
    assert_eq!(
        sample(&text, "txrelay_batch_exit_code{tool=\"backup\"}"),
        1.0,
        "{text}"
    );
    promtool_check("backup's metrics file", &text);

    // A floor in bytes, by the environment twin; a bad one is a usage error.
    let args = ["--db", s.db.arg(), "--to", to.to_str().unwrap()];
    let r = Run::with_env("backup", &args, &[("BACKUP_MIN_FREE", "1000TiB")]);
    r.expect_code(EXIT_FATAL);
    assert!(
        r.stderr().contains("under --min-free 1000.0 TiB"),
        "{}",
        r.stderr()
    );
    for bad in ["101%", "ten", "1GB"] {
        let r = backup(s.db.arg(), &to, &["--min-free", bad]);
        r.expect_code(EXIT_USAGE);
        assert!(r.stderr().contains("--min-free"), "{bad}: {}", r.stderr());
    }
    assert_eq!(names_in(dir.path()), ["ledger-20260101-0000.db"]);

    // Room enough: the backup is made, and the file says so.
    let r = backup(
        s.db.arg(),
        &to,
        &["--min-free", "0", "--metrics-file", prom_arg],
    );
    r.expect_code(EXIT_SETTLED);
    let text = fs::read_to_string(&prom).unwrap();
    assert_eq!(
        sample(&text, "txrelay_batch_exit_code{tool=\"backup\"}"),
        0.0
    );
    assert_eq!(
        sample(
            &text,
            "txrelay_batch_rows{outcome=\"copied\",tool=\"backup\"}"
        ),
        1.0,
        "{text}"
    );
}

/// A lowered --keep takes effect while the disk is too full for a backup: the copies past
/// N go before the refusal, the N newest stay.
#[test]
fn a_refused_backup_still_keeps_the_n_newest_copies() {
    let s = one_row_scene("G-BK-ROOM-KEEP");
    let dir = backup_dir();
    let names = [
        "ledger-20260101-0000.db",
        "ledger-20260101-0100.db",
        "ledger-20260101-0200.db",
        "ledger-20260101-0300.db",
    ];
    copies(&s, dir.path(), &names);
    let to = dir.path().join("ledger-20260102-0000.db");
    let r = backup(s.db.arg(), &to, &["--keep", "2", "--min-free", "100%"]);
    r.expect_code(EXIT_FATAL);
    assert!(r.stderr().contains("refused"), "{}", r.stderr());
    assert_eq!(names_in(dir.path()), &names[2..], "the two newest kept");
}
