//! Two people for one settlement (contract §12), with two real identities: on SQLite two Unix
//! users (the tests' own and `nobody`, the ledger's folder shared), on PostgreSQL two roles.
//! `settle` changes no row, it records a request; its maker cannot approve or reject it (the
//! tool says so, and a statement written by hand is refused by the ledger itself); another
//! person approves it, and the history names both; a row that changed in between is left
//! alone; an expired or rejected request is not approved; no flag or environment variable
//! changes who acts.

use ledger::settle_request::NewRequest;

use super::*;

/// `--booked` flags matching `msg(_, amount, _)`.
fn booking(amount: u64) -> Vec<String> {
    booked_flags(&json!({"core_ref": "C-TWO-1", "amount": amount,
                         "booked_at": "2026-01-31T23:59:59Z"}))
}

#[test]
fn a_request_changes_nothing_its_maker_cannot_approve_it_and_another_person_does() {
    skip_if_unavailable!();
    let m = msg("G-TWO-A", 61, "");
    let s = Scene::new().row(RowSpec::unknown(&m).age(OLD)).build();
    let second = second_person!(&s.db);
    let first = first_person(&s.db);
    assert_ne!(first, second.name);
    let before = rows_by_guid(&s.db);

    let flags = booking(61);
    let r = request(&s.db, "G-TWO-A", &strs(&flags), "core ops ticket 88");
    r.expect_code(EXIT_SETTLED);
    let out = r.stdout();
    assert!(
        out.starts_with(&format!(
            "settle G-TWO-A: request 1: UNKNOWN -> DONE/0000 (if state UNKNOWN, attempts 1), \
             asked by {first}, reason: core ops ticket 88\n\
             reply: 0000 core_ref C-TWO-1 amount 61 booked_at 20260131235959 \
             (2026-01-31T23:59:59Z)\n\
             requested: pending until "
        )),
        "{out}"
    );
    assert!(
        out.ends_with("`inspect approve 1` or closes it with `inspect reject 1 --reason TEXT`\n")
    );
    assert_eq!(rows_by_guid(&s.db), before, "a request changes no row");

    // Listed, and counted in the summary, until decided.
    let r = inspect(&s.db, &["requests", "--json"]);
    r.expect_code(EXIT_SETTLED);
    let j = r.json();
    let listed = &j["requests"][0];
    assert_eq!(
        (
            &listed["id"],
            &listed["guid"],
            &listed["status"],
            &listed["maker"]
        ),
        (
            &json!(1),
            &json!("G-TWO-A"),
            &json!("pending"),
            &json!(first)
        ),
        "{j}"
    );
    let r = inspect(&s.db, &["requests"]);
    assert!(r.stdout().contains(&format!(
        "\n1\tG-TWO-A\tbooked UNKNOWN -> DONE/0000 (if state UNKNOWN, attempts 1)\t{first}\t"
    )));
    let summary = inspect(&s.db, &["summary", "--json"]).json();
    assert_eq!(summary["settle_requests"]["pending"], 1, "{summary}");
    assert_eq!(summary["settle_requests"]["expired"], 0, "{summary}");

    // Its maker cannot approve it, nor reject it: the tool says why, before the ledger would.
    for verb in [&["approve", "1"][..], &["reject", "1", "--reason", "mine"]] {
        let r = inspect(&s.db, verb);
        r.expect_code(EXIT_FATAL);
        assert_eq!(
            r.stderr(),
            format!(
                "inspect: {} 1: refused: {first} made this request: another person must \
                 {} it (the ledger refuses its maker); nothing written\n",
                verb[0], verb[0]
            )
        );
    }
    // … nor can a statement written by hand as the maker: the ledger refuses it.
    let e = approve_by_hand_as_maker(&s.db, &first, 1);
    assert!(
        e.contains("the maker of a settlement request cannot approve or reject it"),
        "{e}"
    );
    assert_eq!(rows_by_guid(&s.db), before, "nothing changed");

    // Another person approves it: the row changes, and the history names both.
    let r = as_second(&second, &["approve", "1"]);
    r.expect_code(EXIT_SETTLED);
    assert_eq!(
        r.stdout(),
        format!(
            "approve 1: settle G-TWO-A: UNKNOWN -> DONE/0000 (if state UNKNOWN, attempts 1), \
             asked by {first}, approved by {}, reason: core ops ticket 88\n\
             reply: 0000 core_ref C-TWO-1 amount 61 booked_at 20260131235959 \
             (2026-01-31T23:59:59Z)\n\
             written\n",
            second.name
        )
    );
    let row = s.db.row("G-TWO-A").unwrap();
    assert_eq!(
        (row.state, row.rsp_code.as_deref()),
        (State::Done, Some("0000"))
    );
    let booking = json!({"core_ref": "C-TWO-1", "amount": 61,
                         "booked_at": "2026-01-31T23:59:59Z"});
    assert_eq!(row.response, Some(booked_reply(&m, &booking)));
    let last = history(&s.db, "G-TWO-A").pop().unwrap();
    assert_eq!(last.who, format!("operator:{}", second.name));
    let why = last.reason.unwrap_or_default();
    assert!(
        why.starts_with(&format!(
            "settlement request 1 (booked) made by {first} at "
        )) && why.ends_with(&format!(
            ", approved by {}: core ops ticket 88",
            second.name
        )),
        "{why}"
    );
    // `show` has the request and its decision beside the history.
    let j = inspect(&s.db, &["show", "G-TWO-A", "--json"]).json();
    let shown = &j["settle_requests"][0];
    assert_eq!(
        (&shown["status"], &shown["maker"], &shown["checker"]),
        (&json!("approved"), &json!(first), &json!(second.name)),
        "{j}"
    );
    // Decided once.
    let r = as_second(&second, &["approve", "1"]);
    r.expect_code(EXIT_FATAL);
    assert!(
        r.stderr()
            .contains("approve 1: refused: the request is approved"),
        "{}",
        r.stderr()
    );
    let summary = inspect(&s.db, &["summary", "--json"]).json();
    assert_eq!(summary["settle_requests"]["pending"], 0, "{summary}");
}

