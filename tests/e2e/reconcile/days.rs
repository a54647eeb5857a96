//! A double booking across a day boundary (issue 39): the relay books X, the core books X
//! again two seconds later around the relay, and the core's export is split between two
//! days' files at an instant between the two bookings. Reconciling the second day says
//! `double` with that day's file alone (the stored reply names another core_ref than the
//! journal's one booking: §10, v1.3) and with both files (two bookings). And several
//! `--journal` files are one journal: identical lines once, a conflict across files bad.
//! On SQLite only: the journals are what differs here, not the ledger. The v1.3 rule itself
//! (a reply naming another core_ref) is a unit test of `crates/reconcile/src/classify`.

use std::time::Duration;

use super::*;

/// `reconcile --db DB --journal F1 --journal F2 … EXTRA…`
fn reconcile_files(db: &TempLedger, journals: &[&Path], extra: &[&str]) -> Run {
    let mut args = vec!["--db", db.arg()];
    for j in journals {
        args.extend(["--journal", j.to_str().expect("UTF-8 path")]);
    }
    args.extend(extra);
    tool("reconcile", &args)
}

fn reconcile_files_json(db: &TempLedger, journals: &[&Path], extra: &[&str], code: u8) -> Value {
    let r = reconcile_files(db, journals, &[extra, &["--json"]].concat());
    r.expect_code(code);
    r.json()
}

/// The journal's lines, parsed.
fn bookings(journal: &Path) -> Vec<Value> {
    fs::read_to_string(journal)
        .expect("journal")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a journal line"))
        .collect()
}

/// Splits the export at instant `at` into the day before (`booked_at` before it) and the day
/// of `at`, as the core's daily export would have: two files next to it.
fn split(export: &Path, at: &str) -> (PathBuf, PathBuf) {
    let text = fs::read_to_string(export).expect("journal");
    let (mut before, mut after) = (String::new(), String::new());
    for l in text.lines() {
        let v: Value = serde_json::from_str(l).expect("a journal line");
        let day = if v["booked_at"].as_str().unwrap() < at {
            &mut before
        } else {
            &mut after
        };
        day.push_str(l);
        day.push('\n');
    }
    let (day1, day2) = (
        export.with_file_name("day1.jsonl"),
        export.with_file_name("day2.jsonl"),
    );
    fs::write(&day1, before).expect("day 1");
    fs::write(&day2, after).expect("day 2");
    (day1, day2)
}

