//! A short chaos run (the `chaos` binary, issue 4): 32 channels, relay SIGKILLs, a core
//! outage, resolve and reprocess alongside, then the checks. Must find no violation.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::util::*;

/// Far above the ~20 s the run takes; only there so that a hang fails instead of blocking
/// (at the limit the run gets SIGINT, so that it stops what it started).
const LIMIT: Duration = Duration::from_secs(180);

#[test]
fn a_short_chaos_run_finds_no_violation() {
    let mut cmd = Command::new(testkit::bin("chaos"));
    cmd.args(["--secs", "8", "--seed", "7", "--channels", "32"]);
    // A tmpfs spares the ledger's fsyncs (kills are survived all the same) and keeps the
    // settling short.
    if Path::new("/dev/shm").is_dir() {
        cmd.args(["--work-dir", "/dev/shm"]);
    }
    let run = Run::command(cmd, LIMIT);
    run.expect_code(EXIT_SETTLED);
    let stdout = run.stdout();
    let report = format!("stdout:\n{stdout}\nstderr:\n{}", run.stderr());

    // The run says what it did and what it checked.
    for figure in [
        "seed 7",
        "plan digest",
        "requests",
        "resends (same bytes)",
        "in-flight resends",
        "other-amount resends",
        "replies by code",
        "no reply",
        "relay kills",
        "core restarts",
        "core bookings",
        "ledger rows",
        "resolve runs",
        "reprocess runs",
        "settling",
        "(a) no GUID booked more than once",
        "(b) core bookings",
        "(c) every 0000",
        "(d) every GUID",
        "(e) every reply",
        "(f) after quiescing",
        "(g) relay and core never exit",
        "chaos: PASS",
    ] {
        assert!(
            stdout.contains(figure),
            "no {figure:?} in the output\n{report}"
        );
    }
    // The chaos really happened: the relay was killed, replies of several kinds came back.
    let kills: usize = number_after(stdout, "relay kills");
    assert!(kills >= 2, "{report}");
    let bookings: usize = number_after(stdout, "core bookings");
    assert!(bookings > 100, "{report}");
    for code in ["0000", "E901", "E903", "E904"] {
        let line = stdout
            .lines()
            .find(|l| l.contains("replies by code"))
            .unwrap_or_default();
        assert!(line.contains(code), "no {code} reply: {line}\n{report}");
    }
    // Nothing it started is left: its work dir was removed (no --keep, no violation).
    let work = stdout
        .lines()
        .find_map(|l| l.strip_prefix("chaos: work dir "))
        .expect("work dir line");
    assert!(!Path::new(work).exists(), "{work} left behind");
}

/// The first number after `label` on its line.
fn number_after(text: &str, label: &str) -> usize {
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with(label))
        .unwrap_or_else(|| panic!("no line {label:?}"));
    line[line.find(label).unwrap() + label.len()..]
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no number in {line:?}"))
}
