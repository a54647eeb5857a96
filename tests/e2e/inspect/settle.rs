//! `inspect settle`: an operator settles one GUID in doubt on evidence from outside the
//! relay. `--booked` makes it DONE/0000 with the reply resolve would have built from the
//! booking (a resend then gets exactly that reply, and resolve leaves the row alone);
//! `--not-booked` makes it FAILED/E902 only while the core's inquiry answers 404 (then
//! reprocess books it, once), unless `--force`. Only from UNKNOWN, or SENT unchanged for the
//! stale-sent floor; one guarded statement; `--dry-run` writes nothing; the history names the
//! operator and the reason.

use ledger::state::HistoryRow;
use serde_json::{Value, json};

use super::inspect;
use crate::util::*;

/// `--booked` flags for the core's booking JSON `b`.
fn booked_flags(b: &Value) -> Vec<String> {
    vec![
        "--booked".into(),
        "--core-ref".into(),
        b["core_ref"].as_str().expect("core_ref").into(),
        "--amount".into(),
        b["amount"].as_u64().expect("amount").to_string(),
        "--booked-at".into(),
        b["booked_at"].as_str().expect("booked_at").into(),
    ]
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// `inspect --db DB settle GUID ARGS… --reason R --operator O`
fn settle(db: &TempLedger, guid: &str, args: &[&str], reason: &str, operator: &str) -> Run {
    inspect(
        db,
        &[
            &["settle", guid][..],
            args,
            &["--reason", reason, "--operator", operator],
        ]
        .concat(),
    )
}

/// A transfer the scene's core booked and the ledger holds as DONE/0000, a day old: what
/// the canary of `settle --not-booked` asks about.
fn booked_canary(s: &Scene, guid: &str) {
    let m = msg(guid, 1, "");
    s.core().book(&m);
    s.put(RowSpec::of(&m, State::Done).code("0000").age(DAY));
}

fn history(db: &TempLedger, guid: &str) -> Vec<HistoryRow> {
    db.store().history(guid).expect("read the history")
}

/// A refusal: exit 1, one line on stderr naming the GUID and `why`, nothing on stdout.
#[track_caller]
fn assert_refused(r: &Run, guid: &str, why: &str) {
    r.expect_code(EXIT_FATAL);
    let err = r.stderr();
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(
        err.contains(&format!("settle {guid}: refused: ")) && err.contains(why),
        "{why:?} in: {err}"
    );
    assert!(err.contains("nothing written"), "{err}");
    assert_eq!(r.stdout(), "");
}

#[test]
fn booked_by_an_operator_then_a_resend_gets_that_reply_and_resolve_leaves_it() {
    skip_if_unavailable!();
    let s = Scene::new().core(&[]).relay(&[]).build();
    // The core books it, then closes without answering: the relay cannot know.
    let m = msg("G-ST-BOOKED", 25, "DROP");
    assert_code(&s.call(&m), "E901");
    assert_eq!(s.db.state("G-ST-BOOKED"), Some(State::Unknown));
    // The core's operators confirm the booking (here: its own inquiry, out of band).
    let booking = s.core().inquiry("G-ST-BOOKED").expect("booked");

    let flags = booked_flags(&booking);
    let r = settle(
        &s.db,
        "G-ST-BOOKED",
        &strs(&flags),
        "core ops ticket 4711",
        "alice",
    );
    r.expect_code(EXIT_SETTLED);
    assert_eq!(r.stderr(), "");
    let out = r.stdout();
    assert!(
        out.starts_with(
            "settle G-ST-BOOKED: UNKNOWN -> DONE/0000 (if state UNKNOWN, attempts 1), by \
             operator:alice, reason: core ops ticket 4711\nreply: 0000 core_ref "
        ),
        "{out}"
    );
    assert!(out.ends_with("\nwritten\n"), "{out}");
    // Exactly the reply resolve (or the relay) would have built from the booking.
    let reply = assert_done_as_booked(&s.db, s.core(), &m);
    assert_eq!(s.db.row("G-ST-BOOKED").unwrap().attempts, Some(1));

    // A resend gets it, byte for byte; resolve does not look at a DONE row; one booking.
    assert_eq!(s.call(&m), reply);
    let asked = s.core().inquiries();
    let r = s.resolve(&["--min-age", "0", "--json"]);
    r.expect_code(EXIT_SETTLED);
    assert_counts(&r.json(), &[("examined", 0)]);
    assert_eq!(s.core().inquiries(), asked + 1, "the canary only");
    assert_eq!(
        s.db.row("G-ST-BOOKED").unwrap().response.as_deref(),
        Some(&reply[..])
    );
    assert_eq!(s.core().bookings("G-ST-BOOKED"), 1);

    // The history: the claim, the result, the operator's settlement with its reason.
    let h = history(&s.db, "G-ST-BOOKED");
    let seen: Vec<_> = h
        .iter()
        .map(|h| {
            (
                h.from_state.as_deref(),
                h.to_state.as_deref(),
                h.rsp_code.as_deref(),
                h.who.as_str(),
                h.reason.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            (None, Some("SENT"), None, "relay", None),
            (Some("SENT"), Some("UNKNOWN"), Some("E901"), "relay", None),
            (
                Some("UNKNOWN"),
                Some("DONE"),
                Some("0000"),
                "operator:alice",
                Some("core ops ticket 4711")
            ),
        ]
    );
    // … as `show` prints it.
    let r = inspect(&s.db, &["show", "G-ST-BOOKED"]);
    r.expect_code(EXIT_SETTLED);
    assert!(
        r.stdout()
            .contains("\tUNKNOWN\tDONE\t0000\t1\toperator:alice\tcore ops ticket 4711\n"),
        "{}",
        r.stdout()
    );
    let j = inspect(&s.db, &["show", "G-ST-BOOKED", "--json"]).json();
    assert_eq!(j["history"][2]["who"], "operator:alice", "{j}");
    assert_eq!(j["reply"]["core_ref"], booking["core_ref"], "{j}");

    // Settled once: a second settlement finds a DONE row.
    let r = settle(&s.db, "G-ST-BOOKED", &strs(&flags), "again", "alice");
    assert_refused(&r, "G-ST-BOOKED", "the row is DONE/0000");
}

#[test]
fn booked_with_json_and_a_booking_the_reply_cannot_carry_or_another_amount() {
    skip_if_unavailable!();
    let m = msg("G-ST-JSON", 30, "");
    let s = Scene::new().row(RowSpec::unknown(&m).age(OLD)).build();
    let before = rows_by_guid(&s.db);
    let booked = |core_ref: &str, amount: &str, at: &str| {
        settle(
            &s.db,
            "G-ST-JSON",
            &[
                "--booked",
                "--core-ref",
                core_ref,
                "--amount",
                amount,
                "--booked-at",
                at,
                "--json",
            ],
            "ticket 1",
            "bob",
        )
    };
    // What booking_body refuses is a usage error naming the flag.
    for (args, flag) in [
        (("", "30", "2026-01-31T23:59:59Z"), "--core-ref"),
        (("C-1 2", "30", "2026-01-31T23:59:59Z"), "--core-ref"),
        (
            ("C1234567890123456789", "30", "2026-01-31T23:59:59Z"),
            "--core-ref",
        ),
        (("C1", "10000000000000", "2026-01-31T23:59:59Z"), "--amount"),
        (("C1", "30", "2026-01-31 23:59:59"), "--booked-at"),
        (("C1", "30", "yesterday"), "--booked-at"),
        (("C1", "thirty", "2026-01-31T23:59:59Z"), "--amount"),
    ] {
        let r = booked(args.0, args.1, args.2);
        r.expect_code(EXIT_USAGE);
        assert!(r.stderr().contains(flag), "{args:?}: {}", r.stderr());
    }
    // Another amount than the request's is refused (a typo, or not this transfer).
    let r = booked("C1", "31", "2026-01-31T23:59:59Z");
    r.expect_code(EXIT_FATAL);
    assert_eq!(
        r.json()["refused"]
            .as_str()
            .map(|w| w.contains("amount 30")),
        Some(true)
    );
    assert_eq!(rows_by_guid(&s.db), before, "nothing changed");

    // A booked_at with an offset is carried in UTC, as resolve carries the core's.
    let r = booked("C00000000000000042", "30", "2026-02-01T01:30:00+02:00");
    r.expect_code(EXIT_SETTLED);
    let j = r.json();
    assert_eq!(
        (&j["from"], &j["to"], &j["rsp_code"], &j["attempt"]),
        (&json!("UNKNOWN"), &json!("DONE"), &json!("0000"), &json!(1)),
        "{j}"
    );
    assert_eq!(
        (&j["written"], &j["dry_run"]),
        (&json!(true), &json!(false))
    );
    assert_eq!(
        (&j["who"], &j["reason"]),
        (&json!("operator:bob"), &json!("ticket 1"))
    );
    assert_eq!(
        j["reply"],
        json!({"code": "0000", "core_ref": "C00000000000000042", "amount": 30,
               "booked_at": "20260131233000"})
    );
    let booking = json!({"core_ref": "C00000000000000042", "amount": 30,
                         "booked_at": "2026-01-31T23:30:00Z"});
    assert_eq!(
        s.db.row("G-ST-JSON").unwrap().response,
        Some(booked_reply(&m, &booking))
    );
}

#[test]
fn not_booked_while_the_core_answers_404_then_reprocess_books_it_once() {
    skip_if_unavailable!();
    let m = msg("G-ST-NOT", 40, "");
    let s = Scene::new()
        .core(&[])
        .relay(&[])
        .row(RowSpec::unknown(&m).age(OLD))
        .build();
    booked_canary(&s, "G-ST-NOT-CANARY");
    assert_eq!(s.core().inquiry("G-ST-NOT"), None, "never booked");
    let core = s.core().url();

    let r = settle(
        &s.db,
        "G-ST-NOT",
        &["--not-booked", "--core", &core],
        "core ops: never arrived (ticket 7)",
        "carol",
    );
    r.expect_code(EXIT_SETTLED);
    assert_eq!(
        r.stdout(),
        "settle G-ST-NOT: UNKNOWN -> FAILED/E902 (if state UNKNOWN, attempts 1, unchanged for \
         60 s), by operator:carol, reason: core ops: never arrived (ticket 7)\n\
         inquiry: 404 (never booked)\n\
         reply: E902 (header only)\n\
         written\n"
    );
    assert_failed_e902(&s.db, &m, 1);
    let last = history(&s.db, "G-ST-NOT").pop().unwrap();
    assert_eq!(
        (last.who.as_str(), last.reason.as_deref()),
        ("operator:carol", Some("core ops: never arrived (ticket 7)"))
    );

    // Now reprocess may resend it: booked once, and a resend gets the booking.
    let r = s.reprocess(&["--max-attempts", "3", "--json"]);
    r.expect_code(EXIT_SETTLED);
    assert_counts(&r.json(), &[("sent", 1), ("done", 1)]);
    let reply = assert_done_as_booked(&s.db, s.core(), &m);
    assert_eq!(s.db.row("G-ST-NOT").unwrap().attempts, Some(2));
    assert_eq!(s.call(&m), reply);
    s.reprocess(&["--max-attempts", "3"])
        .expect_code(EXIT_SETTLED);
    assert_eq!(s.core().bookings("G-ST-NOT"), 1);
}

#[test]
fn not_booked_is_refused_unless_the_core_answers_404_or_it_is_forced() {
    skip_if_unavailable!();
    let m = msg("G-ST-YES", 50, "");
    let down = msg("G-ST-DOWN", 51, "");
    let s = Scene::new()
        .core(&[])
        .rows([
            RowSpec::unknown(&m).age(OLD),
            RowSpec::unknown(&down).age(OLD),
        ])
        .build();
    s.core().book(&m);
    booked_canary(&s, "G-ST-YES-CANARY");
    let core = s.core().url();
    let before = rows_by_guid(&s.db);

    // The core booked it: refused, with the booking to settle --booked with.
    let r = settle(
        &s.db,
        "G-ST-YES",
        &["--not-booked", "--core", &core],
        "r",
        "dave",
    );
    assert_refused(
        &r,
        "G-ST-YES",
        "the core's inquiry answers 200: it booked this GUID",
    );
    let booking = s.core().inquiry("G-ST-YES").unwrap();
    assert!(
        r.stderr().contains(booking["core_ref"].as_str().unwrap()),
        "{}",
        r.stderr()
    );
    // The core cannot be asked: refused too (nothing proves "never booked").
    let dead = dead_url();
    let r = settle(
        &s.db,
        "G-ST-DOWN",
        &["--not-booked", "--core", &dead],
        "r",
        "dave",
    );
    assert_refused(
        &r,
        "G-ST-DOWN",
        "canary inquiry about booked GUID G-ST-YES-CANARY failed",
    );
    // A dry run refuses alike.
    let r = settle(
        &s.db,
        "G-ST-YES",
        &["--not-booked", "--core", &core, "--dry-run"],
        "r",
        "dave",
    );
    assert_refused(&r, "G-ST-YES", "answers 200");
    assert_eq!(rows_by_guid(&s.db), before, "nothing changed");

    // --force: settled, and the reason says it was forced and what the core said.
    let r = settle(
        &s.db,
        "G-ST-DOWN",
        &["--not-booked", "--core", &dead, "--force", "--json"],
        "core ops say it never arrived; inquiry service down",
        "dave",
    );
    r.expect_code(EXIT_SETTLED);
    let j = r.json();
    let reason = j["reason"].as_str().unwrap();
    assert!(
        reason.starts_with(
            "core ops say it never arrived; inquiry service down; forced without a 404 \
             (canary inquiry about booked GUID G-ST-YES-CANARY failed ("
        ),
        "{reason}"
    );
    assert_failed_e902(&s.db, &down, 1);
    let last = history(&s.db, "G-ST-DOWN").pop().unwrap();
    assert_eq!(last.who, "operator:dave");
    assert_eq!(last.reason.as_deref(), Some(reason));

    let r = settle(
        &s.db,
        "G-ST-YES",
        &["--not-booked", "--core", &core, "--force"],
        "the operator knows better",
        "dave",
    );
    r.expect_code(EXIT_SETTLED);
    assert_failed_e902(&s.db, &m, 1);
    let reason = history(&s.db, "G-ST-YES").pop().unwrap().reason.unwrap();
    assert!(
        reason.starts_with(
            "the operator knows better; forced without a 404 (the core's inquiry answers 200"
        ),
        "{reason}"
    );
}

#[test]
fn not_booked_believes_a_404_only_from_the_core_that_knows_our_bookings() {
    skip_if_unavailable!();
    // G-CN-LOST: booked at core A, its reply lost (UNKNOWN); G-CN-NEVER: never booked.
    let lost = msg("G-CN-LOST", 90, "");
    let never = msg("G-CN-NEVER", 91, "");
    let s = Scene::new()
        .core(&[])
        .rows([
            RowSpec::unknown(&lost).age(OLD),
            RowSpec::unknown(&never).age(OLD),
        ])
        .build();
    booked_canary(&s, "G-CN-CANARY");
    s.core().book(&lost);
    let a = s.core().url();
    // Core B: another environment's, which knows none of our bookings.
    let b = Core::start(&[]);
    let before = rows_by_guid(&s.db);
    let history_before = history(&s.db, "G-CN-LOST");

    // At B, G-CN-LOST's inquiry would answer 404: refused, by dry run and for real.
    for extra in [&["--dry-run"][..], &[]] {
        let r = settle(
            &s.db,
            "G-CN-LOST",
            &[&["--not-booked", "--core", &b.url()][..], extra].concat(),
            "core ops: never arrived",
            "hana",
        );
        assert_refused(
            &r,
            "G-CN-LOST",
            "canary inquiry: GUID G-CN-CANARY is booked (DONE/0000 in the ledger) but the \
             inquiry answered 404 (never booked); --core does not look like the core that \
             booked it (path, environment?): its inquiry's 404 proves nothing; --force",
        );
    }
    assert_eq!(b.inquiries(), 2, "only the canary was asked, once per run");
    assert_eq!(rows_by_guid(&s.db), before, "nothing written");
    assert_eq!(s.db.state("G-CN-LOST"), Some(State::Unknown));
    assert_eq!(history(&s.db, "G-CN-LOST"), history_before);
    // So reprocess has nothing to book a second time.
    s.reprocess(&["--max-attempts", "3"])
        .expect_code(EXIT_SETTLED);
    assert_eq!(s.core().bookings("G-CN-LOST"), 1);

    // At A, which booked the canary: a real 404 settles G-CN-NEVER, and G-CN-LOST's 200
    // is refused with its booking.
    let r = settle(
        &s.db,
        "G-CN-NEVER",
        &["--not-booked", "--core", &a],
        "core ops: never arrived",
        "hana",
    );
    r.expect_code(EXIT_SETTLED);
    assert!(
        r.stdout().contains("\ninquiry: 404 (never booked)\n"),
        "{}",
        r.stdout()
    );
    assert_failed_e902(&s.db, &never, 1);
    let r = settle(
        &s.db,
        "G-CN-LOST",
        &["--not-booked", "--core", &a],
        "r",
        "hana",
    );
    assert_refused(&r, "G-CN-LOST", "the core's inquiry answers 200");
    assert_eq!(s.db.state("G-CN-LOST"), Some(State::Unknown));

    // --force does not skip the canary: it settles on the operator's word, and the reason
    // says what the canary found.
    let r = settle(
        &s.db,
        "G-CN-LOST",
        &["--not-booked", "--core", &b.url(), "--force", "--json"],
        "core ops' letter 12",
        "hana",
    );
    r.expect_code(EXIT_SETTLED);
    let reason = r.json()["reason"].as_str().unwrap().to_string();
    assert!(
        reason.starts_with(
            "core ops' letter 12; forced without a 404 (canary inquiry: GUID G-CN-CANARY is \
             booked"
        ),
        "{reason}"
    );
    assert_eq!(s.db.state("G-CN-LOST"), Some(State::Failed));
}

#[test]
fn not_booked_without_a_booking_in_the_ledger_is_refused_unless_forced() {
    skip_if_unavailable!();
    let m = msg("G-NC-A", 95, "");
    let s = Scene::new()
        .core(&[])
        .row(RowSpec::unknown(&m).age(OLD))
        .build();
    let core = s.core().url();
    let before = rows_by_guid(&s.db);
    for extra in [&["--dry-run"][..], &[]] {
        let r = settle(
            &s.db,
            "G-NC-A",
            &[&["--not-booked", "--core", &core][..], extra].concat(),
            "r",
            "ivan",
        );
        assert_refused(
            &r,
            "G-NC-A",
            "no canary: the ledger holds no booked transfer (DONE/0000) to check --core with",
        );
    }
    assert_eq!(s.core().inquiries(), 0, "nothing to ask about");
    assert_eq!(rows_by_guid(&s.db), before, "nothing written");

    let r = settle(
        &s.db,
        "G-NC-A",
        &["--not-booked", "--core", &core, "--force"],
        "core ops' letter 13",
        "ivan",
    );
    r.expect_code(EXIT_SETTLED);
    assert_failed_e902(&s.db, &m, 1);
    let reason = history(&s.db, "G-NC-A").pop().unwrap().reason.unwrap();
    assert!(
        reason.starts_with("core ops' letter 13; forced without a 404 (no canary: "),
        "{reason}"
    );
}

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
            RowSpec::sent(&stale_404).age(OLD),
            RowSpec::new("G-SO-NOREQ", State::Unknown)
                .code("E901")
                .age(DAY),
            RowSpec::unknown(&other).guid("G-SO-WRONG").age(DAY),
            RowSpec::unknown(&fresh),
        ])
        .build();
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
        (
            "G-SO-YOUNG",
            "the row is SENT and changed less than 60 s ago",
        ),
        ("G-SO-NOREQ", "no stored request"),
        ("G-SO-WRONG", "stored request is for guid \"G-SO-OTHER\""),
        ("G-SO-NONE", "no row for this GUID"),
    ] {
        for args in [&booked[..], &not_booked[..]] {
            let r = settle(&s.db, guid, args, "r", "erin");
            assert_refused(&r, guid, why);
        }
    }
    assert_eq!(rows_by_guid(&s.db), before, "nothing changed");

    // A SENT row unchanged past the floor: guarded by state, attempt and age.
    let r = settle(
        &s.db,
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
        "erin",
    );
    r.expect_code(EXIT_SETTLED);
    assert!(
        r.stdout().starts_with(
            "settle G-SO-STALE: SENT -> DONE/0000 (if state SENT, attempts 2, unchanged for 60 \
             s), by operator:erin"
        ),
        "{}",
        r.stdout()
    );
    let row = s.db.row("G-SO-STALE").unwrap();
    assert_eq!((row.state, row.attempts), (State::Done, Some(2)));
    let r = settle(
        &s.db,
        "G-SO-STALE404",
        &not_booked,
        "relay host died",
        "erin",
    );
    r.expect_code(EXIT_SETTLED);
    assert_failed_e902(&s.db, &stale_404, 1);

    // An UNKNOWN row is settled --not-booked only once the core cannot still be working on
    // it (the same floor); --booked at once.
    let r = settle(&s.db, "G-SO-FRESH", &not_booked, "r", "erin");
    assert_refused(
        &r,
        "G-SO-FRESH",
        "the row is UNKNOWN and changed less than 60 s ago: the core may still be working on it",
    );
    s.db.age("G-SO-FRESH", OLD);
    let r = settle(
        &s.db,
        "G-SO-FRESH",
        &[&not_booked[..], &["--dry-run"]].concat(),
        "r",
        "erin",
    );
    r.expect_code(EXIT_SETTLED);
    s.db.age("G-SO-FRESH", 0);
    let r = settle(
        &s.db,
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
        "erin",
    );
    r.expect_code(EXIT_SETTLED);
    assert!(
        r.stdout().starts_with(
            "settle G-SO-FRESH: UNKNOWN -> DONE/0000 (if state UNKNOWN, attempts 1), by"
        ),
        "{}",
        r.stdout()
    );
}

