//! `inspect` on a ledger of a million rows: `summary`, `list --state S --limit 50`,
//! a later page of it and the listing without a command each read counts and a page, never
//! every row, so each stays within a small, fixed memory whatever the ledger holds (a tool
//! that loaded the rows would need hundreds of MiB here). Their time is measured, not
//! asserted: each run's seconds and peak RSS are printed (`--nocapture`), and
//! docs/performance.md records them. The ledger is built in one statement (SQLite: a
//! recursive CTE; PostgreSQL: generate_series), the history trigger set aside meanwhile. On
//! SQLite this runs with the suite (about 12 s in a debug build); on PostgreSQL it is
//! `tests/e2e_pg/inspect_million.rs`, ignored (run it with `--ignored`).

use std::process::Command;

use crate::util::*;

const ROWS: i64 = 1_000_000;

/// Peak resident memory any of these runs may reach: a page and SQLite's own cache are a
/// few MiB; loading the rows of one state here is hundreds.
const RSS_BOUND_KIB: u64 = 64 * 1024;

/// A million rows, 4 per second over 2.9 days: 60 % DONE/0000, 20 % UNKNOWN, 15 % FAILED/E902
/// (attempts 1 to 3: a third at reprocess's cap), 5 % SENT; a request of 160 bytes each
/// and a reply of 60 for settled rows; 5,000 UNKNOWN GUIDs resolve gave up on.
fn million(db: &TempLedger) {
    db.create();
    if db.backend() == Backend::Postgres {
        return million_pg(db);
    }
    bulk_insert_without_history(
        db,
        &format!(
            "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < {last})
         INSERT INTO tx (guid, tx_code, state, rsp_code, request, response, attempts,
                         updated_at)
         SELECT printf('G-M-%07d', i), 'TRNF',
                CASE WHEN i % 100 < 60 THEN 'DONE' WHEN i % 100 < 80 THEN 'UNKNOWN'
                     WHEN i % 100 < 95 THEN 'FAILED' ELSE 'SENT' END,
                CASE WHEN i % 100 < 60 THEN '0000' WHEN i % 100 < 80 THEN 'E901'
                     WHEN i % 100 < 95 THEN 'E902' END,
                randomblob(160),
                CASE WHEN i % 100 < 60 OR (i % 100 >= 80 AND i % 100 < 95)
                     THEN randomblob(60) END,
                1 + i % 3,
                datetime('now', '-' || (({rows} - i) / 4 + 60) || ' seconds')
         FROM n;
         INSERT INTO tx_inquiry (guid, failures, last_error, next_at)
         SELECT guid, 25, 'the core timed out', datetime('now') FROM tx
         WHERE state = 'UNKNOWN' ORDER BY guid LIMIT 5000;
         ",
            last = ROWS - 1,
            rows = ROWS,
        ),
    );
}

/// The same rows on PostgreSQL (a request of 160 bytes from md5s; the trigger disabled for
/// the insert), then ANALYZE, as autovacuum would soon.
fn million_pg(db: &TempLedger) {
    let mut c = db.pg_client();
    c.batch_execute(&format!(
        "BEGIN;
         ALTER TABLE tx DISABLE TRIGGER USER;
         INSERT INTO tx (guid, tx_code, state, rsp_code, request, response, attempts,
                         updated_at)
         SELECT 'G-M-' || lpad(i::text, 7, '0'), 'TRNF',
                CASE WHEN i % 100 < 60 THEN 'DONE' WHEN i % 100 < 80 THEN 'UNKNOWN'
                     WHEN i % 100 < 95 THEN 'FAILED' ELSE 'SENT' END,
                CASE WHEN i % 100 < 60 THEN '0000' WHEN i % 100 < 80 THEN 'E901'
                     WHEN i % 100 < 95 THEN 'E902' END,
                decode(repeat(md5(i::text), 10), 'hex'),
                CASE WHEN i % 100 < 60 OR (i % 100 >= 80 AND i % 100 < 95)
                     THEN decode(substr(repeat(md5(i::text), 4), 1, 120), 'hex') END,
                1 + i % 3,
                now() - make_interval(secs => ({rows} - i) / 4 + 60)
         FROM generate_series(0, {last}) AS i;
         INSERT INTO tx_inquiry (guid, failures, last_error, next_at)
         SELECT guid, 25, 'the core timed out', now() FROM tx
         WHERE state = 'UNKNOWN' ORDER BY guid LIMIT 5000;
         ALTER TABLE tx ENABLE TRIGGER USER;
         COMMIT;
         ANALYZE tx; ANALYZE tx_inquiry;",
        last = ROWS - 1,
        rows = ROWS,
    ))
    .expect("a million rows");
}

/// The key of G-M-0500080 as a cursor's text: `updated_at` as the backend compares it.
fn half_way(db: &TempLedger) -> String {
    let at: String = match db.backend() {
        Backend::Sqlite => rusqlite::Connection::open(db.path())
            .unwrap()
            .query_row(
                "SELECT updated_at FROM tx WHERE guid = 'G-M-0500080'",
                [],
                |r| r.get(0),
            )
            .unwrap(),
        Backend::Postgres => db
            .pg_client()
            .query_one(
                "SELECT to_char(updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US') \
                 FROM tx WHERE guid = 'G-M-0500080'",
                &[],
            )
            .unwrap()
            .get(0),
    };
    format!("{},G-M-0500080", at.replace(' ', "%20"))
}

