//! With `--json`, every run of every tool prints exactly one JSON object on stdout, naming the
//! tool and its exit code (`exit_code`), whichever way it ends: a ledger that cannot be
//! opened, a core that is down, a canary that answers 404 or fails, nothing to do, rows left
//! for a later run, a refusal, a usage error. A script reading stdout then never finds it
//! empty. Before, resolve printed nothing when its canary failed (exit 1 or 3), nor did
//! reprocess when the canary said it had the wrong core, nor `inspect show` for a GUID the
//! ledger does not know; `inspect settle`'s refusal had no `tool`.
//!
//! `relay::reasons` checks the failure object's fields on the ledger and usage paths; this
//! module goes through the other paths, tool by tool.

use std::path::Path;

use crate::util::*;

/// Runs each case (`tool`, its arguments, the exit it must give) and checks its stdout.
#[track_caller]
fn check(cases: &[(&str, Vec<&str>, u8)]) {
    for (name, args, exit) in cases {
        let r = tool(name, args);
        assert_one_json_object(&r, name, *exit);
    }
}

/// A ledger holding a booking (DONE/0000) that no core here knows: the canary answers 404.
fn with_a_booking_the_core_does_not_know(s: &Scene) {
    s.put(RowSpec::of(&msg("G-JE-ELSEWHERE", 1, ""), State::Done).code("0000"));
}

#[test]
fn resolve_answers_in_json_on_every_path() {
    let dead = dead_url();
    let empty = Scene::new().core(&[]).build();
    empty.db.create();
    let core = empty.core().url();
    let bad = unusable_ledgers(&empty.db).remove(0);
    let db = empty.db.arg();
    // An UNKNOWN row without a stored request: skipped, so left for an operator (exit 3).
    let odd = Scene::new()
        .core(&[])
        .row(
            RowSpec::new("G-JE-NOREQ", State::Unknown)
                .code("E901")
                .age(OLD),
        )
        .build();
    let odd_core = odd.core().url();
    // A booking the core does not know, and an UNKNOWN row to settle.
    let wrong = Scene::new()
        .core(&[])
        .row(RowSpec::unknown(&msg("G-JE-UNK", 2, "")).age(OLD))
        .build();
    with_a_booking_the_core_does_not_know(&wrong);
    let wrong_core = wrong.core().url();
    let cases: Vec<(&str, Vec<&str>, u8)> = vec![
        // Nothing to do, and a dry run.
        (
            "resolve",
            vec!["--db", db, "--core", &core, "--min-age", "60", "--json"],
            EXIT_SETTLED,
        ),
        (
            "resolve",
            vec![
                "--db",
                db,
                "--core",
                &core,
                "--min-age",
                "60",
                "--dry-run",
                "--json",
            ],
            EXIT_SETTLED,
        ),
        // The ledger cannot be opened.
        (
            "resolve",
            vec!["--db", &bad, "--core", &core, "--min-age", "60", "--json"],
            EXIT_FATAL,
        ),
        // A row left (skipped).
        (
            "resolve",
            vec![
                "--db",
                odd.db.arg(),
                "--core",
                &odd_core,
                "--min-age",
                "60",
                "--json",
            ],
            EXIT_LEFT,
        ),
        // The canary answers 404: the wrong core (exit 1).
        (
            "resolve",
            vec![
                "--db",
                wrong.db.arg(),
                "--core",
                &wrong_core,
                "--min-age",
                "60",
                "--json",
            ],
            EXIT_FATAL,
        ),
        // The canary fails: the core is down (exit 3).
        (
            "resolve",
            vec![
                "--db",
                wrong.db.arg(),
                "--core",
                &dead,
                "--min-age",
                "60",
                "--json",
            ],
            EXIT_LEFT,
        ),
    ];
    check(&cases);
    let r = tool("resolve", &cases[5].1);
    let v = assert_one_json_object(&r, "resolve", EXIT_LEFT);
    assert!(
        v["error"].as_str().is_some_and(|e| e
            .contains("canary inquiry about booked GUID G-JE-ELSEWHERE failed")
            && e.ends_with("no row changed")),
        "{v}"
    );
    assert_eq!(
        wrong.db.state("G-JE-UNK"),
        Some(State::Unknown),
        "no row changed"
    );
}

