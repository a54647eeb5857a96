//! `reconcile` over a journal of a million lines and a ledger of a million rows (SQLite),
//! measured under /usr/bin/time: seconds and peak RSS printed (`--nocapture`), recorded in
//! docs/performance.md; the counts are checked exactly, the time is not asserted, the memory
//! is bounded. Ignored (a measurement; about 30 s in a debug build):
//!
//! ```text
//! cargo build --release -p reconcile
//! RECONCILE_BIN=$PWD/target/release/reconcile \
//!   cargo test --test e2e reconcile_million -- --ignored --nocapture
//! ```
//!
//! The rows are built in one statement (a recursive CTE; the history trigger set aside), the
//! journal written by the test; both are deleted with the temp directory at the end.

use std::io::Write;
use std::process::Command;

use serde_json::json;

use crate::util::*;

const ROWS: i64 = 1_000_000;
/// A booking every 1/12 s from 2026-12-02T00:00:00Z: the million within one day.
const PER_SEC: i64 = 12;
const DAY0: i64 = 1_796_169_600; // 2026-12-02T00:00:00Z

/// Peak RSS the run may reach (the aim of issue 21).
const RSS_BOUND_KIB: u64 = 200 * 1024;

fn amount(i: i64) -> i64 {
    1 + i % 100_000
}

/// A million DONE/0000 rows, each with the 90-byte reply the relay would have stored.
fn million_rows(db: &TempLedger) {
    db.create();
    bulk_insert_without_history(
        db,
        &format!(
            "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < {last})
         INSERT INTO tx (guid, tx_code, state, rsp_code, request, response, attempts,
                         updated_at)
         SELECT printf('G-R-%07d', i), 'TRNF', 'DONE', '0000', randomblob(126),
                CAST(printf('RTRNF%-36s0000%-18s%013d%s', printf('G-R-%07d', i),
                            printf('C%017d', i), 1 + i % 100000,
                            strftime('%Y%m%d%H%M%S', {day0} + i / {per_sec}, 'unixepoch'))
                     AS BLOB),
                1, datetime('now')
         FROM n;
         ",
            last = ROWS - 1,
            day0 = DAY0,
            per_sec = PER_SEC,
        ),
    );
}

/// `secs` (within 2026-12-02, the day the journal covers) as RFC 3339.
fn rfc3339(secs: i64) -> String {
    let s = secs - DAY0;
    assert!((0..86_400).contains(&s));
    format!(
        "2026-12-02T{:02}:{:02}:{:02}Z",
        s / 3600,
        s / 60 % 60,
        s % 60
    )
}

/// The journal of that day: every row's booking, except that every 100,000th (from 7) has
/// another amount (10 mismatches) and every 250,000th (from 3) is left out (4 missing);
/// 3 bookings of GUIDs the ledger has not (ghosts) and 2 second bookings (doubles).
fn million_lines(path: &std::path::Path) {
    let mut w = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    for i in 0..ROWS {
        if i % 250_000 == 3 {
            continue;
        }
        let a = amount(i) + i64::from(i % 100_000 == 7);
        writeln!(
            w,
            r#"{{"guid":"G-R-{i:07}","core_ref":"C{i:017}","amount":{a},"booked_at":"{}"}}"#,
            rfc3339(DAY0 + i / PER_SEC)
        )
        .unwrap();
    }
    for (guid, core_ref) in [
        ("AROUND-1", "X1"),
        ("AROUND-2", "X2"),
        ("AROUND-3", "X3"),
        ("G-R-0000100", "X4"),
        ("G-R-0999900", "X5"),
    ] {
        let line = json!({"guid": guid, "core_ref": core_ref, "amount": 5,
                          "booked_at": rfc3339(DAY0 + 600)});
        writeln!(w, "{line}").unwrap();
    }
    w.flush().unwrap();
}

fn reconcile_bin() -> std::path::PathBuf {
    std::env::var_os("RECONCILE_BIN").map_or_else(|| testkit::bin("reconcile"), Into::into)
}

#[test]
#[ignore = "a measurement: a million rows and journal lines (run with --ignored)"]
fn a_million_lines_against_a_million_rows() {
    let db = temp_ledger();
    let started = std::time::Instant::now();
    million_rows(&db);
    let journal = db.dir().join("journal.jsonl");
    million_lines(&journal);
    eprintln!(
        "a million rows and journal lines built in {:.1} s ({} MiB of journal)",
        started.elapsed().as_secs_f64(),
        std::fs::metadata(&journal).unwrap().len() >> 20
    );
    let out = db.dir().join("time");
    let mut cmd = Command::new("/usr/bin/time");
    cmd.arg("-f")
        .arg("%e %M")
        .arg("-o")
        .arg(&out)
        .arg(reconcile_bin())
        .args([
            "--db",
            db.arg(),
            "--journal",
            journal.to_str().unwrap(),
            "--json",
        ]);
    let r = Run::command(cmd, std::time::Duration::from_secs(300));
    let t = std::fs::read_to_string(&out).expect("time's report");
    let mut f = t.lines().last().unwrap_or_default().split_whitespace();
    let secs: f64 = f.next().and_then(|s| s.parse().ok()).expect("seconds");
    let kib: u64 = f.next().and_then(|s| s.parse().ok()).expect("max RSS");
    eprintln!(
        "reconcile over {ROWS} rows and journal lines: {secs:.2} s, peak RSS {:.1} MiB",
        kib as f64 / 1024.0
    );
    r.expect_code(EXIT_FATAL);
    let j = r.json();
    assert_eq!(
        j["counts"],
        json!({"double": 2, "ghost": 3, "pending": 0, "matched": 1_000_000 - 2 - 10 - 4,
               "mismatch": 10, "missing": 4})
    );
    assert_eq!(j["totals"]["journal"]["count"], 1_000_000 - 4 + 5);
    assert_eq!(j["totals"]["ledger"]["count"], 1_000_000);
    assert!(kib < RSS_BOUND_KIB, "peak RSS {kib} KiB");
}
