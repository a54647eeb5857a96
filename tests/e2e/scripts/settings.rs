//! The wrappers' settings: `--help` lists them, a missing or malformed one is refused
//! before the tool runs, the tool's own variables win over the generic ones, an empty one
//! counts as unset, and `RESOLVE_STALE_SENT` is never read.

use std::net::TcpListener;
use std::path::Path;
use std::time::{Duration, Instant};

use super::wrappers::*;
use crate::util::*;

#[test]
fn help_lists_every_setting_and_needs_none() {
    let cases: &[(&str, &[&str])] = &[
        (
            "relay.sh",
            &[
                "RELAY_DB",
                "RELAY_LISTEN",
                "RELAY_CORE",
                "RELAY_CONNECT_TIMEOUT_MS",
                "RELAY_READ_TIMEOUT_MS",
                "RELAY_FRAME_TIMEOUT_MS",
                "RELAY_IDLE_TIMEOUT_SECS",
                "RELAY_MAX_CONNECTIONS",
                "RELAY_CORE_CA",
                "RELAY_CORE_CERT",
                "RELAY_CORE_KEY",
                "RELAY_BIN_DIR",
                "RUST_LOG",
                "127.0.0.1:9200",
            ],
        ),
        (
            "resolve.sh",
            &[
                "LEDGER_DB",
                "RESOLVE_DB",
                "CORE_URL",
                "RESOLVE_CORE",
                "RESOLVE_MIN_AGE",
                "RESOLVE_STALE_SENT",
                "--stale-sent SECS",
                "RESOLVE_CONNECT_TIMEOUT_MS",
                "RESOLVE_READ_TIMEOUT_MS",
                "RESOLVE_CORE_CA",
                "RESOLVE_CORE_KEY",
                "RESOLVE_MAX_INQUIRIES",
                "RESOLVE_PARALLEL",
                "LOCK_DIR",
                "RELAY_BIN_DIR",
                "RUST_LOG",
                "[default: 300]",
                "75",
            ],
        ),
        (
            "reprocess.sh",
            &[
                "LEDGER_DB",
                "REPROCESS_DB",
                "CORE_URL",
                "REPROCESS_CORE",
                "REPROCESS_MAX_ATTEMPTS",
                "REPROCESS_LIMIT",
                "REPROCESS_CONNECT_TIMEOUT_MS",
                "REPROCESS_READ_TIMEOUT_MS",
                "REPROCESS_CORE_CA",
                "REPROCESS_CORE_KEY",
                "REPROCESS_PARALLEL",
                "LOCK_DIR",
                "RELAY_BIN_DIR",
                "RUST_LOG",
                "[default: 3]",
                "75",
            ],
        ),
        (
            "purge.sh",
            &[
                "LEDGER_DB",
                "PURGE_DB",
                "PURGE_DAYS",
                "--force",
                "LOCK_DIR",
                "RELAY_BIN_DIR",
                "RUST_LOG",
                "[default: 90]",
                "75",
            ],
        ),
    ];
    for (name, words) in cases {
        for flag in ["--help", "-h"] {
            let run = run_script(name, &[flag], &[]);
            run.expect_code(EXIT_SETTLED);
            let out = run.stdout();
            for w in *words {
                assert!(out.contains(w), "{name} {flag} must mention {w}:\n{out}");
            }
            assert!(
                out.contains("--dry-run") || *name == "relay.sh",
                "{name} --help shows the tool's options:\n{out}"
            );
        }
    }
}

#[test]
fn a_missing_ledger_setting_is_a_clear_usage_error() {
    for name in ["resolve.sh", "reprocess.sh", "purge.sh"] {
        let run = run_script(name, &[], &[]);
        run.expect_code(EXIT_USAGE);
        assert!(
            run.stderr().contains("LEDGER_DB is not set"),
            "{}",
            run.stderr()
        );
        assert_stamped(&run);
        assert_eq!(run.stdout(), "");
    }
    let run = run_script("relay.sh", &[], &[]);
    run.expect_code(EXIT_USAGE);
    assert!(
        run.stderr().contains("RELAY_DB is not set"),
        "{}",
        run.stderr()
    );
    assert_stamped(&run);
}

