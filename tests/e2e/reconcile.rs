//! `reconcile` (CONTRACT §10) end to end: what needs the binary, the real relay or a real
//! ledger. Here: a clean day built through the real relay and the core simulator's
//! `--journal` that changes nothing (read-only), and every break at once with exact counts,
//! as text, `--json` and `--metrics-file`. In `reconcile/`: usage errors, bad journals and
//! unreadable ledgers, and a ledger read across the pages of PostgreSQL's cursor (`edges`); a
//! double booking across a day boundary and several days' journals read as one (`days`);
//! the daily wrapper `scripts/reconcile.sh` with its look-back (`wrapper`).
//!
//! The rules (each class, the v1.3 double, the window, where a row is placed in time, the
//! lines a GUID is classified from) are unit tests of `crates/reconcile/src/classify`, on
//! rows and journals in memory. `e2e_pg` compiles this file too: there run only the tests
//! that read the ledger, whose reading differs per backend (the clean day, every break at
//! once, the unreadable ledger, every row once across pages); the others are
//! `sqlite_only!`.

// Paths relative to this file's folder: the same whether this file is a module of `e2e` or
// of `e2e_pg` (which includes it by `#[path]`).
#[path = "reconcile/days.rs"]
mod days;
#[path = "reconcile/edges.rs"]
mod edges;
#[path = "reconcile/wrapper.rs"]
mod wrapper;

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::util::*;

/// `reconcile --db DB --journal FILE EXTRA…`
fn reconcile(db: &TempLedger, journal: &Path, extra: &[&str]) -> Run {
    let j = journal.to_str().expect("UTF-8 path");
    tool(
        "reconcile",
        &[&["--db", db.arg(), "--journal", j], extra].concat(),
    )
}

/// `reconcile … --json`, its exit code checked, and its object.
fn reconcile_json(db: &TempLedger, journal: &Path, extra: &[&str], code: u8) -> Value {
    let r = reconcile(db, journal, &[extra, &["--json"]].concat());
    r.expect_code(code);
    r.json()
}

fn counts(j: &Value) -> Value {
    j["counts"].clone()
}

/// The six counts, those not named 0.
fn want(named: &[(&str, u64)]) -> Value {
    let mut v = json!({"double":0,"ghost":0,"pending":0,"matched":0,"mismatch":0,"missing":0});
    for (k, n) in named {
        v[*k] = json!(n);
    }
    v
}