/// Approves request `id` by an UPDATE written by hand, in a session that is the maker's
/// (SQLite: the identity function a tool would give, naming the maker; PostgreSQL: the
/// maker's role); the ledger's error.
fn approve_by_hand_as_maker(db: &TempLedger, maker: &str, id: i64) -> String {
    let sql = format!("UPDATE settle_request SET status = 'approved' WHERE id = {id}");
    match db.backend() {
        Backend::Sqlite => {
            let c = rusqlite::Connection::open(db.path()).unwrap();
            let me = maker.to_string();
            c.create_scalar_function(
                ledger::settle_request::SQLITE_IDENTITY_FUNCTION,
                0,
                rusqlite::functions::FunctionFlags::SQLITE_UTF8,
                move |_| Ok(me.clone()),
            )
            .unwrap();
            let sql = format!(
                "UPDATE settle_request SET status = 'approved', checker = '{maker}' WHERE id = {id}"
            );
            c.execute(&sql, []).unwrap_err().to_string()
        }
        Backend::Postgres => {
            let e = db.pg_client().execute(&sql, &[]).unwrap_err();
            e.as_db_error()
                .map_or(e.to_string(), |d| d.message().to_string())
        }
    }
}

#[test]
fn a_row_changed_between_request_and_approval_is_left_alone_and_the_request_rejected() {
    skip_if_unavailable!();
    let m = msg("G-TWO-C", 62, "");
    let s = Scene::new()
        .core(&[])
        .row(RowSpec::unknown(&m).age(OLD))
        .build();
    let second = second_person!(&s.db);
    let flags = booking(62);
    request(&s.db, "G-TWO-C", &strs(&flags), "ticket 1").expect_code(EXIT_SETTLED);
    // Meanwhile resolve learns the core's own booking, with another reference.
    s.core().book(&m);
    s.resolve(&["--min-age", "0"]).expect_code(EXIT_SETTLED);
    let resolved = s.db.row("G-TWO-C").unwrap();
    assert_eq!(resolved.state, State::Done);

    let r = as_second(&second, &["approve", "1", "--json"]);
    r.expect_code(EXIT_FATAL);
    let j = r.json();
    assert_eq!(
        (&j["request"], &j["written"]),
        (&json!(1), &json!(false)),
        "{j}"
    );
    let why = j["refused"].as_str().unwrap();
    assert!(
        why.starts_with(
            "the row of G-TWO-C changed since the request (now DONE/0000, attempts 1; the \
             request saw UNKNOWN, attempts 1): the request stays pending"
        ),
        "{why}"
    );
    assert_eq!(s.db.row("G-TWO-C").unwrap(), resolved, "left alone");

    // The second person closes it; it can no longer be approved; the row is the core's.
    let r = as_second(&second, &["reject", "1", "--reason", "resolve settled it"]);
    r.expect_code(EXIT_SETTLED);
    assert!(
        r.stdout().starts_with(&format!(
            "reject 1: settle G-TWO-C: UNKNOWN -> DONE/0000 (if state UNKNOWN, attempts 1), \
             asked by {}, rejected by {}, reason: ticket 1\nrejection: resolve settled it\n",
            first_person(&s.db),
            second.name
        )),
        "{}",
        r.stdout()
    );
    assert!(r.stdout().ends_with("closed: the row is unchanged\n"));
    let r = as_second(&second, &["approve", "1"]);
    r.expect_code(EXIT_FATAL);
    assert!(
        r.stderr().contains("the request is rejected"),
        "{}",
        r.stderr()
    );
    assert_eq!(s.db.row("G-TWO-C").unwrap(), resolved);
    assert_eq!(s.core().bookings("G-TWO-C"), 1);
}

