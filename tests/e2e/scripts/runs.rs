//! Each wrapper doing its tool's work: exit codes and stdout passed through untouched,
//! stderr timestamped; `relay.sh` execs the relay.

use std::time::Duration;

use super::wrappers::*;
use crate::util::*;

#[test]
fn resolve_settles_unknown_rows_and_passes_exit_0_through() {
    let booked = msg("G-SCR-RES-1", 1200, "booked before the timeout");
    let never = msg("G-SCR-RES-2", 1300, "never reached the core");
    // Younger than the default RESOLVE_MIN_AGE (300 s): not touched.
    let young = msg("G-SCR-RES-3", 1400, "too young");
    let s = Scene::new()
        .core(&[])
        .row(RowSpec::unknown(&booked).age(HOUR))
        .row(RowSpec::unknown(&never).age(HOUR))
        .row(RowSpec::unknown(&young).age(10))
        .build();
    s.core().book(&booked);

    let run = run_script(
        "resolve.sh",
        &[],
        &[("LEDGER_DB", s.db.arg()), ("CORE_URL", &s.core().url())],
    );
    run.expect_code(EXIT_SETTLED);
    let out = run.stdout();
    assert!(
        out.starts_with("resolve: 2 examined, 1 DONE, 1 FAILED, 0 left")
            && out.lines().count() == 1,
        "the tool's summary line, untouched: {out:?}"
    );
    assert_not_stamped(out);
    assert_stamped(&run);
    assert!(
        run.stderr().contains("resolve.sh: resolve exited 0"),
        "{}",
        run.stderr()
    );

    let done = s.db.row("G-SCR-RES-1").unwrap();
    assert_eq!(done.state, State::Done);
    assert_eq!(done.rsp_code.as_deref(), Some("0000"));
    assert_eq!(done.response.as_ref().map(Vec::len), Some(90));
    let failed = s.db.row("G-SCR-RES-2").unwrap();
    assert_eq!(failed.state, State::Failed);
    assert_eq!(failed.rsp_code.as_deref(), Some("E902"));
    assert_eq!(s.db.state("G-SCR-RES-3"), Some(State::Unknown));
    assert_eq!(s.core().bookings("G-SCR-RES-1"), 1, "resolve never POSTs");
    assert_eq!(s.core().bookings("G-SCR-RES-2"), 0, "resolve never POSTs");
}

#[test]
fn resolve_passes_arguments_through_and_json_stays_parseable() {
    let s = Scene::new()
        .row(RowSpec::unknown(&msg("G-SCR-JSON", 500, "dry run")).age(HOUR))
        .build();
    // --dry-run makes no inquiry, so no core is needed.
    let run = run_script(
        "resolve.sh",
        &["--dry-run", "--json"],
        &[("LEDGER_DB", s.db.arg()), ("CORE_URL", &dead_url())],
    );
    run.expect_code(EXIT_SETTLED);
    let v = run.json();
    assert_eq!(v["tool"], "resolve");
    assert_eq!(v["exit_code"], EXIT_SETTLED);
    assert!(run.stdout().contains("G-SCR-JSON"), "{}", run.stdout());
    assert_stamped(&run);
    assert_eq!(
        s.db.state("G-SCR-JSON"),
        Some(State::Unknown),
        "dry run writes nothing"
    );
}

#[test]
fn reprocess_resends_a_failed_e902_row_once() {
    let s = Scene::new()
        .core(&[])
        .row(RowSpec::failed(&msg("G-SCR-REP", 2500, "core was down")).age(MINUTE))
        .build();
    let env = [("LEDGER_DB", s.db.arg()), ("CORE_URL", &s.core().url())];

    let run = run_script("reprocess.sh", &[], &env);
    run.expect_code(EXIT_SETTLED);
    assert!(
        run.stdout()
            .starts_with("reprocess: 1 examined, 1 sent, 1 DONE"),
        "{}",
        run.stdout()
    );
    assert_not_stamped(run.stdout());
    assert_stamped(&run);
    let row = s.db.row("G-SCR-REP").unwrap();
    assert_eq!(row.state, State::Done);
    assert_eq!(row.rsp_code.as_deref(), Some("0000"));
    assert_eq!(row.attempts, Some(2));
    assert_eq!(s.core().bookings("G-SCR-REP"), 1);

    // A second run finds nothing to send.
    run_script("reprocess.sh", &[], &env).expect_code(EXIT_SETTLED);
    assert_eq!(s.core().bookings("G-SCR-REP"), 1);
}

