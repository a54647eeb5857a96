//! `settle --not-booked` believes a 404 only for a row unchanged for `--min-age` (default 300
//! s, resolve's deployed default; `INSPECT_MIN_AGE`): the request for a row 62 s old, which
//! a slow core may still be working on, is refused with how old it is, the min age and why,
//! before the core is asked and with nothing written (no request made); with `--min-age 60`
//! the request is made for the same row, recording that guard, and another person's approval
//! settles it. Before, the stale-sent floor (60 s) was the only wait, and a slow core's
//! transfer settled FAILED at 62 s was booked a second time by reprocess.

use super::*;

/// Past the stale-sent floor (the old wait), short of the default `--min-age`.
const YOUNG: u64 = 62;

/// `inspect --db DB settle GUID ARGS… --reason R` (a request, by the first person) with
/// `env` set.
fn request_with_env(db: &TempLedger, guid: &str, args: &[&str], env: &[(&str, &str)]) -> Run {
    let argv = [
        &["--db", db.arg(), "settle", guid][..],
        args,
        &["--reason", "core ops: never arrived"],
    ]
    .concat();
    Run::with_env(
        "inspect",
        &argv,
        &[&[("RUST_LOG", "info")][..], env].concat(),
    )
}

/// The age a refusal gives: `changed N s ago`.
fn age_said(stderr: &str) -> u64 {
    let after = stderr
        .split_once("changed ")
        .unwrap_or_else(|| panic!("an age in: {stderr}"))
        .1;
    let (n, rest) = after.split_once(' ').expect("N s ago");
    assert!(rest.starts_with("s ago, "), "{stderr}");
    n.parse().expect("a number of seconds")
}

#[test]
fn not_booked_refuses_a_row_younger_than_min_age_and_settles_it_with_a_lower_one() {
    skip_if_unavailable!();
    let m = msg("G-MA-SLOW", 62, "");
    let s = Scene::new()
        .core(&[])
        .row(RowSpec::unknown(&m).age(YOUNG))
        .build();
    let p = second_person!(&s.db);
    let first = first_person(&s.db);
    booked_canary(&s, "G-MA-CANARY");
    let core = s.core().url();
    let not_booked = ["--not-booked", "--core", core.as_str()];
    let before = rows_by_guid(&s.db);
    let history_before = history(&s.db, "G-MA-SLOW");
    let asked = s.core().inquiries();

    // The default, for real and as a dry run: refused, saying how old the row is, the min
    // age, and why.
    for extra in [&[][..], &["--dry-run"]] {
        let r = settle(
            &s.db,
            &p,
            "G-MA-SLOW",
            &[&not_booked[..], extra].concat(),
            "core ops: never arrived",
        );
        assert_refused(
            &r,
            "G-MA-SLOW",
            "less than --min-age (300 s): the core may still be working on it, and a 404 proves \
             nothing while it may; try again in ",
        );
        let age = age_said(r.stderr());
        assert!((YOUNG..YOUNG + 60).contains(&age), "{}", r.stderr());
        assert!(r.stderr().contains("the row is UNKNOWN and changed "));
    }
    // With --json: the refusal is one object on stdout too, as every failure's.
    let r = settle(
        &s.db,
        &p,
        "G-MA-SLOW",
        &[&not_booked[..], &["--json"]].concat(),
        "r",
    );
    let j = assert_one_json_object(&r, "inspect", EXIT_FATAL);
    assert_eq!(
        (&j["exit"], &j["written"], &j["requested"]),
        (&json!(1), &json!(false), &json!(false)),
        "{j}"
    );
    assert!(
        j["refused"]
            .as_str()
            .is_some_and(|w| w.contains("--min-age (300 s)")),
        "{j}"
    );
    // Under the stale-sent floor is a usage error naming the flag.
    let r = settle(
        &s.db,
        &p,
        "G-MA-SLOW",
        &[&not_booked[..], &["--min-age", "59"]].concat(),
        "r",
    );
    r.expect_code(EXIT_USAGE);
    assert!(
        r.stderr().contains("--min-age") && r.stderr().contains("at least 60"),
        "{}",
        r.stderr()
    );
    // The environment twin, and the flag winning over it.
    let r = request_with_env(
        &s.db,
        "G-MA-SLOW",
        &[&not_booked[..], &["--min-age", "300"]].concat(),
        &[("INSPECT_MIN_AGE", "60")],
    );
    assert_refused(&r, "G-MA-SLOW", "less than --min-age (300 s)");
    let r = request_with_env(
        &s.db,
        "G-MA-SLOW",
        &[&not_booked[..], &["--dry-run", "--json"]].concat(),
        &[("INSPECT_MIN_AGE", "60")],
    );
    r.expect_code(EXIT_SETTLED);
    let j = r.json();
    assert_eq!(j["unchanged_for_secs"], 60, "{j}");
    assert_eq!(
        (&j["dry_run"], &j["requested"], &j["request"]),
        (&json!(true), &json!(false), &Value::Null),
        "{j}"
    );
    // Only the dry run asked the core (the canary and the inquiry): every refusal above came
    // before any question.
    assert_eq!(s.core().inquiries(), asked + 2, "only the dry run asked");
    assert_eq!(rows_by_guid(&s.db), before, "nothing written");
    assert_eq!(history(&s.db, "G-MA-SLOW"), history_before);
    let j = inspect(&s.db, &["requests", "--all", "--json"]).json();
    assert_eq!(j["requests"], json!([]), "no request made: {j}");

    // With --min-age 60 (a core known to answer within a minute): requested, guarded by it,
    // and settled by the approval, under the same guard.
    let r = request(
        &s.db,
        "G-MA-SLOW",
        &[&not_booked[..], &["--min-age", "60"]].concat(),
        "core ops: never arrived",
    );
    r.expect_code(EXIT_SETTLED);
    assert!(
        r.stdout().starts_with(&format!(
            "settle G-MA-SLOW: request 1: UNKNOWN -> FAILED/E902 (if state UNKNOWN, attempts 1, \
             unchanged for 60 s), asked by {first}, reason: core ops: never arrived\n"
        )),
        "{}",
        r.stdout()
    );
    assert_eq!(rows_by_guid(&s.db), before, "a request changes no row");
    let r = as_second(&p, &["approve", "1", "--core", &core]);
    r.expect_code(EXIT_SETTLED);
    assert!(
        r.stdout().starts_with(&format!(
            "approve 1: settle G-MA-SLOW: UNKNOWN -> FAILED/E902 (if state UNKNOWN, attempts 1, \
             unchanged for 60 s), asked by {first}, approved by {}, reason: core ops: never \
             arrived\n",
            p.name
        )),
        "{}",
        r.stdout()
    );
    assert_failed_e902(&s.db, &m, 1);
    assert_eq!(s.core().bookings("G-MA-SLOW"), 0);
}

