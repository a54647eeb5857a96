//! `settle --not-booked`, then `approve` by another person: FAILED/E902 only while the core's
//! inquiry answers 404 and that core knows the ledger's newest booking (the canary), asked
//! when the request is made and again at the approval, then reprocess books it once;
//! otherwise refused when asked (no request made), unless `--force`, which the request's
//! reason and the history say, with what the core said each time.

use super::*;

#[test]
fn not_booked_while_the_core_answers_404_then_reprocess_books_it_once() {
    skip_if_unavailable!();
    let m = msg("G-ST-NOT", 40, "");
    let s = Scene::new()
        .core(&[])
        .relay(&[])
        .row(RowSpec::unknown(&m).age(HOUR))
        .build();
    let p = second_person!(&s.db);
    let first = first_person(&s.db);
    booked_canary(&s, "G-ST-NOT-CANARY");
    assert_eq!(s.core().inquiry("G-ST-NOT"), None, "never booked");
    let core = s.core().url();
    let before = rows_by_guid(&s.db);

    let r = request(
        &s.db,
        "G-ST-NOT",
        &["--not-booked", "--core", &core],
        "core ops: never arrived (ticket 7)",
    );
    r.expect_code(EXIT_SETTLED);
    let out = r.stdout();
    assert!(
        out.starts_with(&format!(
            "settle G-ST-NOT: request 1: UNKNOWN -> FAILED/E902 (if state UNKNOWN, attempts 1, \
             unchanged for 300 s), asked by {first}, reason: core ops: never arrived (ticket \
             7)\n\
             inquiry: 404 (never booked)\n\
             reply: E902 (header only)\n\
             requested: pending until "
        )),
        "{out}"
    );
    assert!(
        out.ends_with("`inspect approve 1` or closes it with `inspect reject 1 --reason TEXT`\n"),
        "{out}"
    );
    assert_eq!(rows_by_guid(&s.db), before, "a request changes no row");

    // The approval asks the core again, and says what it answered.
    let r = as_second(&p, &["approve", "1", "--core", &core]);
    r.expect_code(EXIT_SETTLED);
    assert_eq!(
        r.stdout(),
        format!(
            "approve 1: settle G-ST-NOT: UNKNOWN -> FAILED/E902 (if state UNKNOWN, attempts 1, \
             unchanged for 300 s), asked by {first}, approved by {}, reason: core ops: never \
             arrived (ticket 7)\n\
             approval: inquiry at approval: 404 (never booked)\n\
             reply: E902 (header only)\n\
             written\n",
            p.name
        )
    );
    assert_failed_e902(&s.db, &m, 1);
    let last = history(&s.db, "G-ST-NOT").pop().unwrap();
    assert_eq!(last.who, format!("operator:{}", p.name));
    assert_eq!(
        last.reason,
        Some(approved_reason(
            &s.db,
            &p,
            1,
            "not-booked",
            "core ops: never arrived (ticket 7)",
            Some("inquiry at approval: 404 (never booked)"),
        ))
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
            RowSpec::unknown(&m).age(HOUR),
            RowSpec::unknown(&down).age(HOUR),
        ])
        .build();
    let p = second_person!(&s.db);
    s.core().book(&m);
    booked_canary(&s, "G-ST-YES-CANARY");
    let core = s.core().url();
    let before = rows_by_guid(&s.db);

    // The core booked it: refused, with the booking to settle --booked with.
    let r = settle(
        &s.db,
        &p,
        "G-ST-YES",
        &["--not-booked", "--core", &core],
        "r",
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
        &p,
        "G-ST-DOWN",
        &["--not-booked", "--core", &dead],
        "r",
    );
    assert_refused(
        &r,
        "G-ST-DOWN",
        "canary inquiry about booked GUID G-ST-YES-CANARY failed",
    );
    // A dry run refuses alike.
    let r = settle(
        &s.db,
        &p,
        "G-ST-YES",
        &["--not-booked", "--core", &core, "--dry-run"],
        "r",
    );
    assert_refused(&r, "G-ST-YES", "answers 200");
    assert_eq!(rows_by_guid(&s.db), before, "nothing changed");
    let j = inspect(&s.db, &["requests", "--all", "--json"]).json();
    assert_eq!(j["requests"], json!([]), "no request made: {j}");

    // --force: settled once approved (the approval's inquiry fails alike), and the reason
    // says it was forced and what the core said.
    let r = settle(
        &s.db,
        &p,
        "G-ST-DOWN",
        &["--not-booked", "--core", &dead, "--force", "--json"],
        "core ops say it never arrived; inquiry service down",
    );
    r.expect_code(EXIT_SETTLED);
    let j = r.json();
    assert_eq!(
        (&j["id"], &j["forced"], &j["written"]),
        (&json!(1), &json!(true), &json!(true)),
        "{j}"
    );
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
    assert_eq!(last.who, format!("operator:{}", p.name));
    let why = last.reason.unwrap_or_default();
    let approved = approved_reason(&s.db, &p, 1, "not-booked", reason, None);
    assert!(
        why.starts_with(&format!(
            "{approved}; approval: inquiry at approval: canary inquiry about booked GUID \
             G-ST-YES-CANARY failed ("
        )),
        "{why}"
    );

    // --force is for a core that cannot be asked or believed, never against its own 200:
    // that is a booking (settle --booked), and forcing it would have reprocess book it again.
    let before = rows_by_guid(&s.db);
    let r = settle(
        &s.db,
        &p,
        "G-ST-YES",
        &["--not-booked", "--core", &core, "--force"],
        "the operator knows better",
    );
    assert_refused(
        &r,
        "G-ST-YES",
        "the core's inquiry answers 200: it booked this GUID",
    );
    assert!(
        r.stderr()
            .contains("settle --booked with that booking (--force does not apply to a booking)"),
        "{}",
        r.stderr()
    );
    assert_eq!(rows_by_guid(&s.db), before, "nothing changed");
    let j = inspect(&s.db, &["requests", "--all", "--json"]).json();
    assert_eq!(
        j["requests"].as_array().map(Vec::len),
        Some(1),
        "no request made: {j}"
    );
    assert_eq!(s.core().bookings("G-ST-YES"), 1);
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
            RowSpec::unknown(&lost).age(HOUR),
            RowSpec::unknown(&never).age(HOUR),
        ])
        .build();
    let p = second_person!(&s.db);
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
            &p,
            "G-CN-LOST",
            &[&["--not-booked", "--core", &b.url()][..], extra].concat(),
            "core ops: never arrived",
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

    // At A, which booked the canary: a real 404 settles G-CN-NEVER (request 1, the first
    // made), and G-CN-LOST's 200 is refused with its booking.
    let r = settle(
        &s.db,
        &p,
        "G-CN-NEVER",
        &["--not-booked", "--core", &a],
        "core ops: never arrived",
    );
    r.expect_code(EXIT_SETTLED);
    assert!(
        r.stdout().starts_with("approve 1: settle G-CN-NEVER: ")
            && r.stdout()
                .contains("\napproval: inquiry at approval: 404 (never booked)\n"),
        "{}",
        r.stdout()
    );
    assert_failed_e902(&s.db, &never, 1);
    let r = settle(&s.db, &p, "G-CN-LOST", &["--not-booked", "--core", &a], "r");
    assert_refused(&r, "G-CN-LOST", "the core's inquiry answers 200");
    assert_eq!(s.db.state("G-CN-LOST"), Some(State::Unknown));

    // --force does not skip the canary: it settles on the operator's word, and the reason
    // says what the canary found, when asked and again at the approval.
    let r = settle(
        &s.db,
        &p,
        "G-CN-LOST",
        &["--not-booked", "--core", &b.url(), "--force", "--json"],
        "core ops' letter 12",
    );
    r.expect_code(EXIT_SETTLED);
    let j = r.json();
    assert_eq!((&j["id"], &j["written"]), (&json!(2), &json!(true)), "{j}");
    let reason = j["reason"].as_str().unwrap().to_string();
    assert!(
        reason.starts_with(
            "core ops' letter 12; forced without a 404 (canary inquiry: GUID G-CN-CANARY is \
             booked"
        ),
        "{reason}"
    );
    assert!(
        j["decision_reason"]
            .as_str()
            .is_some_and(|w| w
                .starts_with("inquiry at approval: canary inquiry: GUID G-CN-CANARY is booked")),
        "{j}"
    );
    assert_eq!(s.db.state("G-CN-LOST"), Some(State::Failed));
}

