//! Which rows are settled by hand: a request is made only for an UNKNOWN row, or a SENT row
//! unchanged for the stale-sent floor; for every other row it is refused, naming why, and no
//! request is made. Another person's approval then carries it out, guarded alike.

use super::*;

#[test]
fn only_unknown_or_sent_past_the_floor_is_settled() {
    skip_if_unavailable!();
    let done = msg("G-SO-DONE", 60, "");
    let failed = msg("G-SO-FAILED", 61, "");
    let other = msg("G-SO-OTHER", 62, "");
    let young = msg("G-SO-YOUNG", 63, "");
    let stale = msg("G-SO-STALE", 64, "");
    let stale_404 = msg("G-SO-STALE404", 65, "");
    let fresh = msg("G-SO-FRESH", 66, "");
    let s = Scene::new()
        .core(&[])
        .rows([
            RowSpec::of(&done, State::Done).code("0000").age(DAY),
            RowSpec::failed(&failed).age(DAY),
            RowSpec::of(&other, State::Failed).code("E901").age(DAY),
            RowSpec::of(&done, State::Received)
                .guid("G-SO-RECEIVED")
                .age(DAY),
            RowSpec::sent(&young),
            RowSpec::sent(&stale).attempts(2).age(OLD),
            RowSpec::sent(&stale_404).age(HOUR),
            RowSpec::new("G-SO-NOREQ", State::Unknown)
                .code("E901")
                .age(DAY),
            RowSpec::unknown(&other).guid("G-SO-WRONG").age(DAY),
            RowSpec::unknown(&fresh),
        ])
        .build();
    let p = second_person!(&s.db);
    let first = first_person(&s.db);
    // The ledger's bookings (G-SO-STALE's comes below), which the canary of --not-booked
    // asks about.
    s.core().book(&done);
    s.core().book(&stale);
    let core = s.core().url();
    let before = rows_by_guid(&s.db);
    let booked = [
        "--booked",
        "--core-ref",
        "C1",
        "--amount",
        "60",
        "--booked-at",
        "2026-01-31T23:59:59Z",
    ];
    let not_booked = ["--not-booked", "--core", core.as_str()];
    for (guid, why) in [
        ("G-SO-DONE", "the row is DONE/0000"),
        ("G-SO-FAILED", "the row is FAILED/E902"),
        ("G-SO-OTHER", "the row is FAILED/E901"),
        ("G-SO-RECEIVED", "the row is RECEIVED/-"),
        // Under the stale-sent floor (--booked) or --min-age (--not-booked).
        (
            "G-SO-YOUNG",
            "a relay may still be waiting for the core on it",
        ),
        ("G-SO-NOREQ", "no stored request"),
        ("G-SO-WRONG", "stored request is for guid \"G-SO-OTHER\""),
        ("G-SO-NONE", "no row for this GUID"),
    ] {
        for args in [&booked[..], &not_booked[..]] {
            let r = settle(&s.db, &p, guid, args, "r");
            assert_refused(&r, guid, why);
        }
    }
    assert_eq!(rows_by_guid(&s.db), before, "nothing changed");
    let j = inspect(&s.db, &["requests", "--all", "--json"]).json();
    assert_eq!(j["requests"], json!([]), "no request made: {j}");

    // A SENT row unchanged past the floor: guarded by state, attempt and age.
    let r = settle(
        &s.db,
        &p,
        "G-SO-STALE",
        &[
            "--booked",
            "--core-ref",
            "C2",
            "--amount",
            "64",
            "--booked-at",
            "2026-01-31T23:59:59Z",
        ],
        "relay host died; core ops confirm",
    );
    r.expect_code(EXIT_SETTLED);
    assert!(
        r.stdout().starts_with(&format!(
            "approve 1: settle G-SO-STALE: SENT -> DONE/0000 (if state SENT, attempts 2, \
             unchanged for 60 s), asked by {first}, approved by {}, reason: relay host died; \
             core ops confirm\n",
            p.name
        )),
        "{}",
        r.stdout()
    );
    let row = s.db.row("G-SO-STALE").unwrap();
    assert_eq!((row.state, row.attempts), (State::Done, Some(2)));
    let r = settle(&s.db, &p, "G-SO-STALE404", &not_booked, "relay host died");
    r.expect_code(EXIT_SETTLED);
    assert!(
        r.stdout().starts_with(&format!(
            "approve 2: settle G-SO-STALE404: SENT -> FAILED/E902 (if state SENT, attempts 1, \
             unchanged for 300 s), asked by {first}, approved by {}, reason: relay host died\n",
            p.name
        )),
        "{}",
        r.stdout()
    );
    assert_failed_e902(&s.db, &stale_404, 1);

    // A SENT or UNKNOWN row is settled --not-booked only once the core cannot still be
    // working on it (--min-age, 300 s by default; the tests in `min_age`); --booked at once.
    let r = settle(&s.db, &p, "G-SO-FRESH", &not_booked, "r");
    assert_refused(
        &r,
        "G-SO-FRESH",
        "less than --min-age (300 s): the core may still be working on it, and a 404 proves \
         nothing while it may",
    );
    s.db.age("G-SO-FRESH", HOUR);
    let r = settle(
        &s.db,
        &p,
        "G-SO-FRESH",
        &[&not_booked[..], &["--dry-run"]].concat(),
        "r",
    );
    r.expect_code(EXIT_SETTLED);
    assert!(
        r.stdout().ends_with("\ndry run: nothing written\n"),
        "{}",
        r.stdout()
    );
    s.db.age("G-SO-FRESH", 0);
    let r = settle(
        &s.db,
        &p,
        "G-SO-FRESH",
        &[
            "--booked",
            "--core-ref",
            "C3",
            "--amount",
            "66",
            "--booked-at",
            "2026-01-31T23:59:59Z",
        ],
        "core ops confirm",
    );
    r.expect_code(EXIT_SETTLED);
    assert!(
        r.stdout().starts_with(&format!(
            "approve 3: settle G-SO-FRESH: UNKNOWN -> DONE/0000 (if state UNKNOWN, attempts 1), \
             asked by {first}, approved by {}, reason: core ops confirm\n",
            p.name
        )),
        "{}",
        r.stdout()
    );
    assert_eq!(s.db.state("G-SO-FRESH"), Some(State::Done));
}
