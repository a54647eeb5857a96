//! What reprocess selects: FAILED/E902 rows below `--max-attempts`, oldest first, with a
//! usable stored request; a dry run lists them and does nothing else.

use std::collections::BTreeMap;

use wire::E_NOT_SENT;

use crate::util::*;

#[test]
fn reprocess_sends_only_failed_e902_rows_below_max_attempts() {
    skip_if_unavailable!();
    let ok1 = msg("G-RP-OK1", 101, "");
    let ok2 = msg("G-RP-OK2", 102, "");
    let never = [
        ("G-RP-UNKNOWN", State::Unknown, Some("E901"), 1),
        ("G-RP-SENT", State::Sent, None, 1),
        ("G-RP-RECEIVED", State::Received, None, 0),
        ("G-RP-DONE", State::Done, Some("0000"), 1),
        ("G-RP-DONE-E902", State::Done, Some("E902"), 1),
        ("G-RP-UNKNOWN-E902", State::Unknown, Some("E902"), 1),
        ("G-RP-F-E901", State::Failed, Some("E901"), 1),
        ("G-RP-F-B001", State::Failed, Some("B001"), 1),
        ("G-RP-F-NULL", State::Failed, None, 1),
        ("G-RP-F-MAX", State::Failed, Some("E902"), 3),
        ("G-RP-F-OVER", State::Failed, Some("E902"), 7),
    ];
    // A real FAILED row: a relay whose core was down.
    let s = Scene::new()
        .core(&[])
        .relay_to(&dead_url(), &[])
        .row(RowSpec::failed(&ok1).age(OLD))
        .row(RowSpec::failed(&ok2).attempts(2).age(5))
        .rows(never.iter().map(|&(g, state, rsp, attempts)| {
            RowSpec::of(&msg(g, 5, ""), state)
                .code(rsp)
                .attempts(attempts)
                .age(OLD)
        }))
        .build();
    let real = msg("G-RP-REAL", 900, "rent");
    assert_eq!(s.call(&real), short(&real, &E_NOT_SENT));
    s.db.age("G-RP-REAL", OLD);
    let never_guids: Vec<&str> = never.iter().map(|(g, ..)| *g).collect();
    let never_before = rows_of(&s.db, &never_guids);

    // G-RP-DONE is the ledger's booking: the core must know it (the canary, §5 v1.2).
    s.core().book(&msg("G-RP-DONE", 5, ""));
    let r = s.reprocess(&["--max-attempts", "3"]);
    r.expect_code(EXIT_SETTLED);
    assert_eq!(
        r.stdout(),
        "reprocess: 3 examined, 3 sent, 3 DONE, 0 FAILED, 0 UNKNOWN, \
         0 not tried (core unreachable), 0 skipped, 0 changed by another writer\n"
    );
    assert_eq!(
        s.core().by_guid(),
        BTreeMap::from([
            ("G-RP-DONE".into(), 1),
            ("G-RP-OK1".into(), 1),
            ("G-RP-OK2".into(), 1),
            ("G-RP-REAL".into(), 1)
        ]),
        "only FAILED/E902 rows below --max-attempts reach the core"
    );
    assert_eq!(rows_of(&s.db, &never_guids), never_before);

    for (m, attempts) in [(&real, 2), (&ok1, 2), (&ok2, 3)] {
        let reply = assert_done_as_booked(&s.db, s.core(), m);
        let guid = guid_of(m);
        assert_eq!(s.db.row(&guid).unwrap().attempts, Some(attempts), "{guid}");
        // Any relay replays it byte for byte, even one whose core is still down.
        assert_eq!(s.call(m), reply, "{guid}");
    }
    assert_eq!(s.core().total_bookings(), 4);

    // Nothing left to do: a second run sends nothing.
    let r = s.reprocess(&["--max-attempts", "3"]);
    r.expect_code(EXIT_SETTLED);
    assert!(
        r.stdout().starts_with("reprocess: 0 examined, 0 sent"),
        "{}",
        r.stdout()
    );
    assert_eq!(s.core().total_bookings(), 4);
}

