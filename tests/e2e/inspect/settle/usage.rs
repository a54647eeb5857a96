//! `settle --dry-run` shows the change it would ask for and writes nothing (no request, no
//! row); `--reason` is mandatory, `--operator` is gone (who asks is taken from the system),
//! and the outcome flags go together; `--db` after the command or from the environment, a
//! request made so carried out by another person.

use super::*;

#[test]
fn dry_run_shows_the_change_and_writes_nothing() {
    skip_if_unavailable!();
    let a = msg("G-DR-A", 70, "");
    let b = msg("G-DR-B", 71, "");
    let s = Scene::new()
        .core(&[])
        .rows([RowSpec::unknown(&a).age(OLD), RowSpec::sent(&b).age(HOUR)])
        .build();
    let p = second_person!(&s.db);
    let first = first_person(&s.db);
    booked_canary(&s, "G-DR-CANARY");
    let core = s.core().url();
    let before = rows_by_guid(&s.db);
    let history_before = (history(&s.db, "G-DR-A"), history(&s.db, "G-DR-B"));

    let r = settle(
        &s.db,
        &p,
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
    );
    r.expect_code(EXIT_SETTLED);
    assert_eq!(
        r.stdout(),
        format!(
            "settle G-DR-A: UNKNOWN -> DONE/0000 (if state UNKNOWN, attempts 1), asked by \
             {first}, reason: ticket 9\n\
             reply: 0000 core_ref C7 amount 70 booked_at 20260131235959 \
             (2026-01-31T23:59:59Z)\n\
             dry run: nothing written\n"
        )
    );
    let r = settle(
        &s.db,
        &p,
        "G-DR-B",
        &["--not-booked", "--core", &core, "--dry-run", "--json"],
        "ticket 10",
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
        (
            &json!("SENT"),
            &json!("FAILED"),
            &json!("E902"),
            &json!(300)
        ),
        "{j}"
    );
    assert_eq!(
        (
            &j["dry_run"],
            &j["requested"],
            &j["request"],
            &j["expires_at"]
        ),
        (&json!(true), &json!(false), &Value::Null, &Value::Null),
        "{j}"
    );
    assert_eq!(
        (&j["maker"], &j["reason"], &j["outcome"]),
        (&json!(first), &json!("ticket 10"), &json!("not-booked")),
        "{j}"
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
    let j = inspect(&s.db, &["requests", "--all", "--json"]).json();
    assert_eq!(j["requests"], json!([]), "no request made: {j}");
}

#[test]
fn reason_is_mandatory_operator_is_gone_and_flags_go_together() {
    skip_if_unavailable!();
    let m = msg("G-RO-A", 80, "");
    let s = Scene::new().row(RowSpec::unknown(&m).age(OLD)).build();
    let p = second_person!(&s.db);
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
    let why = ["--reason", "ticket"];
    let gone = "--operator is gone: who asks is taken from the system";
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (booked.to_vec(), "--reason"),
        ([&booked[..], &["--reason", "  "]].concat(), "--reason"),
        ([&booked[..], &["--reason", "a\nb"]].concat(), "--reason"),
        // Whatever it names, and with or without a reason.
        ([&booked[..], &why, &["--operator", "gina"]].concat(), gone),
        ([&booked[..], &why, &["--operator", ""]].concat(), gone),
        (
            [&booked[..], &why, &["--operator", "gina g"]].concat(),
            gone,
        ),
        ([&booked[..], &["--operator", "gina"]].concat(), gone),
        (why.to_vec(), "--booked"),
        (
            [&["--booked", "--core-ref", "C1"][..], &why].concat(),
            "--amount",
        ),
        (
            [&["--not-booked", "--core-ref", "C1"][..], &why].concat(),
            "--core-ref",
        ),
        (
            [&booked[..], &["--not-booked"], &why].concat(),
            "--not-booked",
        ),
        ([&booked[..], &["--force"], &why].concat(), "--force"),
        (
            [&["--not-booked", "--core-cert", "/x.pem"][..], &why].concat(),
            "--core-key",
        ),
    ];
    for (args, flag) in cases {
        let r = inspect(&s.db, &[&["settle", "G-RO-A"][..], &args].concat());
        r.expect_code(EXIT_USAGE);
        assert!(r.stderr().contains(flag), "{args:?}: {}", r.stderr());
    }
    // The reason is not taken from the environment, nor is anyone's name.
    let r = Run::with_env(
        "inspect",
        &[&["--db", s.db.arg(), "settle", "G-RO-A"][..], &booked].concat(),
        &[("INSPECT_REASON", "x"), ("INSPECT_OPERATOR", "y")],
    );
    r.expect_code(EXIT_USAGE);
    assert!(r.stderr().contains("--reason"), "{}", r.stderr());
    assert_eq!(rows_by_guid(&s.db), before, "nothing changed");
    let j = inspect(&s.db, &["requests", "--all", "--json"]).json();
    assert_eq!(j["requests"], json!([]), "no request made: {j}");

    // --db after the command, and from the environment, for settle too: a request, which
    // another person carries out.
    let r = tool(
        "inspect",
        &[
            &["settle", "G-RO-A"][..],
            &booked,
            &why,
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
        &[&["settle", "G-RO-A"][..], &booked, &why].concat(),
        &[("INSPECT_DB", s.db.arg())],
    );
    r.expect_code(EXIT_SETTLED);
    assert_eq!(request_id(&r), 1, "{}", r.stdout());
    assert_eq!(rows_by_guid(&s.db), before, "a request changes no row");
    as_second(&p, &["approve", "1"]).expect_code(EXIT_SETTLED);
    assert_eq!(s.db.state("G-RO-A"), Some(State::Done));
}