sqlite_only! {
    "the ledger's backend changes nothing here: once is enough",
    fn a_guid_booked_again_the_next_day_is_a_double_with_that_days_journal_alone_or_both() {
        let export = tempfile::tempdir()
            .expect("tempdir")
            .keep()
            .join("journal.jsonl");
        let scene = Scene::new()
            .core(&["--journal", export.to_str().unwrap()])
            .relay(&[])
            .build();
        let m = msg("X", 1500, "rent");
        assert_code(&scene.call(&m), "0000");
        std::thread::sleep(Duration::from_secs(2));
        scene.core().book(&m); // straight at the core, around the relay
        let lines = bookings(&export);
        assert_eq!(lines.len(), 2, "{lines:?}");
        let (relay_ref, core_ref) = (&lines[0]["core_ref"], &lines[1]["core_ref"]);
        // The day boundary: the second booking's instant, one second or more after the first.
        let at = lines[1]["booked_at"].as_str().unwrap().to_string();
        assert!(lines[0]["booked_at"].as_str().unwrap() < at.as_str());
        let (day1, day2) = split(&export, &at);
        let db = &scene.db;

        // The day before, reconciled the next morning with its own file: nothing wrong yet.
        let j = reconcile_files_json(db, &[&day1], &["--to", &at], EXIT_SETTLED);
        assert_eq!(counts(&j), want(&[("matched", 1)]));

        // The day after, its own file alone: one booking, and a reply naming another core_ref.
        let j = reconcile_files_json(db, &[&day2], &["--from", &at], EXIT_FATAL);
        assert_eq!(counts(&j), want(&[("double", 1)]));
        assert_eq!(breaks(&j), [("double".into(), "X".into())]);
        let b = &j["breaks"][0];
        assert_eq!(b["journal"].as_array().unwrap().len(), 1);
        assert_eq!(&b["journal"][0]["core_ref"], core_ref);
        assert_eq!(&b["ledger"]["reply"]["core_ref"], relay_ref);
        let why = b["why"].as_str().expect("why");
        let (relay_ref, core_ref) = (relay_ref.as_str().unwrap(), core_ref.as_str().unwrap());
        assert!(
            why.contains(&format!(
                "the ledger's reply names core_ref {relay_ref}, the journal's one booking {core_ref}"
            )) && why.contains("at least twice"),
            "{why}"
        );
        // The text says what each side says.
        let r = reconcile_files(db, &[&day2], &["--from", &at]);
        r.expect_code(EXIT_FATAL);
        let first = r.stdout().lines().next().unwrap_or_default().to_string();
        assert!(
            first.starts_with(&format!(
                "double X: journal 1 booking(s) [{core_ref} 1500 {at}]"
            )) && first.contains(&format!("; ledger DONE 0000 reply [{relay_ref} 1500 "))
                && first.contains("the core booked X at least twice"),
            "{first}"
        );
        assert!(
            r.stdout()
                .contains(" 1 double, 0 ghost, 0 pending, 0 matched, 0 mismatch,")
        );

        // The day after with the day before too (the wrapper's look-back): both bookings.
        let j = reconcile_files_json(db, &[&day1, &day2], &["--from", &at], EXIT_FATAL);
        assert_eq!(counts(&j), want(&[("double", 1)]));
        let shown: Vec<&str> = j["breaks"][0]["journal"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["core_ref"].as_str().unwrap())
            .collect();
        assert_eq!(shown, [relay_ref, core_ref]);
        // The control totals count the window's bookings only, not the day before's.
        assert_eq!(j["totals"]["journal"], json!({"count": 1, "amount": 1500}));
    }
}

sqlite_only! {
    "the ledger's backend changes nothing here: once is enough",
    fn several_journals_are_one_identical_lines_once_and_a_conflict_across_them_is_bad() {
        let db = temp_ledger();
        db.create();
        let a = line("A", "C1", 1, T0);
        // The exports overlap: A is in both, once a booking.
        let day1 = journal_of(&db, &[&a]);
        let day2 = journal_of(&db, &[&a, &line("B", "C2", 2, T1)]);
        let j = reconcile_files_json(&db, &[&day1, &day2], &[], EXIT_FATAL);
        assert_eq!(counts(&j), want(&[("ghost", 2)]));
        assert_eq!(j["totals"]["journal"], json!({"count": 2, "amount": 3}));
        assert_eq!(
            j["window"],
            json!({"from": T0, "to": "2026-12-02T09:00:11Z"})
        );
        // A's core_ref with another amount in the second file: the journal is bad, no verdict,
        // the later line named (the earlier one in the reason).
        let other = journal_of(&db, &[&line("B", "C2", 2, T1), &line("A", "C1", 5, T0)]);
        let r = reconcile_files(&db, &[&day1, &other], &[]);
        r.expect_code(3);
        assert_eq!(r.stdout(), "");
        let err: Vec<&str> = r.stderr().lines().collect();
        assert_eq!(err.len(), 1, "{}", r.stderr());
        assert!(
            err[0].contains(&format!("journal {} line 2:", other.display()))
                && err[0].contains(&format!("on line 1 of {}", day1.display())),
            "{}",
            err[0]
        );
        // One of them not there: named, no verdict, the failure object with --json.
        let gone = db.dir().join("no-such-day.jsonl");
        let r = reconcile_files(&db, &[&day1, &gone], &["--json"]);
        r.expect_code(3);
        assert_eq!(r.json()["exit_code"], 3);
        assert!(
            r.stderr().contains("no-such-day.jsonl") && r.stderr().lines().count() == 1,
            "{}",
            r.stderr()
        );
    }
}