#[test]
fn reprocess_never_sends_a_failed_row_whose_code_is_not_e902() {
    skip_if_unavailable!();
    let never = [
        ("G-NS-E901", State::Failed, Some("E901")),
        ("G-NS-B001", State::Failed, Some("B001")),
        ("G-NS-NULL", State::Failed, None),
        ("G-NS-SPACE", State::Failed, Some("E902 ")),
        ("G-NS-LOWER", State::Failed, Some("e902")),
        ("G-NS-UNKNOWN", State::Unknown, Some("E902")),
    ];
    let s = Scene::new()
        .core(&[])
        .rows(
            never
                .iter()
                .map(|&(g, state, rsp)| RowSpec::of(&msg(g, 5, ""), state).code(rsp).age(OLD)),
        )
        .row(RowSpec::failed(&msg("G-NS-CONTROL", 6, "")).age(OLD))
        .build();
    let never_guids: Vec<&str> = never.iter().map(|(g, ..)| *g).collect();
    let before = rows_of(&s.db, &never_guids);

    let r = s.reprocess(&["--max-attempts", "5"]);
    r.expect_code(EXIT_SETTLED);
    assert_eq!(
        r.stdout(),
        "reprocess: 1 examined, 1 sent, 1 DONE, 0 FAILED, 0 UNKNOWN, \
         0 not tried (core unreachable), 0 skipped, 0 changed by another writer\n"
    );
    assert_eq!(
        s.core().by_guid(),
        BTreeMap::from([("G-NS-CONTROL".into(), 1)])
    );
    assert_eq!(
        rows_of(&s.db, &never_guids),
        before,
        "byte for byte unchanged"
    );
    let row = s.db.row("G-NS-CONTROL").unwrap();
    assert_eq!(
        (row.state, row.rsp_code.as_deref(), row.attempts),
        (State::Done, Some("0000"), Some(2))
    );
}

#[test]
fn reprocess_limit_sends_the_oldest_first() {
    skip_if_unavailable!();
    let ages = [500, 100, 400, 200, 300];
    let msgs: Vec<Vec<u8>> = (0..5)
        .map(|i| msg(&format!("G-RL-{i}"), 10 + i, ""))
        .collect();
    let s = Scene::new()
        .core(&[])
        .rows(
            msgs.iter()
                .zip(ages)
                .map(|(m, age)| RowSpec::failed(m).age(age)),
        )
        .build();

    let r = s.reprocess(&["--max-attempts", "3", "--limit", "2", "--json"]);
    r.expect_code(EXIT_SETTLED);
    let j = r.json();
    assert_eq!(j["tool"], "reprocess", "{j}");
    assert_counts(
        &j,
        &[
            ("examined", 2),
            ("sent", 2),
            ("done", 2),
            ("exit_code", EXIT_SETTLED.into()),
        ],
    );
    // Oldest: G-RL-0 (500 s) and G-RL-2 (400 s).
    assert_eq!(
        s.core().by_guid(),
        BTreeMap::from([("G-RL-0".into(), 1), ("G-RL-2".into(), 1)])
    );
    for i in [1, 3, 4] {
        let row = s.db.row(&format!("G-RL-{i}")).unwrap();
        assert_eq!((row.state, row.attempts), (State::Failed, Some(1)));
    }

    let r = s.reprocess(&["--max-attempts", "3", "--limit", "2"]);
    r.expect_code(EXIT_SETTLED);
    // Next oldest: G-RL-4 (300 s) and G-RL-3 (200 s).
    assert_eq!(
        s.core().by_guid(),
        BTreeMap::from([
            ("G-RL-0".into(), 1),
            ("G-RL-2".into(), 1),
            ("G-RL-3".into(), 1),
            ("G-RL-4".into(), 1)
        ])
    );
    assert_eq!(s.db.state("G-RL-1"), Some(State::Failed));
    for i in [0, 2, 3, 4] {
        assert_done_as_booked(&s.db, s.core(), &msgs[i]);
    }
}