#[test]
fn reprocess_passes_exit_3_through_when_the_core_is_down() {
    let s = Scene::new()
        .row(RowSpec::failed(&msg("G-SCR-DOWN", 2600, "still down")).age(MINUTE))
        .build();
    let dead = dead_url();
    let env = [("LEDGER_DB", s.db.arg()), ("CORE_URL", &dead)];

    let run = run_script("reprocess.sh", &[], &env);
    run.expect_code(EXIT_LEFT);
    assert!(
        run.stdout().starts_with("reprocess: 1 examined"),
        "{}",
        run.stdout()
    );
    assert_stamped(&run);
    assert!(
        run.stderr().contains("reprocess exited 3"),
        "{}",
        run.stderr()
    );
    let row = s.db.row("G-SCR-DOWN").unwrap();
    assert_eq!(row.state, State::Failed);
    assert_eq!(row.rsp_code.as_deref(), Some("E902"));

    let run = run_script("reprocess.sh", &["--json"], &env);
    run.expect_code(EXIT_LEFT);
    let v = run.json();
    assert_eq!(v["tool"], "reprocess");
    assert_eq!(v["exit_code"], EXIT_LEFT);
}

#[test]
fn purge_deletes_old_done_rows_only_and_stdout_is_the_tools() {
    let s = Scene::new()
        .row(
            RowSpec::of(&msg("G-SCR-OLD", 100, ""), State::Done)
                .code("0000")
                .age(100 * DAY),
        )
        .row(
            RowSpec::new("G-SCR-NEW", State::Done)
                .code("0000")
                .age(2 * DAY),
        )
        .row(
            RowSpec::new("G-SCR-UNK", State::Unknown)
                .code("E901")
                .age(400 * DAY),
        )
        .build();
    let env = [("LEDGER_DB", s.db.arg())];

    // Byte for byte what the tool prints by itself (a multi-line, tab-separated listing).
    let direct = Run::new("purge", &["--db", s.db.arg(), "--days", "90", "--dry-run"]);
    direct.expect_code(EXIT_SETTLED);
    let dry = run_script("purge.sh", &["--dry-run"], &env);
    dry.expect_code(EXIT_SETTLED);
    assert_eq!(dry.stdout(), direct.stdout());
    assert!(dry.stdout().contains("G-SCR-OLD\tDONE"), "{}", dry.stdout());

    let run = run_script("purge.sh", &[], &env);
    run.expect_code(EXIT_SETTLED);
    assert!(run.stdout().starts_with("purge:"), "{}", run.stdout());
    assert_not_stamped(run.stdout());
    assert_stamped(&run);
    assert!(s.db.row("G-SCR-OLD").is_none());
    assert_eq!(s.db.state("G-SCR-NEW"), Some(State::Done));
    assert_eq!(s.db.state("G-SCR-UNK"), Some(State::Unknown));

    // PURGE_DAYS is honoured.
    let run = run_script(
        "purge.sh",
        &[],
        &[("LEDGER_DB", s.db.arg()), ("PURGE_DAYS", "1")],
    );
    run.expect_code(EXIT_SETTLED);
    assert!(s.db.row("G-SCR-NEW").is_none());
}

#[test]
fn relay_sh_execs_a_relay_that_answers_and_takes_its_signals() {
    let core = Core::start(&[]);
    let db = TempLedger::new();
    let mut relay = start_relay_sh(&[
        ("RELAY_DB", db.arg()),
        ("RELAY_LISTEN", "127.0.0.1:0"),
        ("RELAY_CORE", &core.url()),
        ("RELAY_READ_TIMEOUT_MS", "8000"),
    ]);
    // exec: the script's pid is now the relay itself.
    let exe = std::fs::read_link(format!("/proc/{}/exe", relay.pid())).unwrap();
    assert_eq!(exe, testkit::bin("relay"), "relay.sh must exec the relay");

    let m = msg("G-SCR-RELAY", 4200, "via relay.sh");
    let reply = call(&relay.addr, &m);
    assert_eq!(code(&reply), "0000");
    assert_eq!(core.bookings("G-SCR-RELAY"), 1);
    assert_eq!(db.state("G-SCR-RELAY"), Some(State::Done));

    let err = relay.stderr();
    let first = err.lines().next().unwrap_or_default();
    let (ts, rest) = first.split_once(' ').unwrap_or_default();
    assert!(is_timestamp(ts), "{first:?}");
    assert!(rest.starts_with("relay.sh: exec "), "{first:?}");
    assert!(rest.contains("listen 127.0.0.1:0"), "{first:?}");
    assert!(rest.contains("read-timeout 8000ms"), "{first:?}");
    assert!(rest.contains("max-connections 1024"), "{first:?}");

    // SIGTERM goes straight to the relay (it finishes in-flight work and exits 0).
    relay.signal("-TERM");
    let status = relay.wait_exit(Duration::from_secs(30));
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(i32::from(EXIT_SETTLED)),
        "{status:?}"
    );
}