#[test]
fn a_malformed_setting_is_refused_before_the_tool_runs() {
    let db = TempLedger::new();
    for (name, var) in [
        ("purge.sh", "PURGE_DAYS"),
        ("resolve.sh", "RESOLVE_MIN_AGE"),
        ("reprocess.sh", "REPROCESS_MAX_ATTEMPTS"),
        ("reprocess.sh", "REPROCESS_LIMIT"),
    ] {
        let run = run_script(name, &[], &[("LEDGER_DB", db.arg()), (var, "ten")]);
        run.expect_code(EXIT_USAGE);
        assert!(run.stderr().contains(var), "{}", run.stderr());
        assert!(!run.stderr().contains(": running "), "{}", run.stderr());
    }
    let run = run_script(
        "reprocess.sh",
        &[],
        &[("LEDGER_DB", db.arg()), ("REPROCESS_MAX_ATTEMPTS", "0")],
    );
    run.expect_code(EXIT_USAGE);
    let run = run_script(
        "relay.sh",
        &[],
        &[("RELAY_DB", db.arg()), ("RELAY_READ_TIMEOUT_MS", "5s")],
    );
    run.expect_code(EXIT_USAGE);
    assert!(
        run.stderr().contains("RELAY_READ_TIMEOUT_MS"),
        "{}",
        run.stderr()
    );
    assert!(!db.created(), "no tool ran, so no ledger was created");
}

#[test]
fn the_tools_own_variables_win_over_ledger_db_and_core_url() {
    let core = Core::start(&[]);
    // A path in an existing directory where no ledger is: what a stale or wrong generic
    // setting points at. Any tool that opened it would fail (the tools never create one).
    let decoys = tempfile::tempdir().unwrap();
    let decoy = decoys
        .path()
        .join("not-this.db")
        .to_str()
        .unwrap()
        .to_string();
    let dead = dead_url();
    let shows_values_in_effect = |run: &Run, db: &TempLedger| {
        let line = running_line(run);
        assert!(
            line.contains(&format!("ledger {},", db.arg()))
                && line.contains(&format!("core {},", core.url())),
            "the log shows the values in effect: {line}"
        );
    };

    // resolve.sh: RESOLVE_DB and RESOLVE_CORE, set by the operator, are what the tool uses.
    let m = msg("G-SCR-OWN-RES", 1100, "own variables");
    let s = Scene::new().row(RowSpec::unknown(&m).age(HOUR)).build();
    core.book(&m);
    let run = run_script(
        "resolve.sh",
        &[],
        &[
            ("LEDGER_DB", &decoy),
            ("RESOLVE_DB", s.db.arg()),
            ("CORE_URL", &dead),
            ("RESOLVE_CORE", &core.url()),
        ],
    );
    run.expect_code(EXIT_SETTLED);
    shows_values_in_effect(&run, &s.db);
    assert_eq!(s.db.state("G-SCR-OWN-RES"), Some(State::Done));
    assert!(!Path::new(&decoy).exists());

    // reprocess.sh: REPROCESS_DB and REPROCESS_CORE likewise.
    let s = Scene::new()
        .row(RowSpec::failed(&msg("G-SCR-OWN-REP", 1200, "own variables")).age(MINUTE))
        .build();
    let run = run_script(
        "reprocess.sh",
        &[],
        &[
            ("LEDGER_DB", &decoy),
            ("REPROCESS_DB", s.db.arg()),
            ("CORE_URL", &dead),
            ("REPROCESS_CORE", &core.url()),
        ],
    );
    run.expect_code(EXIT_SETTLED);
    shows_values_in_effect(&run, &s.db);
    assert_eq!(s.db.state("G-SCR-OWN-REP"), Some(State::Done));
    assert_eq!(core.bookings("G-SCR-OWN-REP"), 1);

    // purge.sh: PURGE_DB likewise.
    let s = Scene::new()
        .row(
            RowSpec::new("G-SCR-OWN-PUR", State::Done)
                .code("0000")
                .age(100 * DAY),
        )
        .build();
    let run = run_script(
        "purge.sh",
        &[],
        &[("LEDGER_DB", &decoy), ("PURGE_DB", s.db.arg())],
    );
    run.expect_code(EXIT_SETTLED);
    assert!(
        running_line(&run).contains(&format!("ledger {},", s.db.arg())),
        "{}",
        run.stderr()
    );
    assert!(s.db.row("G-SCR-OWN-PUR").is_none());

    // An empty tool variable counts as unset: the generic one applies.
    let s = Scene::new()
        .row(RowSpec::failed(&msg("G-SCR-OWN-EMPTY", 1300, "generic variables")).age(MINUTE))
        .build();
    let run = run_script(
        "reprocess.sh",
        &[],
        &[
            ("LEDGER_DB", s.db.arg()),
            ("REPROCESS_DB", ""),
            ("CORE_URL", &core.url()),
            ("REPROCESS_CORE", ""),
        ],
    );
    run.expect_code(EXIT_SETTLED);
    assert!(
        running_line(&run).contains(&format!("core {},", core.url())),
        "{}",
        run.stderr()
    );
    assert_eq!(s.db.state("G-SCR-OWN-EMPTY"), Some(State::Done));
}

