//! A reader that goes away ends no tool badly (issue 40.8): `inspect … | head -1` and
//! `reconcile … | head` used to panic (exit 101, "failed printing to stdout: Broken pipe" on
//! stderr). Every tool that prints, its stdout read by a reader that closes after one line
//! (or before the first), ends as the same run with a stdout read to its end would: the
//! same exit code, and nothing about a panic or a broken pipe on stderr.
//!
//! A reader that closes after one line breaks a pipe only when the tool still has more to
//! write than the pipe holds (64 KiB on Linux), so the long outputs here are thousands of
//! lines; a tool that prints one line meets a reader that closes before reading anything.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::*;

/// Rows of each kind in the ledger the listings page through: enough lines to overflow the
/// pipe many times over.
const ROWS: u32 = 3000;

/// Runs `tool args` with stdout into a pipe whose reader takes `lines` lines, then closes
/// it. The exit code, and stderr.
fn piped(tool: &str, args: &[&str], lines: usize) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().expect("temp dir");
    let err_path = dir.path().join("stderr");
    let mut child = Command::new(testkit::bin(tool))
        .args(args)
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(File::create(&err_path).expect("stderr file"))
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {tool}: {e}"));
    let mut reader = BufReader::new(child.stdout.take().expect("stdout"));
    for _ in 0..lines {
        let mut line = String::new();
        reader.read_line(&mut line).expect("a line");
    }
    drop(reader);
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(st) = child.try_wait().expect("try_wait") {
            break st;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("{tool} {args:?} still runs after its reader left");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
    (status.code(), stderr)
}

/// `tool args`, read to its end and then by a reader that leaves after `lines` lines: the
/// same exit code, no panic.
fn ends_alike(tool: &str, args: &[&str], lines: usize) {
    let whole = Run::with_env(tool, args, &[("RUST_LOG", "info")]);
    assert!(
        whole.code.is_some_and(|c| c != 101),
        "{tool} {args:?} read to its end: {:?}\n{}",
        whole.code,
        whole.stderr()
    );
    if lines > 0 {
        assert!(
            whole.stdout().len() > 128 * 1024,
            "{tool} {args:?}: too little output to break the pipe ({} bytes)",
            whole.stdout().len()
        );
    }
    let (code, stderr) = piped(tool, args, lines);
    assert_eq!(
        code, whole.code,
        "{tool} {args:?}: a reader that left after {lines} line(s) changed the exit code\n{stderr}"
    );
    for word in ["panicked", "Broken pipe", "broken pipe"] {
        assert!(!stderr.contains(word), "{tool} {args:?}: {word}:\n{stderr}");
    }
}

fn s(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}

/// A ledger with `ROWS` rows each UNKNOWN/E901, FAILED/E902 and DONE/0000, all 40 days old.
fn big_ledger() -> TempLedger {
    let db = TempLedger::new();
    db.create();
    let mut sql = String::new();
    for (prefix, state, code) in [
        ("U", "UNKNOWN", "E901"),
        ("F", "FAILED", "E902"),
        ("D", "DONE", "0000"),
    ] {
        sql.push_str(&format!(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {ROWS}) \
             INSERT INTO tx (guid, state, rsp_code, attempts, updated_at) \
             SELECT printf('G-PIPE-{prefix}-%05d', i), '{state}', '{code}', 1, \
             datetime('now', '-40 days') FROM n;"
        ));
    }
    bulk_insert_without_history(&db, &sql);
    db
}

