//! The wrappers' lock (one run of a wrapper per ledger at a time, exit 75 for the second)
//! and their own fatal errors.

use std::time::Duration;

use super::wrappers::*;
use crate::util::*;

#[test]
fn a_second_run_is_refused_while_the_lock_is_held() {
    let s = Scene::new()
        .row(
            RowSpec::new("G-SCR-LOCK", State::Done)
                .code("0000")
                .age(100 * DAY),
        )
        .build();

    let held = hold_lock(&lock_file(&s.db, "purge"));
    let run = run_script("purge.sh", &[], &[("LEDGER_DB", s.db.arg())]);
    run.expect_code(EXIT_LOCKED);
    assert_eq!(run.stdout(), "", "the tool did not run");
    assert_stamped(&run);
    assert!(
        run.stderr().contains("another run holds"),
        "{}",
        run.stderr()
    );
    assert!(!run.stderr().contains(": running "), "{}", run.stderr());
    assert_eq!(
        s.db.state("G-SCR-LOCK"),
        Some(State::Done),
        "nothing was purged"
    );

    // Another wrapper on the same ledger has its own lock.
    let other = run_script(
        "reprocess.sh",
        &[],
        &[("LEDGER_DB", s.db.arg()), ("CORE_URL", &dead_url())],
    );
    other.expect_code(EXIT_SETTLED);

    drop(held);
    let run = run_script("purge.sh", &[], &[("LEDGER_DB", s.db.arg())]);
    run.expect_code(EXIT_SETTLED);
    assert!(s.db.row("G-SCR-LOCK").is_none());
}

#[test]
fn lock_dir_moves_the_lock_file() {
    let s = Scene::new()
        .row(RowSpec::unknown(&msg("G-SCR-LDIR", 700, "")).age(HOUR))
        .build();
    let locks = tempfile::tempdir().unwrap();
    let dead = dead_url();
    let env = [
        ("LEDGER_DB", s.db.arg()),
        ("CORE_URL", &dead),
        ("LOCK_DIR", locks.path().to_str().unwrap()),
    ];

    let _held = hold_lock(&locks.path().join("ledger.db.resolve.lock"));
    let run = run_script("resolve.sh", &[], &env);
    run.expect_code(EXIT_LOCKED);
    assert_eq!(run.stdout(), "");
    assert!(!lock_file(&s.db, "resolve").exists());
}

#[test]
fn the_lock_is_on_the_ledger_the_tool_opens_however_it_was_named() {
    let core = Core::start(&["--slow-ms", "3000"]);
    // `a` is what LEDGER_DB says in one crontab; `b` is the ledger actually used.
    let a = TempLedger::new();
    let m = msg("G-SCR-ROUTE", 1700, "SLOW: holds the lock a while");
    let b = TempLedger::new();
    RowSpec::failed(&m).age(MINUTE).insert(&b);
    let url = core.url();
    std::thread::scope(|scope| {
        let first = scope.spawn(|| {
            run_script(
                "reprocess.sh",
                &["--db", b.arg()],
                &[("LEDGER_DB", a.arg()), ("CORE_URL", &url)],
            )
        });
        // Claimed (FAILED -> SENT): the tool runs, so the wrapper holds its lock, and the
        // core takes 3 s to answer.
        assert!(
            eventually(Duration::from_secs(20), || b.state("G-SCR-ROUTE")
                == Some(State::Sent)),
            "the first run did not start"
        );

        let refused = |args: &[&str], env: &[(&str, &str)]| {
            let env = [env, &[("CORE_URL", &url)]].concat();
            let run = run_script("reprocess.sh", args, &env);
            run.expect_code(EXIT_LOCKED);
            assert_eq!(run.stdout(), "", "the tool did not run");
            assert!(
                run.stderr().contains("another run holds"),
                "{}",
                run.stderr()
            );
        };
        refused(&[], &[("LEDGER_DB", b.arg())]);
        refused(&[], &[("LEDGER_DB", a.arg()), ("REPROCESS_DB", b.arg())]);
        // LEDGER_DB is not needed when --db names the ledger.
        refused(&[&format!("--db={}", b.arg())], &[]);

        let run = first.join().unwrap();
        run.expect_code(EXIT_SETTLED);
        assert!(
            running_line(&run).contains(&format!("ledger {},", b.arg())),
            "{}",
            run.stderr()
        );
    });
    assert_eq!(b.state("G-SCR-ROUTE"), Some(State::Done));
    assert_eq!(core.bookings("G-SCR-ROUTE"), 1);
    assert!(lock_file(&b, "reprocess").exists());
    assert!(
        !lock_file(&a, "reprocess").exists(),
        "no lock next to a ledger the tool did not open"
    );
    assert!(
        !a.created(),
        "the ledger named by LEDGER_DB was never opened"
    );

    // The other way round: a run via LEDGER_DB=b holds it, one via --db b waits its turn.
    let _held = hold_lock(&lock_file(&b, "reprocess"));
    let run = run_script(
        "reprocess.sh",
        &["--db", b.arg()],
        &[("LEDGER_DB", a.arg()), ("CORE_URL", &url)],
    );
    run.expect_code(EXIT_LOCKED);
    assert_eq!(run.stdout(), "");
}

