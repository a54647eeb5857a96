//! Failed inquiries (issue 12): counted per GUID in the side table, each one putting the
//! GUID's next inquiry off (doubling from `--min-age`, capped at an hour); after
//! `--max-inquiries` failures the GUID is left to an operator: never asked about nor settled
//! again by resolve, listed in its summary, its `--json` and by `inspect`, exit 3. An
//! answered inquiry clears the record. Checked by the core's inquiry count (`/_stats`).

use serde_json::json;
use wire::E_UNKNOWN;

use crate::util::*;

/// A ledger holding a booked transfer (the canary) and the UNKNOWN row `G-BO-BAD`, and a core
/// that answers every inquiry about `G-BO-BAD` with a booking no reply can carry.
fn bad_booking_scene() -> Scene {
    let canary = msg("G-BO-CANARY", 5, "");
    let s = Scene::new()
        .core(&[])
        .row(RowSpec::of(&canary, State::Done).code("0000").age(DAY))
        .row(RowSpec::unknown(&msg("G-BO-BAD", 10, "")).age(OLD))
        .build();
    s.core().book(&canary);
    s.core().book_unrepresentable("G-BO-BAD");
    s
}

#[test]
fn failed_inquiries_count_up_back_off_and_stop_at_max_inquiries() {
    skip_if_unavailable!();
    let s = bad_booking_scene();
    let row_before = s.db.row("G-BO-BAD").unwrap();
    let run = || s.resolve(&["--min-age", "60", "--max-inquiries", "3", "--json"]);
    let mut asked = s.core().inquiries();
    let mut asked_since = || {
        let now = s.core().inquiries();
        let n = now - asked;
        asked = now;
        n
    };

    // 1st run: asked, failed; the next inquiry is --min-age away.
    let r = run();
    r.expect_code(EXIT_LEFT);
    let j = r.json();
    assert_counts(&j, &[("examined", 1), ("left", 1), ("done", 0)]);
    assert_eq!(j["unsettled"], json!(["G-BO-BAD"]));
    assert_eq!(j["needs_operator"], json!([]));
    assert_eq!(asked_since(), 2, "the canary and G-BO-BAD");
    assert_eq!(inquiry_failures(&s.db, "G-BO-BAD"), Some(1));
    assert_due_in(&s.db, "G-BO-BAD", 60);
    let record = &inquiry_records(&s.db)[0];
    assert!(
        record
            .last_error
            .as_deref()
            .is_some_and(|e| e.contains("exceeds 13 digits")),
        "{record:?}"
    );
    assert_eq!(
        s.db.row("G-BO-BAD").unwrap(),
        row_before,
        "the row as it was"
    );

    // At once again: not asked before its backoff is over (the canary still is).
    let r = run();
    r.expect_code(EXIT_SETTLED);
    assert_counts(&r.json(), &[("examined", 0), ("left", 0)]);
    assert_eq!(asked_since(), 1, "only the canary");
    assert_eq!(inquiry_failures(&s.db, "G-BO-BAD"), Some(1));

    // Due (aged by hand): asked, failed again; the delay doubles.
    make_inquiries_due(&s.db);
    run().expect_code(EXIT_LEFT);
    assert_eq!(asked_since(), 2);
    assert_eq!(inquiry_failures(&s.db, "G-BO-BAD"), Some(2));
    assert_due_in(&s.db, "G-BO-BAD", 120);

    // The third failure reaches --max-inquiries: left to an operator.
    make_inquiries_due(&s.db);
    let r = run();
    r.expect_code(EXIT_LEFT);
    assert_eq!(asked_since(), 2);
    let j = r.json();
    assert_counts(&j, &[("examined", 1), ("left", 1), ("exit_code", 3)]);
    let listed = &j["needs_operator"];
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{j}");
    assert_eq!(listed[0]["guid"], "G-BO-BAD");
    assert_eq!(listed[0]["failures"], 3);
    assert!(
        listed[0]["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("exceeds 13 digits")),
        "{j}"
    );
    assert!(
        line_about(r.stderr(), "G-BO-BAD", "3 inquiries failed"),
        "{}",
        r.stderr()
    );

    // From now on it is never asked about, even when due, and every run still lists it
    // and exits 3; the row is never settled by resolve.
    for _ in 0..2 {
        make_inquiries_due(&s.db);
        let r = s.resolve(&["--min-age", "60", "--max-inquiries", "3"]);
        r.expect_code(EXIT_LEFT);
        assert_eq!(
            r.stdout(),
            "resolve: 0 examined, 0 DONE, 0 FAILED, 0 left (inquiry error), 0 SENT->UNKNOWN, \
             0 skipped, 0 changed by another writer, 1 need an operator\n"
        );
        assert!(
            line_about(
                r.stderr(),
                "G-BO-BAD",
                "needs an operator: 3 inquiries failed"
            ),
            "{}",
            r.stderr()
        );
        assert_eq!(asked_since(), 1, "only the canary");
    }
    assert_eq!(inquiry_failures(&s.db, "G-BO-BAD"), Some(3));
    assert_eq!(s.db.row("G-BO-BAD").unwrap(), row_before);
    let dry = s.resolve(&[
        "--min-age",
        "60",
        "--max-inquiries",
        "3",
        "--dry-run",
        "--json",
    ]);
    dry.expect_code(EXIT_SETTLED);
    assert_eq!(
        dry.json()["count"],
        0,
        "a dry run selects what a run would ask"
    );

    // The operator tool shows it (with the same cap).
    let r = tool("inspect", &["--db", s.db.arg(), "--max-inquiries", "3"]);
    r.expect_code(EXIT_SETTLED);
    let line = r
        .stdout()
        .lines()
        .find(|l| l.starts_with("needs operator: "))
        .unwrap_or_else(|| panic!("{}", r.stdout()));
    assert!(
        line.starts_with("needs operator: G-BO-BAD (3 inquiries failed;")
            && line.contains("exceeds 13 digits"),
        "{line}"
    );
    let r = tool(
        "inspect",
        &["--db", s.db.arg(), "--max-inquiries", "3", "--json"],
    );
    assert_eq!(r.json()["needs_operator"][0]["guid"], "G-BO-BAD");
    assert_eq!(r.json()["needs_operator"][0]["failures"], 3);
    // Under the default cap of 20 nobody needs an operator yet, and the listing is as
    // before.
    let r = tool("inspect", &["--db", s.db.arg()]);
    assert!(!r.stdout().contains("needs operator"), "{}", r.stdout());
    assert_eq!(
        r.stdout().lines().last(),
        Some("rows by state: 1 DONE, 1 UNKNOWN")
    );
}

#[test]
fn a_guid_left_to_an_operator_is_not_settled_until_the_operator_raises_the_cap() {
    skip_if_unavailable!();
    // No booking in the ledger yet: no canary, so inquiries are made with the core down.
    let a = msg("G-OP-A", 10, "");
    let b = msg("G-OP-B", 20, "");
    let s = Scene::new()
        .row(RowSpec::unknown(&a).age(OLD))
        .row(RowSpec::unknown(&b).age(OLD + 1))
        .build();
    let r = resolve(
        &s.db,
        &dead_url(),
        &["--min-age", "60", "--max-inquiries", "1", "--json"],
    );
    r.expect_code(EXIT_LEFT);
    let j = r.json();
    assert_counts(&j, &[("examined", 2), ("left", 2)]);
    let listed: Vec<&str> = j["needs_operator"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["guid"].as_str().unwrap())
        .collect();
    assert_eq!(listed, ["G-OP-A", "G-OP-B"], "by GUID");

    // The core is back and could answer; resolve does not ask.
    let core = Core::start(&[]);
    core.book(&a);
    make_inquiries_due(&s.db);
    let r = resolve(
        &s.db,
        &core.url(),
        &["--min-age", "60", "--max-inquiries", "1"],
    );
    r.expect_code(EXIT_LEFT);
    assert!(
        r.stdout().starts_with("resolve: 0 examined,")
            && r.stdout().ends_with(", 2 need an operator\n"),
        "{}",
        r.stdout()
    );
    assert_eq!(core.inquiries(), 0);
    assert_eq!(s.db.state("G-OP-A"), Some(State::Unknown));

    // The operator raises the cap (here by the environment twin): asked, settled, and the
    // answered inquiries clear the records.
    let r = Run::with_env(
        "resolve",
        &[
            "--db",
            s.db.arg(),
            "--core",
            &core.url(),
            "--min-age",
            "60",
            "--json",
        ],
        &[("RESOLVE_MAX_INQUIRIES", "2")],
    );
    r.expect_code(EXIT_SETTLED);
    let j = r.json();
    assert_counts(&j, &[("examined", 2), ("done", 1), ("failed", 1)]);
    assert_eq!(j["needs_operator"], json!([]));
    assert_eq!(core.inquiries(), 2);
    assert_done_as_booked(&s.db, &core, &a);
    assert_failed_e902(&s.db, &b, 1);
    assert_eq!(inquiry_records(&s.db), vec![]);
    assert_eq!(core.total_bookings(), 1, "resolve never POSTs");
}

#[test]
fn an_answered_inquiry_clears_the_record_and_a_later_failure_starts_over() {
    skip_if_unavailable!();
    let a = msg("G-CL-A", 10, "");
    let s = Scene::new().row(RowSpec::unknown(&a).age(OLD)).build();
    for n in 1..=2 {
        make_inquiries_due(&s.db);
        resolve(&s.db, &dead_url(), &["--min-age", "60"]).expect_code(EXIT_LEFT);
        assert_eq!(inquiry_failures(&s.db, "G-CL-A"), Some(n));
    }
    // An answer that settles nothing new still clears: the core says "never booked".
    let core = Core::start(&[]);
    make_inquiries_due(&s.db);
    resolve(&s.db, &core.url(), &["--min-age", "60"]).expect_code(EXIT_SETTLED);
    assert_failed_e902(&s.db, &a, 1);
    assert_eq!(inquiry_records(&s.db), vec![]);

    // The row goes round again (resent, outcome unknown): its failures count from 1.
    by_hand(
        &s.db,
        "UPDATE tx SET state = 'UNKNOWN', rsp_code = 'E901', attempts = 2, \
         updated_at = datetime('now', '-120 seconds') WHERE guid = 'G-CL-A'",
        "UPDATE tx SET state = 'UNKNOWN', rsp_code = 'E901', attempts = 2, \
         updated_at = now() - interval '120 seconds' WHERE guid = 'G-CL-A'",
    );
    resolve(&s.db, &dead_url(), &["--min-age", "60"]).expect_code(EXIT_LEFT);
    assert_eq!(inquiry_failures(&s.db, "G-CL-A"), Some(1));
    assert_due_in(&s.db, "G-CL-A", 60);
}

#[test]
fn a_stale_sent_row_whose_inquiry_fails_moves_to_unknown_and_counts_a_failure() {
    skip_if_unavailable!();
    let canary = msg("G-SF-CANARY", 5, "");
    let sent = msg("G-SF-SENT", 10, "");
    let s = Scene::new()
        .core(&[])
        .row(RowSpec::of(&canary, State::Done).code("0000").age(DAY))
        .row(RowSpec::sent(&sent).age(OLD))
        .build();
    s.core().book(&canary);
    s.core().book_unrepresentable("G-SF-SENT");
    let r = s.resolve(&["--min-age", "60", "--stale-sent", "60", "--json"]);
    r.expect_code(EXIT_LEFT);
    assert_counts(&r.json(), &[("examined", 1), ("sent_to_unknown", 1)]);
    assert_settled_short(&s.db, &sent, State::Unknown, &E_UNKNOWN, 1);
    assert_eq!(inquiry_failures(&s.db, "G-SF-SENT"), Some(1));
    assert_due_in(&s.db, "G-SF-SENT", 60);

    // As an UNKNOWN row it goes on counting.
    s.db.age("G-SF-SENT", OLD);
    make_inquiries_due(&s.db);
    s.resolve(&["--min-age", "60"]).expect_code(EXIT_LEFT);
    assert_eq!(inquiry_failures(&s.db, "G-SF-SENT"), Some(2));
    assert_eq!(s.core().bookings("G-SF-SENT"), 1, "never POSTed");
}