#[test]
fn an_expired_request_is_not_approved_but_can_be_closed() {
    skip_if_unavailable!();
    let m = msg("G-TWO-E", 63, "");
    let s = Scene::new().row(RowSpec::unknown(&m).age(OLD)).build();
    let second = second_person!(&s.db);
    // `--expires` takes a minute at least; a request past its expiry is made as the tool
    // would make it, with no time left.
    let reply = booked_reply(
        &m,
        &json!({"core_ref": "C-E", "amount": 63, "booked_at": "2026-01-31T23:59:59Z"}),
    );
    let id =
        s.db.store()
            .make_settle_request(&NewRequest {
                guid: "G-TWO-E".into(),
                seen_state: State::Unknown,
                seen_attempts: 1,
                outcome: "booked",
                to: State::Done,
                rsp_code: "0000".into(),
                response: reply,
                evidence: "the core's booking".into(),
                forced: false,
                min_age_secs: None,
                reason: "ticket 2".into(),
                expires_in_secs: 0,
            })
            .unwrap();
    let before = rows_by_guid(&s.db);
    let r = inspect(&s.db, &["requests"]);
    assert_eq!(r.stdout(), "no pending settlement requests\n");
    let j = inspect(&s.db, &["requests", "--all", "--json"]).json();
    assert_eq!(j["requests"][0]["status"], "expired", "{j}");
    let summary = inspect(&s.db, &["summary"]);
    assert!(
        summary.stdout().contains(
            "settlement requests pending a second person: 0; 1 expired undecided (the GUID \
             is still in doubt: close with `inspect reject`, and ask again)\n"
        ),
        "{}",
        summary.stdout()
    );

    let id = id.to_string();
    let r = as_second(&second, &["approve", &id]);
    r.expect_code(EXIT_FATAL);
    assert!(
        r.stderr().contains(
            "refused: the request is expired: only a pending request is approved; close it \
             with `inspect reject` and make a new one; nothing written"
        ),
        "{}",
        r.stderr()
    );
    assert_eq!(rows_by_guid(&s.db), before);
    as_second(&second, &["reject", &id, "--reason", "too late"]).expect_code(EXIT_SETTLED);
    let summary = inspect(&s.db, &["summary", "--json"]).json();
    assert_eq!(summary["settle_requests"]["expired"], 0, "{summary}");
    assert_eq!(rows_by_guid(&s.db), before);

    // `--expires` outside a minute to 7 days is a usage error naming it.
    for bad in ["30s", "8d", "soon"] {
        let r = request(&s.db, "G-TWO-E", &["--not-booked", "--expires", bad], "r");
        r.expect_code(EXIT_USAGE);
        assert!(r.stderr().contains("--expires"), "{bad}: {}", r.stderr());
    }
}