#[test]
fn resolve_sh_ignores_resolve_stale_sent_and_settles_sent_rows_only_when_asked_by_argument() {
    // Left SENT by a relay that died after the core booked it.
    let m = msg("G-SCR-STALE", 1500, "orphaned");
    let s = Scene::new()
        .core(&[])
        .row(RowSpec::sent(&m).age(HOUR))
        .build();
    s.core().book(&m);
    let url = s.core().url();
    let env = [
        ("LEDGER_DB", s.db.arg()),
        ("CORE_URL", &url),
        ("RESOLVE_STALE_SENT", "600"),
    ];

    let run = run_script("resolve.sh", &[], &env);
    run.expect_code(EXIT_SETTLED);
    assert_eq!(
        s.db.state("G-SCR-STALE"),
        Some(State::Sent),
        "a variable alone must not settle SENT rows"
    );
    assert_stamped(&run);
    let err = run.stderr();
    let warnings: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("RESOLVE_STALE_SENT"))
        .collect();
    assert_eq!(warnings.len(), 1, "one warning line:\n{err}");
    assert!(
        warnings[0].contains("ignored") && warnings[0].contains("--stale-sent SECS"),
        "the warning says what to do instead: {}",
        warnings[0]
    );
    assert!(running_line(&run).contains("stale-sent off"), "{err}");

    // Not even a malformed value stops the run: it is ignored all the same.
    let run = run_script(
        "resolve.sh",
        &[],
        &[
            ("LEDGER_DB", s.db.arg()),
            ("CORE_URL", &url),
            ("RESOLVE_STALE_SENT", "ten"),
        ],
    );
    run.expect_code(EXIT_SETTLED);
    assert!(run.stderr().contains("ignored"), "{}", run.stderr());
    assert_eq!(s.db.state("G-SCR-STALE"), Some(State::Sent));

    // Asked on the command line, the same row is settled.
    let run = run_script("resolve.sh", &["--stale-sent", "600"], &env);
    run.expect_code(EXIT_SETTLED);
    assert!(
        running_line(&run).contains("stale-sent 600"),
        "{}",
        run.stderr()
    );
    let row = s.db.row("G-SCR-STALE").unwrap();
    assert_eq!(row.state, State::Done);
    assert_eq!(row.rsp_code.as_deref(), Some("0000"));
    assert_eq!(s.core().bookings("G-SCR-STALE"), 1, "resolve never POSTs");
}

#[test]
fn purge_days_0_is_refused_unless_force_is_passed() {
    let s = Scene::new()
        .row(
            RowSpec::new("G-SCR-ZERO", State::Done)
                .code("0000")
                .age(MINUTE),
        )
        .build();
    for days in ["0", "00"] {
        let run = run_script(
            "purge.sh",
            &[],
            &[("LEDGER_DB", s.db.arg()), ("PURGE_DAYS", days)],
        );
        run.expect_code(EXIT_USAGE);
        assert!(run.stderr().contains("PURGE_DAYS"), "{}", run.stderr());
        assert!(run.stderr().contains("--force"), "{}", run.stderr());
        assert!(!run.stderr().contains(": running "), "{}", run.stderr());
        assert_stamped(&run);
        assert_eq!(
            s.db.state("G-SCR-ZERO"),
            Some(State::Done),
            "nothing purged"
        );
    }

    // Meant: --force on the command line lets 0 through (and the tool accepts it).
    let run = run_script(
        "purge.sh",
        &["--force"],
        &[("LEDGER_DB", s.db.arg()), ("PURGE_DAYS", "0")],
    );
    run.expect_code(EXIT_SETTLED);
    assert!(running_line(&run).contains("days 0"), "{}", run.stderr());
    assert!(s.db.row("G-SCR-ZERO").is_none());
}