#[test]
fn the_listings_end_alike_when_their_reader_leaves_after_one_line() {
    let db = big_ledger();
    let d = db.arg();
    let core = dead_url();
    let all = (3 * ROWS).to_string();
    let some = ROWS.to_string();
    let runs: [(&str, Vec<&str>); 6] = [
        ("inspect", vec!["--db", d, "--limit", &all]),
        ("inspect", vec!["--db", d, "--limit", &all, "--json"]),
        (
            "inspect",
            vec!["--db", d, "list", "--state", "UNKNOWN", "--limit", &some],
        ),
        (
            "resolve",
            vec!["--db", d, "--core", &core, "--min-age", "60", "--dry-run"],
        ),
        (
            "reprocess",
            vec![
                "--db",
                d,
                "--core",
                &core,
                "--max-attempts",
                "3",
                "--dry-run",
            ],
        ),
        ("purge", vec!["--db", d, "--days", "30", "--dry-run"]),
    ];
    for (tool, args) in &runs {
        ends_alike(tool, args, 1);
    }
}

#[test]
fn reconcile_ends_alike_with_its_breaks_cut_short() {
    let db = TempLedger::new();
    db.create();
    let journal = db.dir().join("journal.jsonl");
    let lines: Vec<String> = (0..ROWS)
        .map(|i| {
            format!(
                r#"{{"guid":"G-GHOST-{i:05}","core_ref":"C{i:017}","amount":100,"booked_at":"2026-12-02T09:00:00Z"}}"#
            )
        })
        .collect();
    std::fs::write(&journal, lines.join("\n") + "\n").expect("write the journal");
    let args = [
        "--db",
        db.arg(),
        "--journal",
        s(&journal),
        "--from",
        "2026-12-02T00:00:00Z",
        "--to",
        "2026-12-03T00:00:00Z",
    ];
    // Every booking a ghost: a break each, exit 1, whoever reads.
    ends_alike("reconcile", &args, 1);
    ends_alike("reconcile", &args, 0);
    let json = [&args[..], &["--json"]].concat();
    ends_alike("reconcile", &json, 1);
}

#[test]
fn the_one_line_tools_end_alike_when_nobody_reads() {
    let db = big_ledger();
    let d = db.arg();
    let core = dead_url();
    let out = tempfile::tempdir().expect("temp dir");
    let (b1, b2) = (out.path().join("b1.db"), out.path().join("b2.db"));
    let (r1, r2) = (TempLedger::new(), TempLedger::new());
    let guid = "G-PIPE-U-00001";
    let runs: Vec<(&str, Vec<&str>)> = vec![
        ("inspect", vec!["--db", d, "summary"]),
        ("inspect", vec!["--db", d, "show", guid]),
        ("inspect", vec!["--db", d, "show", "G-NO-SUCH"]),
        ("inspect", vec!["--db", d, "recovery", "--json"]),
        // The canary inquiry finds no core: refused, exit 1, with the failure object.
        (
            "resolve",
            vec!["--db", d, "--core", &core, "--min-age", "60", "--json"],
        ),
        (
            "reprocess",
            vec!["--db", d, "--core", &core, "--max-attempts", "3"],
        ),
        (
            "purge",
            vec!["--db", d, "--days", "30", "--dry-run", "--json"],
        ),
        // A usage error with --json: the failure object on stdout, exit 2.
        ("purge", vec!["--db", d, "--days", "0", "--json"]),
    ];
    for (tool, args) in &runs {
        ends_alike(tool, args, 0);
    }
    // Each run writes a file of its own: the one read to its end, then the one nobody reads.
    let nobody_reads = |tool: &str, args: &[&str]| {
        let (code, stderr) = piped(tool, args, 0);
        assert_eq!(code, Some(i32::from(EXIT_SETTLED)), "{tool}: {stderr}");
        assert!(!stderr.contains("panicked"), "{tool}: {stderr}");
    };
    tool("backup", &["--db", d, "--to", s(&b1)]).expect_code(EXIT_SETTLED);
    nobody_reads("backup", &["--db", d, "--to", s(&b2)]);
    tool("restore", &["--from", s(&b1), "--db", r1.arg()]).expect_code(EXIT_SETTLED);
    nobody_reads("restore", &["--from", s(&b2), "--db", r2.arg()]);
    assert_eq!(r2.count(), r1.count(), "restored all the same");
}