#[test]
fn no_flag_or_environment_variable_changes_who_acts() {
    skip_if_unavailable!();
    let m = msg("G-TWO-I", 64, "");
    let s = Scene::new().row(RowSpec::unknown(&m).age(OLD)).build();
    let first = first_person(&s.db);
    let flags = booking(64);
    // The flag that did is gone, with a pointer to the new way.
    let r = inspect(
        &s.db,
        &[
            &["settle", "G-TWO-I"][..],
            &strs(&flags),
            &["--reason", "r", "--operator", "alice"],
        ]
        .concat(),
    );
    r.expect_code(EXIT_USAGE);
    assert!(
        r.stderr()
            .contains("--operator is gone: who asks is taken from the system"),
        "{}",
        r.stderr()
    );
    // Variables a login or sudo sets, and any name a wrapper might invent, change nothing.
    let pretend = [
        ("USER", "mallory"),
        ("LOGNAME", "mallory"),
        ("SUDO_USER", "mallory"),
        ("INSPECT_OPERATOR", "mallory"),
        ("PGUSER", "mallory"),
    ];
    let args = [
        &["--db", s.db.arg(), "settle", "G-TWO-I"][..],
        &strs(&flags),
        &["--reason", "r"],
    ]
    .concat();
    let r = Run::with_env("inspect", &args, &pretend);
    r.expect_code(EXIT_SETTLED);
    assert!(
        r.stdout().contains(&format!(", asked by {first}, ")),
        "{}",
        r.stdout()
    );
    // … and the maker, so disguised, still cannot approve it.
    let r = Run::with_env("inspect", &["--db", s.db.arg(), "approve", "1"], &pretend);
    r.expect_code(EXIT_FATAL);
    assert!(
        r.stderr().contains(&format!("{first} made this request")),
        "{}",
        r.stderr()
    );
    assert_eq!(s.db.state("G-TWO-I"), Some(State::Unknown));
}

#[test]
fn a_not_booked_request_is_checked_with_the_core_again_at_its_approval() {
    skip_if_unavailable!();
    let m = msg("G-TWO-N", 65, "");
    let s = Scene::new()
        .core(&[])
        .row(RowSpec::unknown(&m).age(HOUR))
        .build();
    let second = second_person!(&s.db);
    booked_canary(&s, "G-TWO-N-CANARY");
    let core = s.core().url();
    let r = request(
        &s.db,
        "G-TWO-N",
        &["--not-booked", "--core", &core],
        "core ops: never arrived",
    );
    r.expect_code(EXIT_SETTLED);
    assert!(
        r.stdout().contains("\ninquiry: 404 (never booked)\n"),
        "{}",
        r.stdout()
    );
    // Between the request and its approval the core books it after all (a request it was
    // still working on): the approval asks again, and refuses.
    s.core().book(&m);
    let before = rows_by_guid(&s.db);
    let r = as_second(&second, &["approve", "1", "--core", &core]);
    r.expect_code(EXIT_FATAL);
    let err = r.stderr();
    assert!(
        err.contains("approve 1: refused: the core's inquiry answers 200: it booked this GUID")
            && err.contains("it no longer proves \"never booked\"; reject the request"),
        "{err}"
    );
    assert_eq!(rows_by_guid(&s.db), before, "nothing changed");
    let j = inspect(&s.db, &["requests", "--json"]).json();
    assert_eq!(j["requests"][0]["status"], "pending", "{j}");
    // Reprocess finds nothing to resend: the row is still UNKNOWN, booked once.
    s.reprocess(&["--max-attempts", "3"])
        .expect_code(EXIT_SETTLED);
    assert_eq!(s.core().bookings("G-TWO-N"), 1);
}

#[test]
fn a_forced_request_is_not_approved_once_the_core_says_it_booked_the_guid() {
    skip_if_unavailable!();
    let m = msg("G-TWO-F", 66, "");
    let s = Scene::new()
        .core(&[])
        .row(RowSpec::unknown(&m).age(HOUR))
        .build();
    let second = second_person!(&s.db);
    booked_canary(&s, "G-TWO-F-CANARY");
    // Asked while the core could not be asked: forced, on the core operators' word.
    let dead = dead_url();
    let r = request(
        &s.db,
        "G-TWO-F",
        &["--not-booked", "--core", &dead, "--force"],
        "core ops: never arrived",
    );
    r.expect_code(EXIT_SETTLED);
    // The core, back, says it booked it after all: that is new evidence, and approving would
    // have reprocess book it a second time.
    s.core().book(&m);
    let before = rows_by_guid(&s.db);
    let core = s.core().url();
    let r = as_second(&second, &["approve", "1", "--core", &core]);
    r.expect_code(EXIT_FATAL);
    assert!(
        r.stderr()
            .contains(", which the forced request did not know; reject the request"),
        "{}",
        r.stderr()
    );
    assert_eq!(rows_by_guid(&s.db), before, "nothing changed");
    // Rejected, with the reason shown beside the request.
    as_second(&second, &["reject", "1", "--reason", "the core booked it"])
        .expect_code(EXIT_SETTLED);
    let shown = inspect(&s.db, &["show", "G-TWO-F"]).stdout().to_string();
    assert!(
        shown.contains(&format!("\trejected\t{}\t", second.name))
            && shown.ends_with("\tthe core booked it\n"),
        "{shown}"
    );
    assert_eq!(s.core().bookings("G-TWO-F"), 1);
}