#[test]
fn dry_run_shows_the_change_and_writes_nothing() {
    skip_if_unavailable!();
    let a = msg("G-DR-A", 70, "");
    let b = msg("G-DR-B", 71, "");
    let s = Scene::new()
        .core(&[])
        .rows([RowSpec::unknown(&a).age(OLD), RowSpec::sent(&b).age(OLD)])
        .build();
    booked_canary(&s, "G-DR-CANARY");
    let core = s.core().url();
    let before = rows_by_guid(&s.db);
    let history_before = (history(&s.db, "G-DR-A"), history(&s.db, "G-DR-B"));

    let r = settle(
        &s.db,
        "G-DR-A",
        &[
            "--booked",
            "--core-ref",
            "C7",
            "--amount",
            "70",
            "--booked-at",
            "2026-01-31T23:59:59Z",
            "--dry-run",
        ],
        "ticket 9",
        "frank",
    );
    r.expect_code(EXIT_SETTLED);
    assert_eq!(
        r.stdout(),
        "settle G-DR-A: UNKNOWN -> DONE/0000 (if state UNKNOWN, attempts 1), by \
         operator:frank, reason: ticket 9\n\
         reply: 0000 core_ref C7 amount 70 booked_at 20260131235959 (2026-01-31T23:59:59Z)\n\
         dry run: nothing written\n"
    );
    let r = settle(
        &s.db,
        "G-DR-B",
        &["--not-booked", "--core", &core, "--dry-run", "--json"],
        "ticket 10",
        "frank",
    );
    r.expect_code(EXIT_SETTLED);
    let j = r.json();
    assert_eq!(
        (
            &j["from"],
            &j["to"],
            &j["rsp_code"],
            &j["unchanged_for_secs"]
        ),
        (&json!("SENT"), &json!("FAILED"), &json!("E902"), &json!(60)),
        "{j}"
    );
    assert_eq!(
        (&j["dry_run"], &j["written"]),
        (&json!(true), &json!(false))
    );
    assert_eq!(j["inquiry"], "404 (never booked)");

    assert_eq!(rows_by_guid(&s.db), before, "nothing changed");
    assert_eq!(
        (history(&s.db, "G-DR-A"), history(&s.db, "G-DR-B")),
        history_before,
        "no history written"
    );
    assert_eq!(
        s.db.row("G-DR-A").unwrap().rsp_code.as_deref(),
        Some("E901")
    );
}

