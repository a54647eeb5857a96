//! The operator wrappers in `scripts/`: each run as `bash scripts/X.sh` with a clean
//! environment plus the test's settings, against the freshly built binaries.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::util::{Run, Server};

/// The wrappers' exit code when another run holds the lock (EX_TEMPFAIL, `flock -E 75`).
pub const EXIT_LOCKED: u8 = 75;
/// The wrappers' exit code when the tool's binary is not found (as bash's own).
pub const EXIT_NOT_FOUND: u8 = 127;

/// Every variable a wrapper reads, removed from the inherited environment so that a
/// developer's shell cannot change what a test sees.
const SETTINGS: &[&str] = &[
    "LEDGER_DB",
    "CORE_URL",
    "LOCK_DIR",
    "RELAY_BIN_DIR",
    "RUST_LOG",
    "RESOLVE_MIN_AGE",
    "RESOLVE_STALE_SENT",
    "REPROCESS_MAX_ATTEMPTS",
    "REPROCESS_LIMIT",
    "PURGE_DAYS",
    "RESOLVE_DB",
    "RESOLVE_CORE",
    "REPROCESS_DB",
    "REPROCESS_CORE",
    "PURGE_DB",
    "RELAY_DB",
    "RELAY_LISTEN",
    "RELAY_CORE",
    "RELAY_CONNECT_TIMEOUT_MS",
    "RELAY_READ_TIMEOUT_MS",
    "RELAY_FRAME_TIMEOUT_MS",
    "RELAY_IDLE_TIMEOUT_SECS",
    "RELAY_MAX_CONNECTIONS",
    "RESOLVE_CONNECT_TIMEOUT_MS",
    "RESOLVE_READ_TIMEOUT_MS",
    "REPROCESS_CONNECT_TIMEOUT_MS",
    "REPROCESS_READ_TIMEOUT_MS",
    "RELAY_CORE_CA",
    "RELAY_CORE_CERT",
    "RELAY_CORE_KEY",
    "RESOLVE_CORE_CA",
    "RESOLVE_CORE_CERT",
    "RESOLVE_CORE_KEY",
    "REPROCESS_CORE_CA",
    "REPROCESS_CORE_CERT",
    "REPROCESS_CORE_KEY",
];

/// `bash scripts/<name> <args>` with a clean environment plus `env` (and `RELAY_BIN_DIR`
/// unless `env` sets it).
pub fn script_command(name: &str, args: &[&str], env: &[(&str, &str)]) -> Command {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scripts")
        .join(name);
    let mut cmd = Command::new("bash");
    cmd.arg(script).args(args);
    for var in SETTINGS {
        cmd.env_remove(var);
    }
    cmd.env("RELAY_BIN_DIR", testkit::spawn::bin_dir());
    cmd.envs(env.iter().copied());
    cmd
}

/// Runs a wrapper to its end (at most 60 s). Its argv in a failure message ends with the
/// environment it was given.
pub fn run_script(name: &str, args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut run = Run::command(script_command(name, args, env), Duration::from_secs(60));
    let env_shown: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v}")).collect();
    run.argv.push(format!("(env: {})", env_shown.join(" ")));
    run
}

/// `relay.sh` started as a service manager would: killed on drop.
pub fn start_relay_sh(env: &[(&str, &str)]) -> Server {
    Server::start(script_command("relay.sh", &[], env))
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ`
pub fn is_timestamp(s: &str) -> bool {
    matches_pattern(s, b"dddd-dd-ddTdd:dd:dd.dddZ")
}

fn matches_pattern(s: &str, pattern: &[u8]) -> bool {
    s.len() == pattern.len()
        && s.bytes().zip(pattern).all(|(c, &p)| match p {
            b'd' => c.is_ascii_digit(),
            p => c == p,
        })
}

fn stamped(line: &str) -> bool {
    line.split_once(' ').is_some_and(|(ts, _)| is_timestamp(ts))
}

/// The timestamps in `line`, with or without milliseconds (a tool's own log header included).
fn timestamps_in(line: &str) -> usize {
    line.split([' ', '[', ']'])
        .filter(|w| is_timestamp(w) || matches_pattern(w, b"dddd-dd-ddTdd:dd:ddZ"))
        .count()
}

/// Every stderr line starts with an ISO-8601 UTC timestamp and a space, and holds no other
/// (a tool's own log line keeps its timestamp, moved to the front, and gets none added).
pub fn assert_stamped(run: &Run) {
    let err = run.stderr();
    assert!(!err.is_empty(), "{:?}: no stderr at all", run.argv);
    for line in err.lines() {
        assert!(
            stamped(line),
            "{:?}: stderr line without timestamp: {line:?}\nstderr:\n{err}",
            run.argv
        );
        assert_eq!(
            timestamps_in(line),
            1,
            "{:?}: one timestamp a line: {line:?}",
            run.argv
        );
    }
}

/// The tool's stdout as it printed it: no timestamps added.
pub fn assert_not_stamped(stdout: &str) {
    for line in stdout.lines() {
        assert!(!stamped(line), "stdout must be untouched, got {line:?}");
    }
}

/// The wrapper's `running ...` log line, which shows the values the tool will use.
pub fn running_line(run: &Run) -> String {
    let err = run.stderr();
    err.lines()
        .find(|l| l.contains(": running "))
        .unwrap_or_else(|| panic!("{:?}: no 'running' line in stderr:\n{err}", run.argv))
        .to_string()
}

/// Holds an exclusive flock(2) on `path` (what flock(1) takes) until dropped.
pub fn hold_lock(path: &Path) -> File {
    let f = File::create(path).expect("create the lock file");
    f.lock().expect("flock");
    f
}

/// The wrapper's lock file for `tool` next to ledger `db`.
pub fn lock_file(db: &crate::util::TempLedger, tool: &str) -> PathBuf {
    PathBuf::from(format!("{}.{tool}.lock", db.arg()))
}
