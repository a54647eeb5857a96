//! The operator wrappers in `scripts/` end to end: each run as `bash scripts/X.sh` with its
//! settings in the environment, against the real binaries (`RELAY_BIN_DIR`), a temp ledger
//! and a core simulator. Asserts exit codes passed through, stdout untouched, stderr
//! timestamped, and the lock that keeps two runs of one wrapper apart.

mod common;

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::*;
use ledger::State;
use ledger::core_client::{CoreClient, Outcome};
use ledger::wire;
use rusqlite::params;

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
];

/// The wrapper's documented exit code when another run holds the lock (EX_TEMPFAIL).
const EXIT_LOCKED: i32 = 75;

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scripts")
        .join(name)
}

/// The directory of the freshly built binaries.
fn bin_dir() -> String {
    bin("relay").parent().unwrap().to_str().unwrap().to_string()
}

/// `bash scripts/<name> <args>` with a clean environment plus `env` (and `RELAY_BIN_DIR`
/// unless `env` sets it), stdin closed.
fn script_command(name: &str, args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new("bash");
    cmd.arg(script(name)).args(args).stdin(Stdio::null());
    for var in SETTINGS {
        cmd.env_remove(var);
    }
    cmd.env("RELAY_BIN_DIR", bin_dir());
    cmd.envs(env.iter().copied());
    cmd
}

