//! `reconcile`'s edges: the window, where a GUID is placed in time, usage errors (exit 2),
//! bad journals and unreadable ledgers (exit 3), identical lines, and a ledger read across
//! the pages of PostgreSQL's cursor.

use super::*;

#[test]
fn the_window_is_from_included_to_excluded_and_a_bound_alone_replaces_its_default() {
    skip_if_unavailable!();
    let db = temp_ledger();
    db.create();
    let journal = journal_of(
        &db,
        &[
            &line("A", "C1", 1, T0),
            &line("B", "C2", 2, T1),
            &line("C", "C3", 3, T2),
        ],
    );
    let guids = |j: &Value| breaks(j).into_iter().map(|(_, g)| g).collect::<Vec<_>>();
    let j = reconcile_json(&db, &journal, &[], EXIT_FATAL);
    assert_eq!(guids(&j), ["A", "B", "C"]);
    assert_eq!(
        j["window"],
        json!({"from": T0, "to": "2026-12-02T09:00:21Z"})
    );
    assert_eq!(j["totals"]["journal"], json!({"count": 3, "amount": 6}));
    let j = reconcile_json(&db, &journal, &["--from", T1], EXIT_FATAL);
    assert_eq!(guids(&j), ["B", "C"]);
    assert_eq!(
        j["window"],
        json!({"from": T1, "to": "2026-12-02T09:00:21Z"})
    );
    let j = reconcile_json(&db, &journal, &["--to", T1], EXIT_FATAL);
    assert_eq!(guids(&j), ["A"]);
    assert_eq!(j["window"], json!({"from": T0, "to": T1}));
    let j = reconcile_json(&db, &journal, &["--from", T1, "--to", T2], EXIT_FATAL);
    assert_eq!(guids(&j), ["B"]);
    // The same instant in another offset.
    let j = reconcile_json(
        &db,
        &journal,
        &["--from", "2026-12-02T10:00:10+01:00", "--to", T2],
        EXIT_FATAL,
    );
    assert_eq!(guids(&j), ["B"]);
    let j = reconcile_json(
        &db,
        &journal,
        &[
            "--from",
            "2026-12-02T09:00:21Z",
            "--to",
            "2026-12-02T09:00:30Z",
        ],
        EXIT_SETTLED,
    );
    assert_eq!(counts(&j), want(&[]));
}

#[test]
fn a_reported_guid_is_classified_from_all_its_lines_wherever_they_fall() {
    skip_if_unavailable!();
    let db = temp_ledger();
    db.create();
    // A: booked at T0 and T2; only T2 is in the window, and A is a double.
    // B: booked at T0 only: outside the window, not reported.
    let journal = journal_of(
        &db,
        &[
            &line("A", "C1", 1, T0),
            &line("B", "C2", 2, T0),
            &line("A", "C9", 1, T2),
        ],
    );
    let j = reconcile_json(&db, &journal, &["--from", T1], EXIT_FATAL);
    assert_eq!(breaks(&j), [("double".into(), "A".into())]);
    assert_eq!(j["breaks"][0]["journal"].as_array().unwrap().len(), 2);
    assert_eq!(j["totals"]["journal"], json!({"count": 1, "amount": 1}));
}

#[test]
fn a_done_row_without_a_readable_reply_is_placed_by_updated_at() {
    skip_if_unavailable!();
    let db = temp_ledger();
    RowSpec::new("HAND", State::Done).code("0000").insert(&db);
    RowSpec::new("REJ", State::Done).code("B001").insert(&db);
    RowSpec::new("UNK", State::Unknown).code("E901").insert(&db);
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
    assert_eq!(counts(&j), want(&[("missing", 1)]));
    assert_eq!(breaks(&j), [("missing".into(), "HAND".into())]);
    assert_eq!(j["breaks"][0]["ledger"]["reply_error"], "no stored reply");
    // A window that ends before the row's updated_at does not report it.
    let j = reconcile_json(
        &db,
        &empty,
        &[
            "--from",
            "2000-01-01T00:00:00Z",
            "--to",
            "2001-01-01T00:00:00Z",
        ],
        EXIT_SETTLED,
    );
    assert_eq!(counts(&j), want(&[]));
}

#[test]
fn a_done_row_is_placed_by_its_replys_booked_at_at_the_windows_edges() {
    skip_if_unavailable!();
    let db = temp_ledger();
    // Its stored reply says booked at T1; its updated_at is now.
    done_with_reply(&db, "PLACED", "C1", 5, T1);
    let empty = journal_of(&db, &[]);
    let reported = |from: &str, to: &str| {
        let code = if from <= T1 && T1 < to {
            EXIT_FATAL
        } else {
            EXIT_SETTLED
        };
        let j = reconcile_json(&db, &empty, &["--from", from, "--to", to], code);
        breaks(&j)
            .into_iter()
            .map(|(c, g)| format!("{c} {g}"))
            .collect::<Vec<_>>()
    };
    assert_eq!(reported(T1, T2), ["missing PLACED"], "from is included");
    assert!(reported(T0, T1).is_empty(), "to is excluded");
    // Not by updated_at: a window around now, far from T1, does not report it.
    assert!(reported("2026-12-03T00:00:00Z", "2100-01-01T00:00:00Z").is_empty());
}

#[test]
fn usage_errors_exit_2() {
    skip_if_unavailable!();
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

#[test]
fn a_bad_journal_line_stops_the_run_naming_file_and_line() {
    skip_if_unavailable!();
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

#[test]
fn identical_lines_are_one_booking() {
    skip_if_unavailable!();
    let db = temp_ledger();
    db.create();
    let l = line("A", "C1", 5, T0);
    let same_instant = line("A", "C1", 5, "2026-12-02T10:00:00+01:00");
    let journal = journal_of(&db, &[&l, &l, &same_instant]);
    let j = reconcile_json(&db, &journal, &[], EXIT_FATAL);
    assert_eq!(counts(&j), want(&[("ghost", 1)]));
    assert_eq!(j["totals"]["journal"], json!({"count": 1, "amount": 5}));
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