#[test]
fn not_booked_without_a_booking_in_the_ledger_is_refused_unless_forced() {
    skip_if_unavailable!();
    let m = msg("G-NC-A", 95, "");
    let s = Scene::new()
        .core(&[])
        .row(RowSpec::unknown(&m).age(HOUR))
        .build();
    let p = second_person!(&s.db);
    let core = s.core().url();
    let before = rows_by_guid(&s.db);
    for extra in [&["--dry-run"][..], &[]] {
        let r = settle(
            &s.db,
            &p,
            "G-NC-A",
            &[&["--not-booked", "--core", &core][..], extra].concat(),
            "r",
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
        &p,
        "G-NC-A",
        &["--not-booked", "--core", &core, "--force"],
        "core ops' letter 13",
    );
    r.expect_code(EXIT_SETTLED);
    assert_failed_e902(&s.db, &m, 1);
    assert_eq!(s.core().inquiries(), 0, "still nothing to ask about");
    let reason = history(&s.db, "G-NC-A").pop().unwrap().reason.unwrap();
    let approved = approved_reason(
        &s.db,
        &p,
        1,
        "not-booked",
        "core ops' letter 13; forced without a 404 (no canary: ",
        None,
    );
    assert!(reason.starts_with(&approved), "{reason}");
    assert!(
        reason.contains("; approval: inquiry at approval: no canary: "),
        "{reason}"
    );
}