/// Runs a wrapper to completion (at most 60 s, then it is killed by its pid).
fn run_script(name: &str, args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut child = script_command(name, args, env)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run bash {name}: {e}"));
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = r.read_to_end(&mut buf);
            buf
        })
    };
    let out = drain(Box::new(child.stdout.take().unwrap()));
    let err = drain(Box::new(child.stderr.take().unwrap()));
    let mut status = None;
    let finished = eventually(Duration::from_secs(60), || {
        status = child.try_wait().unwrap();
        status.is_some()
    });
    if !finished {
        let _ = child.kill();
        let _ = child.wait();
        panic!("{name} {args:?} did not finish within 60 s");
    }
    let mut argv = vec![format!("scripts/{name}")];
    argv.extend(args.iter().map(|s| s.to_string()));
    let env_shown: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v}")).collect();
    argv.push(format!("(env: {})", env_shown.join(" ")));
    Run {
        argv,
        out: std::process::Output {
            status: status.unwrap(),
            stdout: out.join().unwrap(),
            stderr: err.join().unwrap(),
        },
    }
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ`
fn is_timestamp(s: &str) -> bool {
    const PATTERN: &[u8] = b"dddd-dd-ddTdd:dd:dd.dddZ";
    s.len() == PATTERN.len()
        && s.bytes().zip(PATTERN).all(|(c, &p)| match p {
            b'd' => c.is_ascii_digit(),
            p => c == p,
        })
}

/// Every stderr line starts with an ISO-8601 UTC timestamp and a space.
fn assert_stamped(run: &Run) {
    let err = run.stderr();
    assert!(!err.is_empty(), "{:?}: no stderr at all", run.argv);
    for line in err.lines() {
        let stamped = line.split_once(' ').is_some_and(|(ts, _)| is_timestamp(ts));
        assert!(
            stamped,
            "{:?}: stderr line without timestamp: {line:?}\nstderr:\n{err}",
            run.argv
        );
    }
}

/// The tool's stdout as it printed it: no timestamps added.
fn assert_not_stamped(stdout: &str) {
    for line in stdout.lines() {
        let stamped = line.split_once(' ').is_some_and(|(ts, _)| is_timestamp(ts));
        assert!(!stamped, "stdout must be untouched, got {line:?}");
    }
}

/// A ledger row made by hand, `age` (an SQLite modifier such as `-1 hour`) old.
fn insert_row(
    db: &Db,
    guid: &str,
    state: &str,
    rsp_code: Option<&str>,
    request: Option<&[u8]>,
    attempts: i64,
    age: &str,
) {
    ledger::Ledger::open(&db.path)
        .unwrap()
        .connection()
        .execute(
            "INSERT INTO tx (guid, tx_code, state, rsp_code, request, attempts, updated_at)
             VALUES (?1, 'TRNF', ?2, ?3, ?4, ?5, datetime('now', ?6))",
            params![guid, state, rsp_code, request, attempts, age],
        )
        .unwrap();
}

/// A core URL where nothing listens (connections refused): the core is down.
fn core_down_url() -> String {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    format!("http://127.0.0.1:{port}")
}

/// Books request `m` at the core directly, as if an earlier send had reached it.
fn book_at_core(core: &Server, m: &[u8]) {
    let client =
        CoreClient::new(&core.url(), Duration::from_secs(5), Duration::from_secs(10)).unwrap();
    let t = wire::parse_request(m).unwrap();
    assert!(matches!(client.post_transfer(&t), Outcome::Booked(_)));
}

/// Holds an exclusive flock(2) on `path` (what flock(1) takes) until dropped.
fn hold_lock(path: &Path) -> File {
    let f = File::create(path).unwrap();
    f.lock().unwrap();
    f
}

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
            run.expect_code(0);
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
        run.expect_code(2);
        assert!(
            run.stderr().contains("LEDGER_DB is not set"),
            "{}",
            run.stderr()
        );
        assert_stamped(&run);
        assert_eq!(run.stdout(), "");
    }
    let run = run_script("relay.sh", &[], &[]);
    run.expect_code(2);
    assert!(
        run.stderr().contains("RELAY_DB is not set"),
        "{}",
        run.stderr()
    );
    assert_stamped(&run);
}

#[test]
fn a_malformed_setting_is_refused_before_the_tool_runs() {
    let db = Db::new();
    for (name, var) in [
        ("purge.sh", "PURGE_DAYS"),
        ("resolve.sh", "RESOLVE_MIN_AGE"),
        ("reprocess.sh", "REPROCESS_MAX_ATTEMPTS"),
        ("reprocess.sh", "REPROCESS_LIMIT"),
    ] {
        let run = run_script(name, &[], &[("LEDGER_DB", db.arg()), (var, "ten")]);
        run.expect_code(2);
        assert!(run.stderr().contains(var), "{}", run.stderr());
        assert!(!run.stderr().contains(": running "), "{}", run.stderr());
    }
    let run = run_script(
        "reprocess.sh",
        &[],
        &[("LEDGER_DB", db.arg()), ("REPROCESS_MAX_ATTEMPTS", "0")],
    );
    run.expect_code(2);
    let run = run_script(
        "relay.sh",
        &[],
        &[("RELAY_DB", db.arg()), ("RELAY_READ_TIMEOUT_MS", "5s")],
    );
    run.expect_code(2);
    assert!(
        run.stderr().contains("RELAY_READ_TIMEOUT_MS"),
        "{}",
        run.stderr()
    );
    assert!(!db.path.exists(), "no tool ran, so no ledger was created");
}

#[test]
fn resolve_settles_unknown_rows_and_passes_exit_0_through() {
    let core = coresim(&[]);
    let db = Db::new();
    let booked = msg("G-SCR-RES-1", 1200, "booked before the timeout");
    let never = msg("G-SCR-RES-2", 1300, "never reached the core");
    book_at_core(&core, &booked);
    insert_row(
        &db,
        "G-SCR-RES-1",
        "UNKNOWN",
        Some("E901"),
        Some(&booked),
        1,
        "-1 hour",
    );
    insert_row(
        &db,
        "G-SCR-RES-2",
        "UNKNOWN",
        Some("E901"),
        Some(&never),
        1,
        "-1 hour",
    );
    // Younger than the default RESOLVE_MIN_AGE (300 s): not touched.
    let young = msg("G-SCR-RES-3", 1400, "too young");
    insert_row(
        &db,
        "G-SCR-RES-3",
        "UNKNOWN",
        Some("E901"),
        Some(&young),
        1,
        "-10 seconds",
    );

    let run = run_script(
        "resolve.sh",
        &[],
        &[("LEDGER_DB", db.arg()), ("CORE_URL", &core.url())],
    );
    run.expect_code(0);
    let out = run.stdout();
    assert!(
        out.starts_with("resolve: 2 examined, 1 DONE, 1 FAILED, 0 left")
            && out.lines().count() == 1,
        "the tool's summary line, untouched: {out:?}"
    );
    assert_not_stamped(&out);
    assert_stamped(&run);
    assert!(
        run.stderr().contains("resolve.sh: resolve exited 0"),
        "{}",
        run.stderr()
    );

    let done = db.row("G-SCR-RES-1").unwrap();
    assert_eq!(done.state, State::Done);
    assert_eq!(done.rsp_code.as_deref(), Some("0000"));
    assert_eq!(done.response.as_ref().map(Vec::len), Some(90));
    let failed = db.row("G-SCR-RES-2").unwrap();
    assert_eq!(failed.state, State::Failed);
    assert_eq!(failed.rsp_code.as_deref(), Some("E902"));
    assert_eq!(db.state("G-SCR-RES-3"), Some(State::Unknown));
    assert_eq!(bookings(&core, "G-SCR-RES-1"), 1, "resolve never POSTs");
    assert_eq!(bookings(&core, "G-SCR-RES-2"), 0, "resolve never POSTs");
}

#[test]
fn resolve_passes_arguments_through_and_json_stays_parseable() {
    let db = Db::new();
    let m = msg("G-SCR-JSON", 500, "dry run");
    insert_row(
        &db,
        "G-SCR-JSON",
        "UNKNOWN",
        Some("E901"),
        Some(&m),
        1,
        "-1 hour",
    );
    // --dry-run makes no inquiry, so no core is needed.
    let run = run_script(
        "resolve.sh",
        &["--dry-run", "--json"],
        &[("LEDGER_DB", db.arg()), ("CORE_URL", &core_down_url())],
    );
    run.expect_code(0);
    let v: serde_json::Value = serde_json::from_str(run.stdout().trim_end())
        .unwrap_or_else(|e| panic!("stdout is not one JSON object: {e}\n{}", run.stdout()));
    assert_eq!(v["tool"], "resolve");
    assert_eq!(v["exit_code"], 0);
    assert!(run.stdout().contains("G-SCR-JSON"), "{}", run.stdout());
    assert_stamped(&run);
    assert_eq!(
        db.state("G-SCR-JSON"),
        Some(State::Unknown),
        "dry run writes nothing"
    );
}

#[test]
fn reprocess_resends_a_failed_e902_row_once() {
    let core = coresim(&[]);
    let db = Db::new();
    let m = msg("G-SCR-REP", 2500, "core was down");
    insert_row(
        &db,
        "G-SCR-REP",
        "FAILED",
        Some("E902"),
        Some(&m),
        1,
        "-1 minute",
    );

    let run = run_script(
        "reprocess.sh",
        &[],
        &[("LEDGER_DB", db.arg()), ("CORE_URL", &core.url())],
    );
    run.expect_code(0);
    assert!(
        run.stdout()
            .starts_with("reprocess: 1 examined, 1 sent, 1 DONE"),
        "{}",
        run.stdout()
    );
    assert_not_stamped(&run.stdout());
    assert_stamped(&run);
    let row = db.row("G-SCR-REP").unwrap();
    assert_eq!(row.state, State::Done);
    assert_eq!(row.rsp_code.as_deref(), Some("0000"));
    assert_eq!(row.attempts, Some(2));
    assert_eq!(bookings(&core, "G-SCR-REP"), 1);

    // A second run finds nothing to send.
    let again = run_script(
        "reprocess.sh",
        &[],
        &[("LEDGER_DB", db.arg()), ("CORE_URL", &core.url())],
    );
    again.expect_code(0);
    assert_eq!(bookings(&core, "G-SCR-REP"), 1);
}

#[test]
fn reprocess_passes_exit_3_through_when_the_core_is_down() {
    let db = Db::new();
    let m = msg("G-SCR-DOWN", 2600, "still down");
    insert_row(
        &db,
        "G-SCR-DOWN",
        "FAILED",
        Some("E902"),
        Some(&m),
        1,
        "-1 minute",
    );
    let env = [
        ("LEDGER_DB", db.arg()),
        ("CORE_URL", &core_down_url() as &str),
    ];

    let run = run_script("reprocess.sh", &[], &env);
    run.expect_code(3);
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
    let row = db.row("G-SCR-DOWN").unwrap();
    assert_eq!(row.state, State::Failed);
    assert_eq!(row.rsp_code.as_deref(), Some("E902"));

    let run = run_script("reprocess.sh", &["--json"], &env);
    run.expect_code(3);
    let v: serde_json::Value = serde_json::from_str(run.stdout().trim_end()).unwrap();
    assert_eq!(v["tool"], "reprocess");
    assert_eq!(v["exit_code"], 3);
}

#[test]
fn purge_deletes_old_done_rows_only_and_stdout_is_the_tools() {
    let db = Db::new();
    let old = msg("G-SCR-OLD", 100, "");
    insert_row(
        &db,
        "G-SCR-OLD",
        "DONE",
        Some("0000"),
        Some(&old),
        1,
        "-100 days",
    );
    insert_row(&db, "G-SCR-NEW", "DONE", Some("0000"), None, 1, "-2 days");
    insert_row(
        &db,
        "G-SCR-UNK",
        "UNKNOWN",
        Some("E901"),
        None,
        1,
        "-400 days",
    );

    // Byte for byte what the tool prints by itself (a multi-line, tab-separated listing).
    let direct = Run::new("purge", &["--db", db.arg(), "--days", "90", "--dry-run"]);
    direct.expect_code(0);
    let dry = run_script("purge.sh", &["--dry-run"], &[("LEDGER_DB", db.arg())]);
    dry.expect_code(0);
    assert_eq!(dry.stdout(), direct.stdout());
    assert!(dry.stdout().contains("G-SCR-OLD\tDONE"), "{}", dry.stdout());

    let run = run_script("purge.sh", &[], &[("LEDGER_DB", db.arg())]);
    run.expect_code(0);
    assert!(run.stdout().starts_with("purge:"), "{}", run.stdout());
    assert_not_stamped(&run.stdout());
    assert_stamped(&run);
    assert!(db.row("G-SCR-OLD").is_none());
    assert_eq!(db.state("G-SCR-NEW"), Some(State::Done));
    assert_eq!(db.state("G-SCR-UNK"), Some(State::Unknown));

    // PURGE_DAYS is honoured.
    let run = run_script(
        "purge.sh",
        &[],
        &[("LEDGER_DB", db.arg()), ("PURGE_DAYS", "1")],
    );
    run.expect_code(0);
    assert!(db.row("G-SCR-NEW").is_none());
}

#[test]
fn a_second_run_is_refused_while_the_lock_is_held() {
    let db = Db::new();
    insert_row(
        &db,
        "G-SCR-LOCK",
        "DONE",
        Some("0000"),
        None,
        1,
        "-100 days",
    );
    let lock_path = PathBuf::from(format!("{}.purge.lock", db.arg()));

    let held = hold_lock(&lock_path);
    let run = run_script("purge.sh", &[], &[("LEDGER_DB", db.arg())]);
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
        db.state("G-SCR-LOCK"),
        Some(State::Done),
        "nothing was purged"
    );

    // Another wrapper on the same ledger has its own lock.
    let other = run_script(
        "reprocess.sh",
        &[],
        &[("LEDGER_DB", db.arg()), ("CORE_URL", &core_down_url())],
    );
    other.expect_code(0);

    drop(held);
    let run = run_script("purge.sh", &[], &[("LEDGER_DB", db.arg())]);
    run.expect_code(0);
    assert!(db.row("G-SCR-LOCK").is_none());
}

#[test]
fn lock_dir_moves_the_lock_file() {
    let db = Db::new();
    let locks = tempfile::tempdir().unwrap();
    let m = msg("G-SCR-LDIR", 700, "");
    insert_row(
        &db,
        "G-SCR-LDIR",
        "UNKNOWN",
        Some("E901"),
        Some(&m),
        1,
        "-1 hour",
    );
    let lock_dir = locks.path().to_str().unwrap();
    let env = [
        ("LEDGER_DB", db.arg()),
        ("CORE_URL", &core_down_url() as &str),
        ("LOCK_DIR", lock_dir),
    ];

    let _held = hold_lock(&locks.path().join("ledger.db.resolve.lock"));
    let run = run_script("resolve.sh", &[], &env);
    run.expect_code(EXIT_LOCKED);
    assert_eq!(run.stdout(), "");
    assert!(!sibling(&db, "ledger.db.resolve.lock").exists());
}

#[test]
fn fatal_errors_and_a_missing_binary_have_their_codes() {
    let db = Db::new();
    let missing = db.dir.path().join("no-such-dir").join("ledger.db");
    let missing = missing.to_str().unwrap();

    // The tool cannot open the ledger: its exit 1 is passed through.
    let run = run_script(
        "purge.sh",
        &[],
        &[
            ("LEDGER_DB", missing),
            ("LOCK_DIR", db.dir.path().to_str().unwrap()),
        ],
    );
    run.expect_code(1);
    assert!(
        run.stderr().contains("purge: ledger") && run.stderr().contains("does not exist"),
        "{}",
        run.stderr()
    );
    assert_stamped(&run);

    // No place for the lock file next to the ledger: the wrapper's own fatal error.
    let run = run_script("purge.sh", &[], &[("LEDGER_DB", missing)]);
    run.expect_code(1);
    assert!(
        run.stderr().contains("cannot open lock file"),
        "{}",
        run.stderr()
    );

    // A bad flag: the tool's usage error, exit 2, passed through.
    let run = run_script("purge.sh", &["--no-such-flag"], &[("LEDGER_DB", db.arg())]);
    run.expect_code(2);
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
        run.expect_code(127);
        assert!(run.stderr().contains("RELAY_BIN_DIR"), "{}", run.stderr());
    }
}

/// The wrapper's `running ...` log line, which shows the values the tool will use.
fn running_line(run: &Run) -> String {
    let err = run.stderr();
    err.lines()
        .find(|l| l.contains(": running "))
        .unwrap_or_else(|| panic!("{:?}: no 'running' line in stderr:\n{err}", run.argv))
        .to_string()
}

/// A path in an existing directory where no ledger is: what a stale or wrong generic
/// setting points at. Any tool that opened it would fail (the tools never create one).
fn decoy_ledger(dir: &tempfile::TempDir) -> String {
    dir.path().join("not-this.db").to_str().unwrap().to_string()
}

#[test]
fn the_tools_own_variables_win_over_ledger_db_and_core_url() {
    let core = coresim(&[]);
    let decoys = tempfile::tempdir().unwrap();
    let decoy = decoy_ledger(&decoys);
    let dead = core_down_url();

    // resolve.sh: RESOLVE_DB and RESOLVE_CORE, set by the operator, are what the tool uses.
    let db = Db::new();
    let m = msg("G-SCR-OWN-RES", 1100, "own variables");
    book_at_core(&core, &m);
    insert_row(
        &db,
        "G-SCR-OWN-RES",
        "UNKNOWN",
        Some("E901"),
        Some(&m),
        1,
        "-1 hour",
    );
    let run = run_script(
        "resolve.sh",
        &[],
        &[
            ("LEDGER_DB", &decoy),
            ("RESOLVE_DB", db.arg()),
            ("CORE_URL", &dead),
            ("RESOLVE_CORE", &core.url()),
        ],
    );
    run.expect_code(0);
    let line = running_line(&run);
    assert!(
        line.contains(&format!("ledger {},", db.arg()))
            && line.contains(&format!("core {},", core.url())),
        "the log shows the values in effect: {line}"
    );
    assert_eq!(db.state("G-SCR-OWN-RES"), Some(State::Done));
    assert!(!Path::new(&decoy).exists());

    // reprocess.sh: REPROCESS_DB and REPROCESS_CORE likewise.
    let db = Db::new();
    let m = msg("G-SCR-OWN-REP", 1200, "own variables");
    insert_row(
        &db,
        "G-SCR-OWN-REP",
        "FAILED",
        Some("E902"),
        Some(&m),
        1,
        "-1 minute",
    );
    let run = run_script(
        "reprocess.sh",
        &[],
        &[
            ("LEDGER_DB", &decoy),
            ("REPROCESS_DB", db.arg()),
            ("CORE_URL", &dead),
            ("REPROCESS_CORE", &core.url()),
        ],
    );
    run.expect_code(0);
    let line = running_line(&run);
    assert!(
        line.contains(&format!("ledger {},", db.arg()))
            && line.contains(&format!("core {},", core.url())),
        "the log shows the values in effect: {line}"
    );
    assert_eq!(db.state("G-SCR-OWN-REP"), Some(State::Done));
    assert_eq!(bookings(&core, "G-SCR-OWN-REP"), 1);

    // purge.sh: PURGE_DB likewise.
    let db = Db::new();
    insert_row(
        &db,
        "G-SCR-OWN-PUR",
        "DONE",
        Some("0000"),
        None,
        1,
        "-100 days",
    );
    let run = run_script(
        "purge.sh",
        &[],
        &[("LEDGER_DB", &decoy), ("PURGE_DB", db.arg())],
    );
    run.expect_code(0);
    assert!(
        running_line(&run).contains(&format!("ledger {},", db.arg())),
        "{}",
        run.stderr()
    );
    assert!(db.row("G-SCR-OWN-PUR").is_none());

    // An empty tool variable counts as unset: the generic one applies.
    let db = Db::new();
    let m = msg("G-SCR-OWN-EMPTY", 1300, "generic variables");
    insert_row(
        &db,
        "G-SCR-OWN-EMPTY",
        "FAILED",
        Some("E902"),
        Some(&m),
        1,
        "-1 minute",
    );
    let run = run_script(
        "reprocess.sh",
        &[],
        &[
            ("LEDGER_DB", db.arg()),
            ("REPROCESS_DB", ""),
            ("CORE_URL", &core.url()),
            ("REPROCESS_CORE", ""),
        ],
    );
    run.expect_code(0);
    assert!(
        running_line(&run).contains(&format!("core {},", core.url())),
        "{}",
        run.stderr()
    );
    assert_eq!(db.state("G-SCR-OWN-EMPTY"), Some(State::Done));
}

#[test]
fn resolve_sh_ignores_resolve_stale_sent_and_settles_sent_rows_only_when_asked_by_argument() {
    let core = coresim(&[]);
    let db = Db::new();
    // Left SENT by a relay that died after the core booked it.
    let m = msg("G-SCR-STALE", 1500, "orphaned");
    book_at_core(&core, &m);
    insert_row(&db, "G-SCR-STALE", "SENT", None, Some(&m), 1, "-1 hour");
    let env = [
        ("LEDGER_DB", db.arg()),
        ("CORE_URL", &core.url() as &str),
        ("RESOLVE_STALE_SENT", "600"),
    ];

    let run = run_script("resolve.sh", &[], &env);
    run.expect_code(0);
    assert_eq!(
        db.state("G-SCR-STALE"),
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
            ("LEDGER_DB", db.arg()),
            ("CORE_URL", &core.url()),
            ("RESOLVE_STALE_SENT", "ten"),
        ],
    );
    run.expect_code(0);
    assert!(run.stderr().contains("ignored"), "{}", run.stderr());
    assert_eq!(db.state("G-SCR-STALE"), Some(State::Sent));

    // Asked on the command line, the same row is settled.
    let run = run_script("resolve.sh", &["--stale-sent", "600"], &env);
    run.expect_code(0);
    assert!(
        running_line(&run).contains("stale-sent 600"),
        "{}",
        run.stderr()
    );
    let row = db.row("G-SCR-STALE").unwrap();
    assert_eq!(row.state, State::Done);
    assert_eq!(row.rsp_code.as_deref(), Some("0000"));
    assert_eq!(bookings(&core, "G-SCR-STALE"), 1, "resolve never POSTs");
}

#[test]
fn the_lock_is_on_the_ledger_the_tool_opens_however_it_was_named() {
    let core = coresim(&["--slow-ms", "3000"]);
    // `a` is what LEDGER_DB says in one crontab; `b` is the ledger actually used.
    let a = Db::new();
    let b = Db::new();
    let m = msg("G-SCR-ROUTE", 1700, "SLOW: holds the lock a while");
    insert_row(
        &b,
        "G-SCR-ROUTE",
        "FAILED",
        Some("E902"),
        Some(&m),
        1,
        "-1 minute",
    );
    let (a_path, b_path, url) = (a.arg().to_string(), b.arg().to_string(), core.url());
    let first = std::thread::spawn(move || {
        run_script(
            "reprocess.sh",
            &["--db", &b_path],
            &[("LEDGER_DB", &a_path), ("CORE_URL", &url)],
        )
    });
    // Claimed (FAILED -> SENT): the tool runs, so the wrapper holds its lock, and the
    // core takes 3 s to answer.
    assert!(
        eventually(Duration::from_secs(20), || b.state("G-SCR-ROUTE")
            == Some(State::Sent)),
        "the first run did not start"
    );

    let url = core.url();
    let refused = |args: &[&str], env: &[(&str, &str)]| {
        let mut env = env.to_vec();
        env.push(("CORE_URL", &url));
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
    run.expect_code(0);
    assert!(
        running_line(&run).contains(&format!("ledger {},", b.arg())),
        "{}",
        run.stderr()
    );
    assert_eq!(b.state("G-SCR-ROUTE"), Some(State::Done));
    assert_eq!(bookings(&core, "G-SCR-ROUTE"), 1);
    assert!(sibling(&b, "ledger.db.reprocess.lock").exists());
    assert!(
        !sibling(&a, "ledger.db.reprocess.lock").exists(),
        "no lock next to a ledger the tool did not open"
    );
    assert!(
        !a.path.exists(),
        "the ledger named by LEDGER_DB was never opened"
    );

    // The other way round: a run via LEDGER_DB=b holds it, one via --db b waits its turn.
    let _held = hold_lock(&sibling(&b, "ledger.db.reprocess.lock"));
    let run = run_script(
        "reprocess.sh",
        &["--db", b.arg()],
        &[("LEDGER_DB", a.arg()), ("CORE_URL", &core.url())],
    );
    run.expect_code(EXIT_LOCKED);
    assert_eq!(run.stdout(), "");
}

#[test]
fn a_failing_flock_is_a_fatal_error_not_a_held_lock() {
    let db = Db::new();
    insert_row(
        &db,
        "G-SCR-FLOCK",
        "DONE",
        Some("0000"),
        None,
        1,
        "-100 days",
    );
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
        let run = run_script("purge.sh", &[], &[("LEDGER_DB", db.arg()), ("PATH", &path)]);
        run.expect_code(1);
        let err = run.stderr();
        assert!(
            err.contains(&format!("failed (exit {code})")) && err.contains("invalid option"),
            "says flock failed, with its message:\n{err}"
        );
        assert!(!err.contains("another run holds"), "{err}");
        assert_stamped(&run);
        assert_eq!(run.stdout(), "", "the tool did not run");
        assert_eq!(db.state("G-SCR-FLOCK"), Some(State::Done));
    }
}

#[test]
fn purge_days_0_is_refused_unless_force_is_passed() {
    let db = Db::new();
    insert_row(
        &db,
        "G-SCR-ZERO",
        "DONE",
        Some("0000"),
        None,
        1,
        "-1 minute",
    );
    for days in ["0", "00"] {
        let run = run_script(
            "purge.sh",
            &[],
            &[("LEDGER_DB", db.arg()), ("PURGE_DAYS", days)],
        );
        run.expect_code(2);
        assert!(run.stderr().contains("PURGE_DAYS"), "{}", run.stderr());
        assert!(run.stderr().contains("--force"), "{}", run.stderr());
        assert!(!run.stderr().contains(": running "), "{}", run.stderr());
        assert_stamped(&run);
        assert_eq!(db.state("G-SCR-ZERO"), Some(State::Done), "nothing purged");
    }

    // Meant: --force on the command line lets 0 through (and the tool accepts it).
    let run = run_script(
        "purge.sh",
        &["--force"],
        &[("LEDGER_DB", db.arg()), ("PURGE_DAYS", "0")],
    );
    run.expect_code(0);
    assert!(running_line(&run).contains("days 0"), "{}", run.stderr());
    assert!(db.row("G-SCR-ZERO").is_none());
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
            "UNKNOWN",
            Some("E901"),
        ),
        (
            "reprocess.sh",
            "REPROCESS_CONNECT_TIMEOUT_MS",
            "REPROCESS_READ_TIMEOUT_MS",
            "FAILED",
            Some("E902"),
        ),
    ];
    for (name, connect_var, read_var, state, rsp_code) in cases {
        let db = Db::new();
        let guid = format!("G-SCR-TMO-{}", &name[..3].to_uppercase());
        let m = msg(&guid, 1900, "silent core");
        insert_row(&db, &guid, state, rsp_code, Some(&m), 1, "-1 hour");
        let started = Instant::now();
        let run = run_script(
            name,
            &[],
            &[
                ("LEDGER_DB", db.arg()),
                ("CORE_URL", &silent_url),
                (connect_var, ""),
                (read_var, "300"),
            ],
        );
        let took = started.elapsed();
        run.expect_code(3);
        assert!(
            running_line(&run).contains("read-timeout-ms 300"),
            "{}",
            run.stderr()
        );
        assert!(
            took < Duration::from_secs(4),
            "{name}: {read_var}=300 must bound the call (the default is 5000 ms), took {took:?}"
        );
        assert_eq!(
            db.state(&guid),
            Some(State::Unknown),
            "{name}: the core may have it"
        );
    }
}

/// `relay.sh` spawned like a service manager would: killed by its pid on drop.
struct ScriptServer {
    child: Child,
    addr: String,
    stderr_path: PathBuf,
    _dir: tempfile::TempDir,
}

impl ScriptServer {
    fn spawn(name: &str, env: &[(&str, &str)]) -> ScriptServer {
        let dir = tempfile::tempdir().unwrap();
        let stderr_path = dir.path().join("stderr");
        let mut child = script_command(name, &[], env)
            .stdout(Stdio::piped())
            .stderr(File::create(&stderr_path).unwrap())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            let _ = tx.send(lines.next());
            for _ in lines {} // keep draining
        });
        let mut server = ScriptServer {
            child,
            addr: String::new(),
            stderr_path,
            _dir: dir,
        };
        match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(Some(Ok(line))) if line.starts_with("listening on ") => {
                server.addr = line["listening on ".len()..].to_string();
            }
            other => panic!(
                "{name} did not announce itself: {other:?}\nstderr:\n{}",
                server.stderr()
            ),
        }
        server
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }

    fn wait_exit(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Some(st) = self.child.try_wait().unwrap() {
                return Some(st);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for ScriptServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("--- relay.sh stderr:\n{}", self.stderr());
        }
    }
}

#[test]
fn relay_sh_execs_a_relay_that_answers_and_takes_its_signals() {
    let core = coresim(&[]);
    let db = Db::new();
    let mut relay = ScriptServer::spawn(
        "relay.sh",
        &[
            ("RELAY_DB", db.arg()),
            ("RELAY_LISTEN", "127.0.0.1:0"),
            ("RELAY_CORE", &core.url()),
            ("RELAY_READ_TIMEOUT_MS", "8000"),
        ],
    );
    // exec: the script's pid is now the relay itself.
    let exe = std::fs::read_link(format!("/proc/{}/exe", relay.child.id())).unwrap();
    assert_eq!(exe, bin("relay"), "relay.sh must exec the relay");

    let m = msg("G-SCR-RELAY", 4200, "via relay.sh");
    let reply = call(&relay.addr, &m);
    assert_eq!(code(&reply), "0000");
    assert_eq!(bookings(&core, "G-SCR-RELAY"), 1);
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
    let kill = Command::new("kill")
        .args(["-TERM", &relay.child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let status = relay.wait_exit(Duration::from_secs(30));
    assert_eq!(status.and_then(|s| s.code()), Some(0), "{status:?}");
}