#[test]
fn timeout_variables_reach_the_tool_and_empty_ones_count_as_unset() {
    // A core that accepts connections and never answers: only the read timeout ends a call.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_url = format!("http://{}", silent.local_addr().unwrap());
    let cases = [
        (
            "resolve.sh",
            "RESOLVE_CONNECT_TIMEOUT_MS",
            "RESOLVE_READ_TIMEOUT_MS",
            State::Unknown,
            "E901",
        ),
        (
            "reprocess.sh",
            "REPROCESS_CONNECT_TIMEOUT_MS",
            "REPROCESS_READ_TIMEOUT_MS",
            State::Failed,
            "E902",
        ),
    ];
    // Either way the row is left as it was: resolve's inquiry leaves it UNKNOWN, and
    // reprocess's reachability inquiry finds the core silent and claims nothing (contract §5,
    // v1.2).
    for (name, connect_var, read_var, state, rsp_code) in cases {
        let guid = format!("G-SCR-TMO-{}", &name[..3].to_uppercase());
        let m = msg(&guid, 1900, "silent core");
        let s = Scene::new()
            .row(RowSpec::of(&m, state).code(rsp_code).age(HOUR))
            .build();
        let started = Instant::now();
        let run = run_script(
            name,
            &[],
            &[
                ("LEDGER_DB", s.db.arg()),
                ("CORE_URL", &silent_url),
                (connect_var, ""),
                (read_var, "300"),
            ],
        );
        let took = started.elapsed();
        run.expect_code(EXIT_LEFT);
        assert!(
            running_line(&run).contains("read-timeout-ms 300"),
            "{}",
            run.stderr()
        );
        assert!(
            took < Duration::from_secs(4),
            "{name}: {read_var}=300 must bound the call (the default is 5000 ms), took {took:?}"
        );
        assert_eq!(s.db.state(&guid), Some(state), "{name}: as it was");
    }
}

#[test]
fn max_inquiries_and_parallel_variables_reach_the_tools_and_empty_ones_count_as_unset() {
    let m = msg("G-SCR-INQ", 10, "");
    let s = Scene::new().row(RowSpec::unknown(&m).age(HOUR)).build();
    // No booking in the ledger, so no canary: the inquiry fails at the dead core.
    let run = run_script(
        "resolve.sh",
        &["--json"],
        &[
            ("LEDGER_DB", s.db.arg()),
            ("CORE_URL", &dead_url()),
            ("RESOLVE_MAX_INQUIRIES", "1"),
            ("RESOLVE_PARALLEL", ""),
        ],
    );
    run.expect_code(EXIT_LEFT);
    let line = running_line(&run);
    assert!(
        line.contains("max-inquiries 1") && line.contains("parallel default"),
        "{line}"
    );
    assert_eq!(run.json()["needs_operator"][0]["guid"], "G-SCR-INQ");

    let f = msg("G-SCR-PAR", 10, "");
    let s = Scene::new()
        .core(&[])
        .row(RowSpec::failed(&f).age(HOUR))
        .build();
    let run = run_script(
        "reprocess.sh",
        &[],
        &[
            ("LEDGER_DB", s.db.arg()),
            ("CORE_URL", &s.core().url()),
            ("REPROCESS_PARALLEL", "2"),
        ],
    );
    run.expect_code(EXIT_SETTLED);
    assert!(
        running_line(&run).contains("parallel 2"),
        "{}",
        run.stderr()
    );
    assert_eq!(s.core().bookings("G-SCR-PAR"), 1);
    let run = run_script(
        "reprocess.sh",
        &[],
        &[
            ("LEDGER_DB", s.db.arg()),
            ("CORE_URL", &s.core().url()),
            ("REPROCESS_PARALLEL", "0"),
        ],
    );
    run.expect_code(EXIT_USAGE);
}
