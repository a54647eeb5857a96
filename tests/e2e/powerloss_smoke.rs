//! The power-loss sweep (`powerloss` on `lossyfs`, issue 43): the relay's SQLite ledger on a
//! file system that loses what was not synced, cut at a swept then a drawn k-th write or
//! sync, restarted, checked; and its negative control, the ledger at `synchronous=NORMAL`
//! (these debug binaries' test switch), which the same sweep must catch. Needs root and
//! `/dev/fuse`: elsewhere one line and a return, unless `REQUIRE_FUSE` is set (CI).

use std::process::Command;
use std::time::Duration;

use crate::util::*;

/// Far above the minute the sweep takes; only there so that a hang fails.
const LIMIT: Duration = Duration::from_secs(600);

/// Whether a FUSE file system can be mounted here (root and /dev/fuse), said once if not.
fn fuse_here() -> bool {
    use std::os::unix::fs::MetadataExt;
    // /proc/self belongs to the process's effective user.
    let root = std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0);
    let ok = root && std::path::Path::new("/dev/fuse").exists();
    if !ok {
        assert!(
            std::env::var_os("REQUIRE_FUSE").is_none(),
            "REQUIRE_FUSE is set, but FUSE cannot be mounted here (root: {root})"
        );
        eprintln!("skipped: the power-loss sweep needs root and /dev/fuse");
    }
    ok
}

fn powerloss(args: &[&str]) -> Run {
    let mut cmd = Command::new(testkit::bin("powerloss"));
    cmd.args(args);
    Run::command(cmd, LIMIT)
}

/// The sweep's 240 cuts (seed 43) in two processes side by side (`--part`: each round with the
/// crash point, mode and seed it has in the whole run), so that the sweep is not the
/// longest test of the binary; each half checked as the whole was, at half the counts.
#[test]
fn a_power_loss_sweep_finds_no_violation_first_half() {
    power_loss_sweep_part("0/2");
}

#[test]
fn a_power_loss_sweep_finds_no_violation_second_half() {
    power_loss_sweep_part("1/2");
}

fn power_loss_sweep_part(part: &str) {
    if !fuse_here() {
        return;
    }
    let run = powerloss(&["--rounds", "240", "--seed", "43", "--part", part]);
    let out = run.stdout();
    let report = format!("stdout:\n{out}\nstderr:\n{}", run.stderr());
    run.expect_code(EXIT_SETTLED);
    assert!(
        out.contains("powerloss: PASS (seed 43, 0 violations)"),
        "{report}"
    );
    let summary = out
        .lines()
        .find(|l| l.starts_with("powerloss: 120 rounds in "))
        .unwrap_or_else(|| panic!("no summary\n{report}"));
    // The cuts really cut: the relay was up at most of them, unsynced blocks and directory
    // operations were dropped, writes were torn, and backups taken before a cut restored.
    let number = |label: &str| -> u64 {
        let at = summary
            .find(label)
            .unwrap_or_else(|| panic!("{label}: {summary}"));
        summary[..at]
            .split(|c: char| !c.is_ascii_digit())
            .rfind(|w| !w.is_empty())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{label}: {summary}"))
    };
    assert!(number(" cuts)") >= 100, "{summary}");
    assert!(number(" crash points") >= 100, "{summary}");
    assert!(number(" requests") >= 2_500, "{summary}");
    assert!(number(" backups taken before a cut") >= 10, "{summary}");
    assert!(number(" of ") > 0, "blocks dropped: {summary}");
    assert!(number(" torn bytes") > 0, "{summary}");
}

#[test]
fn the_sweep_catches_a_ledger_that_does_not_sync_its_commits() {
    if !fuse_here() {
        return;
    }
    let run = powerloss(&[
        "--rounds",
        "60",
        "--seed",
        "43",
        "--unsafe-synchronous-normal",
    ]);
    let out = run.stdout();
    let report = format!("stdout:\n{out}\nstderr:\n{}", run.stderr());
    run.expect_code(EXIT_SETTLED);
    assert!(
        out.contains("powerloss: the negative control FAILED, as it must: round "),
        "{report}"
    );
    assert!(
        out.contains("a channel got 0000, and the ledger has no row")
            || out.contains("the core booked it, and the ledger has no row"),
        "{report}"
    );
}