#[test]
fn a_failing_flock_is_a_fatal_error_not_a_held_lock() {
    let s = Scene::new()
        .row(
            RowSpec::new("G-SCR-FLOCK", State::Done)
                .code("0000")
                .age(100 * DAY),
        )
        .build();
    // A flock(1) that fails for a reason of its own (one without -E, say), exit 1 or 64.
    let fake = tempfile::tempdir().unwrap();
    let path = format!(
        "{}:{}",
        fake.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    for code in [1, 64] {
        let flock = fake.path().join("flock");
        std::fs::write(
            &flock,
            format!("#!/bin/sh\necho \"flock: invalid option -- 'E'\" >&2\nexit {code}\n"),
        )
        .unwrap();
        std::fs::set_permissions(&flock, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let run = run_script(
            "purge.sh",
            &[],
            &[("LEDGER_DB", s.db.arg()), ("PATH", &path)],
        );
        run.expect_code(EXIT_FATAL);
        let err = run.stderr();
        assert!(
            err.contains(&format!("failed (exit {code})")) && err.contains("invalid option"),
            "says flock failed, with its message:\n{err}"
        );
        assert!(!err.contains("another run holds"), "{err}");
        assert_stamped(&run);
        assert_eq!(run.stdout(), "", "the tool did not run");
        assert_eq!(s.db.state("G-SCR-FLOCK"), Some(State::Done));
    }
}

#[test]
fn fatal_errors_and_a_missing_binary_have_their_codes() {
    let db = TempLedger::new();
    let missing = db.dir().join("no-such-dir").join("ledger.db");
    let missing = missing.to_str().unwrap();

    // The tool cannot open the ledger: its exit 1 is passed through.
    let run = run_script(
        "purge.sh",
        &[],
        &[
            ("LEDGER_DB", missing),
            ("LOCK_DIR", db.dir().to_str().unwrap()),
        ],
    );
    run.expect_code(EXIT_FATAL);
    assert!(
        run.stderr().contains("purge: ledger") && run.stderr().contains("does not exist"),
        "{}",
        run.stderr()
    );
    assert_stamped(&run);

    // No place for the lock file next to the ledger: the wrapper's own fatal error.
    let run = run_script("purge.sh", &[], &[("LEDGER_DB", missing)]);
    run.expect_code(EXIT_FATAL);
    assert!(
        run.stderr().contains("cannot open lock file"),
        "{}",
        run.stderr()
    );

    // A bad flag: the tool's usage error, exit 2, passed through.
    let run = run_script("purge.sh", &["--no-such-flag"], &[("LEDGER_DB", db.arg())]);
    run.expect_code(EXIT_USAGE);
    assert!(run.stderr().contains("--no-such-flag"), "{}", run.stderr());
    assert_stamped(&run);

    let empty = tempfile::tempdir().unwrap();
    for name in ["relay.sh", "resolve.sh", "reprocess.sh", "purge.sh"] {
        let run = run_script(
            name,
            &[],
            &[
                ("LEDGER_DB", db.arg()),
                ("RELAY_BIN_DIR", empty.path().to_str().unwrap()),
            ],
        );
        run.expect_code(EXIT_NOT_FOUND);
        assert!(run.stderr().contains("RELAY_BIN_DIR"), "{}", run.stderr());
    }
}
