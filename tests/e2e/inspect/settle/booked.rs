//! `settle --booked`, then `approve` by another person: DONE/0000 with the reply resolve would
//! have built from the booking (a resend then gets exactly that reply, and resolve leaves the
//! row alone), the history naming both people; the request and the approval in `--json`; a
//! booking the reply cannot carry, or another amount, is refused when asked, with no request
//! made.

use super::*;

#[test]
fn booked_by_an_operator_then_a_resend_gets_that_reply_and_resolve_leaves_it() {
    skip_if_unavailable!();
    let s = Scene::new().core(&[]).relay(&[]).build();
    let p = second_person!(&s.db);
    let first = first_person(&s.db);
    // The core books it, then closes without answering: the relay cannot know.
    let m = msg("G-ST-BOOKED", 25, "DROP");
    assert_code(&s.call(&m), "E901");
    assert_eq!(s.db.state("G-ST-BOOKED"), Some(State::Unknown));
    // The core's operators confirm the booking (here: its own inquiry, out of band).
    let booking = s.core().inquiry("G-ST-BOOKED").expect("booked");

    let flags = booked_flags(&booking);
    let r = settle(
        &s.db,
        &p,
        "G-ST-BOOKED",
        &strs(&flags),
        "core ops ticket 4711",
    );
    r.expect_code(EXIT_SETTLED);
    assert_eq!(r.stderr(), "");
    let out = r.stdout();
    assert!(
        out.starts_with(&format!(
            "approve 1: settle G-ST-BOOKED: UNKNOWN -> DONE/0000 (if state UNKNOWN, attempts \
             1), asked by {first}, approved by {}, reason: core ops ticket 4711\nreply: 0000 \
             core_ref ",
            p.name
        )),
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

    // The history: the claim, the result, the settlement by the second person, whose reason
    // names the request, both people and the maker's reason.
    let h = history(&s.db, "G-ST-BOOKED");
    let seen: Vec<_> = h
        .iter()
        .map(|h| {
            (
                h.from_state.as_deref(),
                h.to_state.as_deref(),
                h.rsp_code.as_deref(),
                h.who.as_str(),
            )
        })
        .collect();
    let checker = format!("operator:{}", p.name);
    assert_eq!(
        seen,
        [
            (None, Some("SENT"), None, "relay"),
            (Some("SENT"), Some("UNKNOWN"), Some("E901"), "relay"),
            (
                Some("UNKNOWN"),
                Some("DONE"),
                Some("0000"),
                checker.as_str()
            ),
        ]
    );
    // The relay's reason for UNKNOWN names the transport error: its kind only.
    let reasons: Vec<_> = h[..2]
        .iter()
        .map(|h| {
            h.reason
                .as_deref()
                .map(|r| r.split(':').next().unwrap_or(r))
        })
        .collect();
    assert_eq!(reasons, [None, Some("outcome unknown")]);
    let why = approved_reason(&s.db, &p, 1, "booked", "core ops ticket 4711", None);
    assert_eq!(h[2].reason.as_deref(), Some(why.as_str()));
    // … as `show` prints it.
    let r = inspect(&s.db, &["show", "G-ST-BOOKED"]);
    r.expect_code(EXIT_SETTLED);
    assert!(
        r.stdout()
            .contains(&format!("\tUNKNOWN\tDONE\t0000\t1\t-\t{checker}\t{why}\n")),
        "{}",
        r.stdout()
    );
    let j = inspect(&s.db, &["show", "G-ST-BOOKED", "--json"]).json();
    assert_eq!(j["history"][2]["who"], checker, "{j}");
    assert_eq!(j["reply"]["core_ref"], booking["core_ref"], "{j}");

    // Settled once: a second request finds a DONE row, and none is made.
    let r = settle(&s.db, &p, "G-ST-BOOKED", &strs(&flags), "again");
    assert_refused(&r, "G-ST-BOOKED", "the row is DONE/0000");
    let j = inspect(&s.db, &["requests", "--all", "--json"]).json();
    assert_eq!(j["requests"].as_array().map(Vec::len), Some(1), "{j}");
}

#[test]
fn booked_with_json_and_a_booking_the_reply_cannot_carry_or_another_amount() {
    skip_if_unavailable!();
    let m = msg("G-ST-JSON", 30, "");
    let s = Scene::new().row(RowSpec::unknown(&m).age(OLD)).build();
    let p = second_person!(&s.db);
    let first = first_person(&s.db);
    let before = rows_by_guid(&s.db);
    let booked = |core_ref: &str, amount: &str, at: &str| {
        request(
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
    let j = r.json();
    assert_eq!(
        j["refused"].as_str().map(|w| w.contains("amount 30")),
        Some(true),
        "{j}"
    );
    assert_eq!(
        (&j["requested"], &j["written"]),
        (&json!(false), &json!(false)),
        "{j}"
    );
    assert_eq!(rows_by_guid(&s.db), before, "nothing changed");

    // A booked_at with an offset is carried in UTC, as resolve carries the core's. The
    // request (the first one made: none of the above made one) changes no row.
    let r = booked("C00000000000000042", "30", "2026-02-01T01:30:00+02:00");
    r.expect_code(EXIT_SETTLED);
    let j = r.json();
    assert_eq!(
        (&j["from"], &j["to"], &j["rsp_code"], &j["attempt"]),
        (&json!("UNKNOWN"), &json!("DONE"), &json!("0000"), &json!(1)),
        "{j}"
    );
    assert_eq!(
        (&j["request"], &j["requested"], &j["dry_run"]),
        (&json!(1), &json!(true), &json!(false)),
        "{j}"
    );
    assert_eq!(
        (&j["maker"], &j["reason"], &j["outcome"]),
        (&json!(first), &json!("ticket 1"), &json!("booked")),
        "{j}"
    );
    let reply = json!({"code": "0000", "core_ref": "C00000000000000042", "amount": 30,
                       "booked_at": "20260131233000"});
    assert_eq!(j["reply"], reply, "{j}");
    assert_eq!(rows_by_guid(&s.db), before, "a request changes no row");

    // The approval, in JSON: the request as stored, decided by the second person, written.
    let r = as_second(&p, &["approve", "1", "--json"]);
    r.expect_code(EXIT_SETTLED);
    let j = r.json();
    assert_eq!(
        (
            &j["seen_state"],
            &j["to_state"],
            &j["rsp_code"],
            &j["seen_attempts"]
        ),
        (&json!("UNKNOWN"), &json!("DONE"), &json!("0000"), &json!(1)),
        "{j}"
    );
    assert_eq!(
        (&j["id"], &j["status"], &j["written"]),
        (&json!(1), &json!("approved"), &json!(true)),
        "{j}"
    );
    assert_eq!(
        (&j["maker"], &j["checker"], &j["reason"]),
        (&json!(first), &json!(p.name), &json!("ticket 1")),
        "{j}"
    );
    assert_eq!(j["reply"], reply, "{j}");
    let booking = json!({"core_ref": "C00000000000000042", "amount": 30,
                         "booked_at": "2026-01-31T23:30:00Z"});
    assert_eq!(
        s.db.row("G-ST-JSON").unwrap().response,
        Some(booked_reply(&m, &booking))
    );
    let last = history(&s.db, "G-ST-JSON").pop().unwrap();
    assert_eq!(last.who, format!("operator:{}", p.name));
    assert_eq!(
        last.reason,
        Some(approved_reason(&s.db, &p, 1, "booked", "ticket 1", None))
    );
}