/// The `inspect` measured: this build's, or the one `INSPECT_BIN` names (a release build, for
/// the figures in docs/performance.md).
fn inspect_bin() -> std::path::PathBuf {
    std::env::var_os("INSPECT_BIN").map_or_else(|| testkit::bin("inspect"), Into::into)
}

/// One `inspect` run under /usr/bin/time: the run, its seconds and its peak RSS in KiB.
fn measured(db: &TempLedger, args: &[&str]) -> (Run, f64, u64) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("time");
    let mut cmd = Command::new("/usr/bin/time");
    cmd.arg("-f")
        .arg("%e %M")
        .arg("-o")
        .arg(&out)
        .arg(inspect_bin())
        .args(["--db", db.arg()])
        .args(args);
    let r = Run::command(cmd, std::time::Duration::from_secs(120));
    let t = std::fs::read_to_string(&out).expect("time's report");
    // The last line: before it, time says so if the command failed.
    let mut f = t.lines().last().unwrap_or_default().split_whitespace();
    let secs = f.next().and_then(|s| s.parse().ok()).expect("seconds");
    let kib = f.next().and_then(|s| s.parse().ok()).expect("max RSS");
    eprintln!(
        "inspect {}: {secs:.2} s, peak RSS {:.1} MiB",
        args.join(" "),
        kib as f64 / 1024.0
    );
    (r, secs, kib)
}

#[track_caller]
fn small(args: &str, kib: u64) {
    assert!(
        kib < RSS_BOUND_KIB,
        "inspect {args}: peak RSS {kib} KiB, more than {RSS_BOUND_KIB} KiB: it loaded rows"
    );
}

sqlite_only! {
    "PostgreSQL's run is tests/e2e_pg/inspect_million.rs (ignored: a million rows take \
     longer to build there)",
    fn summary_and_pages_of_a_million_rows_read_counts_and_a_page() {
        summary_and_pages_of_a_million_rows();
    }
}

/// Builds the million rows on this binary's backend, runs and measures each view, then
/// checks each.
pub fn summary_and_pages_of_a_million_rows() {
    let db = temp_ledger();
    let started = std::time::Instant::now();
    million(&db);
    eprintln!(
        "a million rows built in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    // A page half-way through: after G-M-0500080 (FAILED), by the cursor's text.
    let cursor = half_way(&db);
    // Every run measured first, then each checked (all measured even where one fails).
    let runs: Vec<(&str, Run, u64)> = [
        ("summary", &["summary"][..]),
        (
            "list --state DONE --limit 50",
            &["list", "--state", "DONE", "--limit", "50", "--json"][..],
        ),
        (
            "list --state FAILED --limit 50 --after CURSOR",
            &[
                "list", "--state", "FAILED", "--limit", "50", "--after", &cursor, "--json",
            ][..],
        ),
        ("(the listing without a command)", &[][..]),
    ]
    .into_iter()
    .map(|(what, args)| {
        let (r, _, kib) = measured(&db, args);
        (what, r, kib)
    })
    .collect();
    for (what, r, kib) in &runs {
        r.expect_code(EXIT_SETTLED);
        small(what, *kib);
    }

    let capped = (0..ROWS)
        .filter(|i| (80..95).contains(&(i % 100)) && i % 3 == 2)
        .count();
    let out = runs[0].1.stdout();
    let l: Vec<&str> = out.lines().collect();
    assert_eq!(
        l[0],
        "rows by state: 600000 DONE, 150000 FAILED, 50000 SENT, 200000 UNKNOWN"
    );
    assert!(
        l[1].starts_with("oldest UNKNOWN: G-M-0000060 (rsp_code E901, attempts 1), "),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "them): {capped}\n  G-M-0000080 (attempts 3, since "
        )),
        "{out}"
    );
    let more = format!("\n  and {} more (the first 20 listed)\n", capped - 20);
    assert!(out.contains(&more), "{out}");
    assert!(out.contains("need an operator): 5000\n"), "{out}");
    assert!(
        out.ends_with(
            "\n  and 4980 more (the first 20 listed)\n\
             settlement requests pending a second person: 0\n"
        ),
        "{out}"
    );

    let j = runs[1].1.json();
    assert_eq!(
        (&j["count"], &j["total"]),
        (&50.into(), &600000.into()),
        "{j}"
    );
    assert_eq!(j["rows"][0]["guid"], "G-M-0000000");
    assert_eq!(j["rows"][49]["guid"], "G-M-0000049");
    let next = j["next"].as_str().expect("a next page");
    assert!(next.ends_with(",G-M-0000049"), "{next}");

    let j = runs[2].1.json();
    assert_eq!(j["rows"][0]["guid"], "G-M-0500081", "{j}");
    assert_eq!(j["rows"][49]["guid"], "G-M-0500385", "{j}");

    let l: Vec<&str> = runs[3].1.stdout().lines().collect();
    assert!(l[1].starts_with("G-M-0000000\tDONE\t0000\t1\t"), "{l:?}");
    assert!(l[50].starts_with("G-M-0000049\tDONE\t"), "{l:?}");
    assert!(
        l[51].starts_with("next page: inspect --limit 50 --after "),
        "{l:?}"
    );
    eprintln!(
        "built, measured and checked in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}