#[test]
fn reprocess_skips_rows_without_a_usable_request_and_sends_the_rest() {
    skip_if_unavailable!();
    let a = msg("G-RK-A", 10, "");
    let b = msg("G-RK-B", 20, "");
    let bad = ["G-RK-NULL", "G-RK-OTHER", "G-RK-JUNK"];
    let s = Scene::new()
        .core(&[])
        .row(
            RowSpec::new("G-RK-NULL", State::Failed)
                .code("E902")
                .age(OLD + 40),
        )
        .row(
            RowSpec::failed(&msg("G-RK-ELSE", 5, ""))
                .guid("G-RK-OTHER")
                .age(OLD + 30),
        )
        .row(
            RowSpec::new("G-RK-JUNK", State::Failed)
                .code("E902")
                .request(b"junk")
                .age(OLD + 20),
        )
        .row(RowSpec::failed(&a).age(OLD + 10))
        .row(RowSpec::failed(&b).age(OLD))
        .build();
    let before = rows_of(&s.db, &bad);

    let r = s.reprocess(&["--max-attempts", "3", "--json"]);
    r.expect_code(EXIT_LEFT);
    assert_counts(
        &r.json(),
        &[
            ("examined", 5),
            ("sent", 2),
            ("done", 2),
            ("skipped", 3),
            ("exit_code", EXIT_LEFT.into()),
        ],
    );
    for g in bad {
        assert!(r.stderr().contains(g), "{g} reported: {}", r.stderr());
    }
    assert_eq!(
        rows_of(&s.db, &bad),
        before,
        "skipped before any claim: still FAILED, attempts unchanged"
    );
    assert_done_as_booked(&s.db, s.core(), &a);
    assert_done_as_booked(&s.db, s.core(), &b);
    assert_eq!(
        s.core().by_guid(),
        BTreeMap::from([("G-RK-A".into(), 1), ("G-RK-B".into(), 1)]),
        "a stored request for another GUID is never sent"
    );
}

#[test]
fn reprocess_dry_run_lists_and_neither_sends_nor_writes() {
    skip_if_unavailable!();
    let s = Scene::new()
        .core(&[])
        .row(
            RowSpec::failed(&msg("G-RY-OLD", 1, ""))
                .attempts(2)
                .age(OLD + 10),
        )
        .row(RowSpec::failed(&msg("G-RY-NEW", 2, "")).age(OLD))
        .row(
            RowSpec::new("G-RY-NULL", State::Failed)
                .code("E902")
                .attempts(0)
                .age(OLD - 10),
        )
        .row(
            RowSpec::failed(&msg("G-RY-MAX", 3, ""))
                .attempts(3)
                .age(OLD),
        )
        .row(RowSpec::unknown(&msg("G-RY-UNK", 4, "")).age(OLD))
        .build();
    let before = rows_by_guid(&s.db);
    let at = |g: &str| s.db.row(g).unwrap().updated_at;

    let r = s.reprocess(&["--max-attempts", "3", "--dry-run"]);
    r.expect_code(EXIT_SETTLED);
    assert_eq!(
        r.stdout(),
        format!(
            "guid\tstate\trsp_code\tattempts\tupdated_at\n\
             G-RY-OLD\tFAILED\tE902\t2\t{}\n\
             G-RY-NEW\tFAILED\tE902\t1\t{}\n\
             G-RY-NULL\tFAILED\tE902\t0\t{}\n\
             reprocess: dry run, 3 rows selected, nothing sent or written\n",
            at("G-RY-OLD"),
            at("G-RY-NEW"),
            at("G-RY-NULL")
        )
    );
    let r = s.reprocess(&["--max-attempts", "3", "--dry-run", "--limit", "1", "--json"]);
    r.expect_code(EXIT_SETTLED);
    let j = r.json();
    assert_eq!(
        (&j["tool"], &j["dry_run"]),
        (&"reprocess".into(), &true.into())
    );
    assert_counts(&j, &[("count", 1), ("exit_code", EXIT_SETTLED.into())]);
    assert_eq!(j["rows"][0]["guid"], "G-RY-OLD");
    assert_eq!(j["rows"][0]["attempts"], 2);
    assert_eq!(j["rows"][0]["rsp_code"], "E902");
    assert_eq!(j["rows"][0]["state"], "FAILED");

    assert_eq!(rows_by_guid(&s.db), before);
    assert_eq!(s.core().total_bookings(), 0);
}