#[test]
fn reprocess_answers_in_json_on_every_path() {
    let dead = dead_url();
    let empty = Scene::new().core(&[]).build();
    empty.db.create();
    let core = empty.core().url();
    let bad = unusable_ledgers(&empty.db).remove(0);
    let db = empty.db.arg();
    // A row to resend, and no booking to check the core with: asked about directly.
    let lone = Scene::new()
        .row(RowSpec::failed(&msg("G-JE-LONE", 3, "")).age(OLD))
        .build();
    // A row to resend, and a booking the core does not know.
    let wrong = Scene::new()
        .core(&[])
        .row(RowSpec::failed(&msg("G-JE-FAILED", 4, "")).age(OLD))
        .build();
    with_a_booking_the_core_does_not_know(&wrong);
    let wrong_core = wrong.core().url();
    let cases: Vec<(&str, Vec<&str>, u8)> = vec![
        (
            "reprocess",
            vec!["--db", db, "--core", &core, "--max-attempts", "3", "--json"],
            EXIT_SETTLED,
        ),
        (
            "reprocess",
            vec![
                "--db",
                db,
                "--core",
                &core,
                "--max-attempts",
                "3",
                "--dry-run",
                "--json",
            ],
            EXIT_SETTLED,
        ),
        (
            "reprocess",
            vec![
                "--db",
                &bad,
                "--core",
                &core,
                "--max-attempts",
                "3",
                "--json",
            ],
            EXIT_FATAL,
        ),
        (
            "reprocess",
            vec!["--db", db, "--core", &core, "--json"],
            EXIT_USAGE,
        ),
        // The reachability check fails (no canary: the first row's inquiry): nothing tried.
        (
            "reprocess",
            vec![
                "--db",
                lone.db.arg(),
                "--core",
                &dead,
                "--max-attempts",
                "3",
                "--json",
            ],
            EXIT_LEFT,
        ),
        // The canary fails: the core is down.
        (
            "reprocess",
            vec![
                "--db",
                wrong.db.arg(),
                "--core",
                &dead,
                "--max-attempts",
                "3",
                "--json",
            ],
            EXIT_LEFT,
        ),
        // The canary answers 404: the wrong core, nothing claimed.
        (
            "reprocess",
            vec![
                "--db",
                wrong.db.arg(),
                "--core",
                &wrong_core,
                "--max-attempts",
                "3",
                "--json",
            ],
            EXIT_FATAL,
        ),
    ];
    check(&cases);
    let r = tool("reprocess", &cases[6].1);
    let v = assert_one_json_object(&r, "reprocess", EXIT_FATAL);
    assert!(
        v["error"].as_str().is_some_and(|e| e
            .contains("canary inquiry: GUID G-JE-ELSEWHERE is booked")
            && e.ends_with("no row claimed")),
        "{v}"
    );
    assert_eq!(wrong.core().bookings("G-JE-FAILED"), 0, "nothing sent");
}