#[test]
fn reason_and_operator_are_mandatory_and_flags_go_together() {
    skip_if_unavailable!();
    let m = msg("G-RO-A", 80, "");
    let s = Scene::new().row(RowSpec::unknown(&m).age(OLD)).build();
    let before = rows_by_guid(&s.db);
    let booked = [
        "--booked",
        "--core-ref",
        "C1",
        "--amount",
        "80",
        "--booked-at",
        "2026-01-31T23:59:59Z",
    ];
    let who = ["--reason", "ticket", "--operator", "gina"];
    let cases: Vec<(Vec<&str>, &str)> = vec![
        ([&booked[..], &["--operator", "gina"]].concat(), "--reason"),
        (
            [&booked[..], &["--reason", "ticket"]].concat(),
            "--operator",
        ),
        (
            [&booked[..], &["--reason", "  ", "--operator", "gina"]].concat(),
            "--reason",
        ),
        (
            [&booked[..], &["--reason", "ticket", "--operator", ""]].concat(),
            "--operator",
        ),
        (
            [&booked[..], &["--reason", "ticket", "--operator", "gina g"]].concat(),
            "--operator",
        ),
        (
            [&booked[..], &["--reason", "a\nb", "--operator", "gina"]].concat(),
            "--reason",
        ),
        (who.to_vec(), "--booked"),
        (
            [&["--booked", "--core-ref", "C1"][..], &who].concat(),
            "--amount",
        ),
        (
            [&["--not-booked", "--core-ref", "C1"][..], &who].concat(),
            "--core-ref",
        ),
        (
            [&booked[..], &["--not-booked"], &who].concat(),
            "--not-booked",
        ),
        ([&booked[..], &["--force"], &who].concat(), "--force"),
        (
            [&["--not-booked", "--core-cert", "/x.pem"][..], &who].concat(),
            "--core-key",
        ),
    ];
    for (args, flag) in cases {
        let r = inspect(&s.db, &[&["settle", "G-RO-A"][..], &args].concat());
        r.expect_code(EXIT_USAGE);
        assert!(r.stderr().contains(flag), "{args:?}: {}", r.stderr());
    }
    // The reason and the operator are not taken from the environment.
    let r = Run::with_env(
        "inspect",
        &[&["--db", s.db.arg(), "settle", "G-RO-A"][..], &booked].concat(),
        &[("INSPECT_REASON", "x"), ("INSPECT_OPERATOR", "y")],
    );
    r.expect_code(EXIT_USAGE);
    assert_eq!(rows_by_guid(&s.db), before, "nothing changed");

    // --db after the command, and from the environment, for settle too.
    let r = tool(
        "inspect",
        &[
            &["settle", "G-RO-A"][..],
            &booked,
            &who,
            &["--dry-run", "--db", s.db.arg()],
        ]
        .concat(),
    );
    r.expect_code(EXIT_SETTLED);
    assert!(
        r.stdout().ends_with("dry run: nothing written\n"),
        "{}",
        r.stdout()
    );
    let r = Run::with_env(
        "inspect",
        &[&["settle", "G-RO-A"][..], &booked, &who].concat(),
        &[("INSPECT_DB", s.db.arg())],
    );
    r.expect_code(EXIT_SETTLED);
    assert_eq!(s.db.state("G-RO-A"), Some(State::Done));
}
