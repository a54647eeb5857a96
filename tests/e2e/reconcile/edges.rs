//! `reconcile`'s edges as the binary meets them: usage errors (exit 2) and bad journals
//! (exit 3, naming the file and the line), on SQLite only since no ledger is read; a ledger
//! that cannot be read (exit 3) and one read across the pages of PostgreSQL's cursor, on
//! both. The window's edges, where a row is placed in time and identical lines are the
//! classes' unit tests (`crates/reconcile/src/classify/tests/window.rs`).

use super::*;

sqlite_only! {
    "the ledger's backend changes nothing here: once is enough",
    fn usage_errors_exit_2() {
        let db = temp_ledger();
        db.create();
        let journal = journal_of(&db, &[&line("A", "C1", 1, T0)]);
        let empty = journal_of(&db, &["", "   "]);
        for (j, args, names) in [
            (&journal, vec!["--from", T1, "--to", T0], "window"),
            (&journal, vec!["--from", T0, "--to", T0], "window"),
            (&journal, vec!["--to", T0], "window"), // from defaults to T0
            (&journal, vec!["--from", "2026-12-02T09:00:00"], "--from"),
            (&journal, vec!["--to", "2026-12-02"], "--to"),
            (&empty, vec![], "--from and --to"),
            (&empty, vec!["--from", T0], "--from and --to"),
        ] {
            let r = reconcile(&db, j, &args);
            r.expect_code(EXIT_USAGE);
            assert!(r.stderr().contains(names), "{args:?}: {}", r.stderr());
            assert_eq!(r.stdout(), "", "{args:?}");
        }
        // An empty journal with both bounds is a run.
        reconcile(&db, &empty, &["--from", T0, "--to", T1]).expect_code(EXIT_SETTLED);
    }
}

sqlite_only! {
    "the ledger's backend changes nothing here: once is enough",
    fn a_bad_journal_line_stops_the_run_naming_file_and_line() {
        let db = temp_ledger();
        // A row that would be a break: a half-read journal must not report anything.
        RowSpec::new("HAND", State::Done).code("0000").insert(&db);
        let good = line("A", "C1", 1, T0);
        for (lines, n) in [
            (
                vec![good.clone(), String::new(), "{\"guid\":\"B\"}".into()],
                3,
            ),
            (vec![good.clone(), "not json".into(), good.clone()], 2),
            (
                vec![good.clone(), line("B", "C2", 1, "2026-12-02T09:00:00")],
                2,
            ),
            (
                vec![
                    good.clone(),
                    r#"{"guid":"B","core_ref":"C2","amount":-1,"booked_at":"2026-12-02T09:00:00Z"}"#
                        .into(),
                ],
                2,
            ),
            (vec![good.clone(), line("", "C2", 1, T0)], 2),
            // Same guid and core_ref, another amount: a bad journal.
            (vec![good.clone(), line("A", "C1", 2, T0)], 2),
            (vec![good.clone(), line("A", "C1", 1, T1)], 2),
        ] {
            let journal = journal_of(&db, &lines.iter().map(String::as_str).collect::<Vec<_>>());
            let r = reconcile(&db, &journal, &[]);
            r.expect_code(3);
            assert_eq!(r.stdout(), "");
            let err: Vec<&str> = r.stderr().lines().collect();
            assert_eq!(err.len(), 1, "{}", r.stderr());
            assert!(
                err[0].contains(&format!("journal {} line {n}:", journal.display())),
                "{}",
                err[0]
            );
        }
        // A torn last line (no newline, cut short).
        let journal = db.dir().join("torn.jsonl");
        fs::write(&journal, format!("{good}\n{}", &good[..20])).unwrap();
        let r = reconcile(&db, &journal, &[]);
        r.expect_code(3);
        assert!(
            r.stderr().contains("line 2:") && r.stderr().contains("torn"),
            "{}",
            r.stderr()
        );
        // With --json: the failure object, exit 3.
        let r = reconcile(&db, &journal, &["--json"]);
        r.expect_code(3);
        assert_eq!(r.json()["exit_code"], 3);
        // A journal that is not there.
        let r = reconcile(&db, &db.dir().join("nowhere.jsonl"), &[]);
        r.expect_code(3);
        assert!(
            r.stderr().contains("nowhere.jsonl") && r.stderr().lines().count() == 1,
            "{}",
            r.stderr()
        );
    }
}

#[test]
fn a_ledger_that_cannot_be_read_exits_3() {
    skip_if_unavailable!();
    let db = temp_ledger();
    db.create();
    let journal = journal_of(&db, &[&line("A", "C1", 1, T0)]);
    for bad in unusable_ledgers(&db) {
        let j = journal.to_str().unwrap();
        let r = tool("reconcile", &["--db", &bad, "--journal", j]);
        r.expect_code(3);
        assert_eq!(r.stderr().lines().count(), 1, "{bad}: {}", r.stderr());
        assert!(r.stderr().contains("ledger"), "{}", r.stderr());
    }
}

sqlite_only! {
    "a missing SQLite file is not created (PostgreSQL has no file)",
    fn a_missing_ledger_is_not_created() {
        let db = temp_ledger();
        let journal = journal_of(&db, &[&line("A", "C1", 1, T0)]);
        let r = reconcile(&db, &journal, &[]);
        r.expect_code(3);
        assert!(!db.path().exists());
    }
}

#[test]
fn every_row_is_read_once_across_pages() {
    skip_if_unavailable!();
    // More rows than one page of PostgreSQL's cursor (10,000): each counted exactly once.
    let db = temp_ledger();
    let rows: Vec<RowSpec> = (0..25_003)
        .map(|i| RowSpec::new(&format!("P-{i:05}"), State::Done).code("0000"))
        .collect();
    insert_all(&db, &rows);
    let empty = journal_of(&db, &[]);
    let j = reconcile_json(
        &db,
        &empty,
        &[
            "--from",
            "2000-01-01T00:00:00Z",
            "--to",
            "2100-01-01T00:00:00Z",
        ],
        EXIT_FATAL,
    );
    assert_eq!(counts(&j), want(&[("missing", 25_003)]));
    assert_eq!(j["totals"]["ledger"], json!({"count": 25_003, "amount": 0}));
}
