//! `settle --dry-run` shows the change and writes nothing; `--reason` and `--operator` are
//! mandatory and the outcome flags go together.

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
        (
            &json!("SENT"),
            &json!("FAILED"),
            &json!("E902"),
            &json!(300)
        ),
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