/// `(class, guid)` of every break, in the report's order.
fn breaks(j: &Value) -> Vec<(String, String)> {
    j["breaks"]
        .as_array()
        .expect("breaks")
        .iter()
        .map(|b| {
            (
                b["class"].as_str().unwrap().to_string(),
                b["guid"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// A day: the relay in front of a core writing its journal. Booked (`BOOK1`, `BOOK2`),
/// rejected (`REJ`), failed with a 500 (`E500`, UNKNOWN, not booked), booked with the
/// answer lost (`DROP`, UNKNOWN: pending), and a FAILED row (`FAIL`, hand-made as a relay
/// that could not connect leaves it). Clean: 2 matched, 1 pending.
struct Day {
    scene: Scene,
    journal: PathBuf,
    m: Vec<Vec<u8>>,
}

fn day() -> Day {
    let dir = tempfile::tempdir().expect("tempdir");
    let journal = dir.keep().join("journal.jsonl");
    let scene = Scene::new()
        .core(&["--journal", journal.to_str().unwrap()])
        .relay(&[])
        .build();
    let m = vec![
        msg("BOOK1", 1500, "rent"),
        msg("BOOK2", 2500, "gas"),
        msg("REJ", 100, "REJECT"),
        msg("E500", 200, "FAIL500"),
        msg("DROP", 300, "DROP"),
        msg("FAIL", 400, "never left"),
    ];
    assert_code(&scene.call(&m[0]), "0000");
    assert_code(&scene.call(&m[1]), "0000");
    assert_code(&scene.call(&m[2]), "B001");
    assert_code(&scene.call(&m[3]), "E901");
    assert_code(&scene.call(&m[4]), "E901");
    scene.put(RowSpec::failed(&m[5]));
    assert_eq!(scene.core().total_bookings(), 3);
    Day { scene, journal, m }
}

/// The journal's lines, each changed by `f` (`None`: left out), written to a new file.
fn edited(journal: &Path, f: impl Fn(Value) -> Option<Value>) -> PathBuf {
    let text = fs::read_to_string(journal).expect("journal");
    let out: Vec<String> = text
        .lines()
        .filter_map(|l| f(serde_json::from_str(l).expect("a journal line")))
        .map(|v| v.to_string())
        .collect();
    let path = journal.with_file_name(format!("edited-{}.jsonl", fastrand_name()));
    fs::write(&path, out.join("\n") + "\n").expect("write");
    path
}

fn fastrand_name() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    format!(
        "{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// A journal of the test's own.
fn journal_of(db: &TempLedger, lines: &[&str]) -> PathBuf {
    let path = db.dir().join(format!("journal-{}.jsonl", fastrand_name()));
    let mut text = lines.join("\n");
    if !lines.is_empty() {
        text.push('\n');
    }
    fs::write(&path, text).expect("write journal");
    path
}

fn line(guid: &str, core_ref: &str, amount: u64, at: &str) -> String {
    json!({"guid": guid, "core_ref": core_ref, "amount": amount, "booked_at": at}).to_string()
}

/// A DONE/`0000` row made by hand whose stored reply tells of the booking `core_ref`,
/// `amount`, `booked_at` (`YYYY-MM-DDThh:mm:ssZ`); its updated_at is now.
fn done_with_reply(db: &TempLedger, guid: &str, core_ref: &str, amount: u64, booked_at: &str) {
    RowSpec::new(guid, State::Done).code("0000").insert(db);
    let compact: String = booked_at.chars().filter(char::is_ascii_digit).collect();
    let reply = format!("RTRNF{guid:<36}0000{core_ref:<18}{amount:013}{compact}");
    let hex: String = reply.bytes().map(|b| format!("{b:02x}")).collect();
    by_hand(
        db,
        &format!("UPDATE tx SET response = X'{hex}' WHERE guid = '{guid}'"),
        &format!("UPDATE tx SET response = '\\x{hex}'::bytea WHERE guid = '{guid}'"),
    );
}

const T0: &str = "2026-12-02T09:00:00Z";
const T1: &str = "2026-12-02T09:00:10Z";

#[test]
fn a_clean_day_reports_no_break_and_changes_nothing() {
    skip_if_unavailable!();
    let d = day();
    let db = &d.scene.db;
    let rows_before = rows_by_guid(db);
    let history_before: Vec<_> = rows_before
        .iter()
        .map(|r| db.store().history(&r.guid).unwrap())
        .collect();
    let stats_before = d.scene.core().stats();

    let j = reconcile_json(db, &d.journal, &[], EXIT_SETTLED);
    assert_eq!(counts(&j), want(&[("matched", 2), ("pending", 1)]));
    assert_eq!(j["breaks"], json!([]));
    assert_eq!(j["totals"]["journal"], json!({"count": 3, "amount": 4300}));
    assert_eq!(j["totals"]["ledger"], json!({"count": 2, "amount": 4000}));
    // The default window: the earliest booking to one second after the latest.
    let times: Vec<String> = fs::read_to_string(&d.journal)
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["booked_at"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(j["window"]["from"], json!(times.iter().min().unwrap()));
    let last = times.iter().max().unwrap();
    assert!(j["window"]["to"].as_str().unwrap() > last.as_str());

    let text = reconcile(db, &d.journal, &[]);
    text.expect_code(EXIT_SETTLED);
    assert!(
        text.stdout().trim_end().lines().count() == 1
            && text
                .stdout()
                .contains("0 double, 0 ghost, 1 pending, 2 matched, 0 mismatch, 0 missing"),
        "{}",
        text.stdout()
    );
    assert_eq!(text.stderr(), "");

    // Read-only: the rows and their history as they were, the core never asked.
    assert_eq!(rows_by_guid(db), rows_before);
    let history_after: Vec<_> = rows_before
        .iter()
        .map(|r| db.store().history(&r.guid).unwrap())
        .collect();
    assert_eq!(history_after, history_before);
    assert_eq!(d.scene.core().stats(), stats_before);
}

#[test]
fn every_break_at_once_with_exact_counts() {
    skip_if_unavailable!();
    let d = day();
    let core = d.scene.core();
    core.book(&d.m[0]); // double
    core.book(&msg("AROUND", 700, "")); // ghost, no row
    core.book(&d.m[5]); // ghost, FAILED
    // missing BOOK2, and a mismatch on a hand-made DONE/0000 row without a stored reply
    d.scene
        .put(RowSpec::new("NOREPLY", State::Done).code("0000"));
    core.book(&msg("NOREPLY", 900, ""));
    let journal = edited(&d.journal, |v| (v["guid"] != "BOOK2").then_some(v));
    let wide = [
        "--from",
        "2000-01-01T00:00:00Z",
        "--to",
        "2100-01-01T00:00:00Z",
    ];
    let j = reconcile_json(&d.scene.db, &journal, &wide, EXIT_FATAL);
    assert_eq!(
        counts(&j),
        want(&[
            ("double", 1),
            ("ghost", 2),
            ("pending", 1),
            ("mismatch", 1),
            ("missing", 1)
        ])
    );
    assert_eq!(
        breaks(&j),
        [
            ("double".into(), "BOOK1".into()),
            ("ghost".into(), "AROUND".into()),
            ("ghost".into(), "FAIL".into()),
            ("mismatch".into(), "NOREPLY".into()),
            ("missing".into(), "BOOK2".into()),
        ]
    );
    // The text: one line per break naming both sides, then the summary.
    let r = reconcile(&d.scene.db, &journal, &wide);
    r.expect_code(EXIT_FATAL);
    let lines: Vec<&str> = r.stdout().trim_end().lines().collect();
    assert_eq!(lines.len(), 6, "{}", r.stdout());
    assert!(
        lines[0].starts_with("double BOOK1: journal 2 booking(s) [C"),
        "{}",
        lines[0]
    );
    assert!(
        lines[0].contains("; ledger DONE 0000 reply [C"),
        "{}",
        lines[0]
    );
    assert!(
        lines[1].starts_with("ghost AROUND: journal 1 booking(s) [C")
            && lines[1].ends_with("ledger no row"),
        "{}",
        lines[1]
    );
    assert!(
        lines[3].contains("ledger DONE 0000 (no stored reply)"),
        "{}",
        lines[3]
    );
    assert!(
        lines[4].starts_with("missing BOOK2: journal no booking; ledger DONE 0000 reply [C")
            && lines[4].contains(" 2500 "),
        "{}",
        lines[4]
    );
    assert!(lines[5].starts_with("reconcile: window [2000-01-01T00:00:00Z, 2100-01-01T00:00:00Z): 1 double, 2 ghost, 1 pending, 0 matched, 1 mismatch, 1 missing"), "{}", lines[5]);
    // --metrics-file: the counts per class and the exit code.
    let prom = d.scene.db.dir().join("reconcile.prom");
    let r = reconcile(
        &d.scene.db,
        &journal,
        &[&wide[..], &["--metrics-file", prom.to_str().unwrap()]].concat(),
    );
    r.expect_code(EXIT_FATAL);
    let s = samples(&fs::read_to_string(&prom).unwrap());
    for (class, n) in [
        ("double", 1.0),
        ("ghost", 2.0),
        ("pending", 1.0),
        ("matched", 0.0),
        ("mismatch", 1.0),
        ("missing", 1.0),
    ] {
        assert_eq!(
            s[&format!("txrelay_batch_rows{{outcome=\"{class}\",tool=\"reconcile\"}}")],
            n,
            "{class}"
        );
    }
    assert_eq!(s["txrelay_batch_exit_code{tool=\"reconcile\"}"], 1.0);
}