#[test]
fn inspect_answers_in_json_on_every_path() {
    let dead = dead_url();
    let young = msg("G-JE-YOUNG", 5, "");
    let old = msg("G-JE-OLD", 6, "");
    let s = Scene::new()
        .core(&[])
        .rows([RowSpec::unknown(&young), RowSpec::unknown(&old).age(DAY)])
        .build();
    let core = s.core().url();
    let db = s.db.arg();
    let settle = |guid: &str, url: &str, extra: &[&str]| -> Run {
        let args = [
            &["--db", db, "settle", guid, "--not-booked", "--core", url][..],
            &["--reason", "r", "--json"],
            extra,
        ]
        .concat();
        tool("inspect", &args)
    };
    let show = tool("inspect", &["--db", db, "show", "G-JE-NONE", "--json"]);
    assert_one_json_object(&show, "inspect", EXIT_FATAL);
    // The views name the tool and the exit code too, as every summary object does.
    for view in [
        &["--json"][..],
        &["summary", "--json"],
        &["list", "--state", "UNKNOWN", "--json"],
        &["show", "G-JE-OLD", "--json"],
    ] {
        let r = tool("inspect", &[&["--db", db][..], view].concat());
        assert_one_json_object(&r, "inspect", EXIT_SETTLED);
    }
    for (run, exit) in [
        (settle("G-JE-NONE", &core, &[]), EXIT_FATAL),
        // Younger than --min-age.
        (settle("G-JE-YOUNG", &core, &[]), EXIT_FATAL),
        // No canary: the ledger holds no booking to check the core with.
        (settle("G-JE-OLD", &core, &[]), EXIT_FATAL),
        (settle("G-JE-OLD", &core, &["--min-age", "59"]), EXIT_USAGE),
    ] {
        assert_one_json_object(&run, "inspect", exit);
    }
    with_a_booking_the_core_does_not_know(&s);
    // The canary answers 404 (the wrong core), or fails (the core is down).
    for url in [&core, &dead] {
        let v = assert_one_json_object(&settle("G-JE-OLD", url, &[]), "inspect", EXIT_FATAL);
        assert!(
            v["refused"].as_str().is_some_and(|w| w.contains("canary")),
            "{v}"
        );
        assert_eq!(v["exit"], EXIT_FATAL, "{v}");
    }
    assert_eq!(
        s.db.state("G-JE-OLD"),
        Some(State::Unknown),
        "nothing written"
    );
}

#[test]
fn the_other_tools_answer_in_json_on_every_path() {
    let db = TempLedger::new();
    db.create();
    let dir = db.dir();
    let path = |name: &str| {
        dir.join(name)
            .to_str()
            .expect("UTF-8 temp path")
            .to_string()
    };
    let (taken, missing, other) = (path("taken.bak"), path("missing.bak"), path("other.db"));
    std::fs::write(&taken, b"in the way").expect("write a file");
    let journal = path("journal.jsonl");
    std::fs::write(
        &journal,
        "{\"guid\":\"G-JE-J\",\"core_ref\":\"C1\",\"amount\":5,\"booked_at\":\"2026-03-01T10:00:00Z\"}\n",
    )
    .expect("write the journal");
    let ledger = db.arg();
    let pg = "postgres://relay@127.0.0.1:1/ledger";
    let cases: Vec<(&str, Vec<&str>, u8)> = vec![
        (
            "purge",
            vec!["--db", ledger, "--days", "7", "--json"],
            EXIT_SETTLED,
        ),
        (
            "purge",
            vec!["--db", ledger, "--days", "0", "--json"],
            EXIT_USAGE,
        ),
        (
            "backup",
            vec!["--db", ledger, "--to", &taken, "--json"],
            EXIT_FATAL,
        ),
        (
            "backup",
            vec!["--db", pg, "--to", &taken, "--json"],
            EXIT_USAGE,
        ),
        (
            "restore",
            vec!["--db", &other, "--from", &missing, "--json"],
            EXIT_FATAL,
        ),
        (
            "restore",
            vec!["--db", pg, "--from", &taken, "--json"],
            EXIT_USAGE,
        ),
        (
            "migrate",
            vec!["--from", ledger, "--to", &other, "--json"],
            EXIT_FATAL,
        ),
        (
            "reconcile",
            vec!["--db", ledger, "--journal", &missing, "--json"],
            3,
        ),
        // The journal's booking is not in the ledger: a break (exit 1).
        (
            "reconcile",
            vec!["--db", ledger, "--journal", &journal, "--json"],
            1,
        ),
        (
            "reconcile",
            vec![
                "--db",
                ledger,
                "--journal",
                &journal,
                "--from",
                "2026-03-02T00:00:00Z",
                "--to",
                "2026-03-01T00:00:00Z",
                "--json",
            ],
            EXIT_USAGE,
        ),
    ];
    check(&cases);
    assert!(!Path::new(&other).exists(), "nothing written there");
}