#[test]
fn min_age_holds_a_sent_row_too_and_not_a_booking() {
    skip_if_unavailable!();
    // SENT for 2 minutes: past the stale-sent floor, so --booked settles it, but a core may
    // still be working on it, so --not-booked waits for --min-age.
    let m = msg("G-MA-SENT", 63, "");
    let s = Scene::new()
        .core(&[])
        .row(RowSpec::sent(&m).age(OLD))
        .build();
    let p = second_person!(&s.db);
    let first = first_person(&s.db);
    booked_canary(&s, "G-MA-SENT-CANARY");
    let core = s.core().url();
    let before = rows_by_guid(&s.db);
    let r = settle(
        &s.db,
        &p,
        "G-MA-SENT",
        &["--not-booked", "--core", &core],
        "relay host died",
    );
    assert_refused(
        &r,
        "G-MA-SENT",
        "less than --min-age (300 s): a relay may still be waiting for the core on it, and the \
         core may still be working on it: a 404 proves nothing while it may",
    );
    assert!(r.stderr().contains("the row is SENT and changed "));
    assert_eq!(rows_by_guid(&s.db), before, "nothing written");

    // --min-age is --not-booked's: --booked settles the row past the floor, as before, even
    // with INSPECT_MIN_AGE set (where it is asked, and where it is approved).
    let r = request_with_env(
        &s.db,
        "G-MA-SENT",
        &[
            "--booked",
            "--core-ref",
            "C63",
            "--amount",
            "63",
            "--booked-at",
            "2026-01-31T23:59:59Z",
        ],
        &[("INSPECT_MIN_AGE", "3600")],
    );
    r.expect_code(EXIT_SETTLED);
    assert!(
        r.stdout().starts_with(&format!(
            "settle G-MA-SENT: request 1: SENT -> DONE/0000 (if state SENT, attempts 1, \
             unchanged for 60 s), asked by {first}, "
        )),
        "{}",
        r.stdout()
    );
    let r = as_second_with_env(&p, &["approve", "1"], &[("INSPECT_MIN_AGE", "3600")]);
    r.expect_code(EXIT_SETTLED);
    assert!(
        r.stdout().starts_with(&format!(
            "approve 1: settle G-MA-SENT: SENT -> DONE/0000 (if state SENT, attempts 1, \
             unchanged for 60 s), asked by {first}, approved by {}, ",
            p.name
        )),
        "{}",
        r.stdout()
    );
    let row = s.db.row("G-MA-SENT").unwrap();
    assert_eq!(
        (row.state, row.rsp_code.as_deref(), row.attempts),
        (State::Done, Some("0000"), Some(1))
    );
}
