//! What the fault tests share, on top of `testkit`: the processes (core simulator, relay),
//! timed channel calls, the ledger's rows read straight from the server, and the check that
//! a fault left nothing wrong behind.

use std::collections::HashMap;
use std::fs::File;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use testkit::pg::{Server, Setup};
use testkit::{Chan, CoreHttp, bin, spawn_listening};
use wire::{self, Transfer};

/// The longest a request may take while the database fails: the relay's client-side
/// deadline for one ledger operation (5 s) plus what the test's own timing adds.
pub const CALL_LIMIT: Duration = Duration::from_millis(6500);
/// How soon after the server is back (up, thawed, reachable) a new transfer must be booked.
pub const RECOVERY_LIMIT: Duration = Duration::from_secs(2);
/// How long a channel waits for a reply before the test calls it a hang.
const REPLY_WAIT: Duration = Duration::from_secs(30);
/// How long a server may take to announce itself.
const START_LIMIT: Duration = Duration::from_secs(30);

/// A password the tests' trusting servers ignore, put in ledger URLs to see that no output
/// ever shows it.
pub const PASSWORD: &str = "pw-N0t-F0r-Logs";

/// The ledger URL `db` (user `postgres`) with `PASSWORD` in it.
pub fn with_password(db: &str) -> String {
    db.replacen(
        "postgres://postgres@",
        &format!("postgres://postgres:{PASSWORD}@"),
        1,
    )
}

/// A private cluster, or `None` (after one line) when PostgreSQL is not installed and
/// `REQUIRE_POSTGRES` is unset.
pub fn own_server(setup: Option<&Setup>) -> Option<Server> {
    Server::own_or_skip(setup)
}

/// A process started by a test, killed on drop; its stderr (kept in a file) is printed if
/// the test is failing.
pub struct Proc {
    pub addr: String,
    argv: Vec<String>,
    child: Child,
    stderr_path: PathBuf,
    _dir: tempfile::TempDir,
}

impl Proc {
    /// The workspace binary `name` with `args`, once it announced `listening on`.
    pub fn spawn(name: &str, args: &[&str]) -> Proc {
        let mut cmd = Command::new(bin(name));
        cmd.args(args);
        let argv = argv_of(&cmd);
        let dir = tempfile::tempdir().expect("temp dir");
        let stderr_path = dir.path().join("stderr");
        cmd.stderr(File::create(&stderr_path).expect("stderr file"));
        match spawn_listening(&mut cmd, START_LIMIT) {
            Ok((child, addr)) => Proc {
                addr,
                argv,
                child,
                stderr_path,
                _dir: dir,
            },
            Err(e) => panic!(
                "{e:#}\nargv: {argv:?}\nstderr:\n{}",
                std::fs::read_to_string(&stderr_path).unwrap_or_default()
            ),
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }

    /// The process's thread count (`Threads:` in /proc/PID/status).
    pub fn threads(&self) -> usize {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("the process's /proc status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("Threads:"))
            .and_then(|n| n.trim().parse().ok())
            .expect("a Threads: line")
    }

    /// Waits (up to 10 s) until the thread count is back to at most `base` + 1: the
    /// connection threads left waiting on a failed database have ended (their statements
    /// answered, committed or not). The count then.
    pub fn threads_back_to(&self, base: usize) -> usize {
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.threads() > base + 1 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        self.threads()
    }

    /// Still running (not exited).
    pub fn alive(&mut self) -> bool {
        self.child.try_wait().expect("try_wait").is_none()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("--- {:?}\n--- stderr:\n{}", self.argv, self.stderr());
        }
    }
}

fn argv_of(cmd: &Command) -> Vec<String> {
    std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|a| a.to_string_lossy().into_owned())
        .collect()
}

/// A core simulator on a free port, and a client for its `/_stats`.
pub fn coresim() -> (Proc, CoreHttp) {
    let p = Proc::spawn("coresim", &["--listen", "127.0.0.1:0"]);
    let http = CoreHttp::new(&p.url(), Duration::from_secs(10));
    (p, http)
}

/// A relay on a free port, its ledger at `db`, in front of `core`.
pub fn relay(db: &str, core: &str) -> Proc {
    Proc::spawn(
        "relay",
        &["--db", db, "--listen", "127.0.0.1:0", "--core", core],
    )
}

/// How a relay that was expected not to start ended.
#[derive(Debug)]
pub struct Refused {
    pub status: Option<ExitStatus>,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

/// Starts a relay on `db` and waits up to `limit` for it to exit (it is killed after that).
pub fn relay_refusing(db: &str, core: &str, limit: Duration) -> Refused {
    let dir = tempfile::tempdir().expect("temp dir");
    let (out, err) = (dir.path().join("stdout"), dir.path().join("stderr"));
    let started = Instant::now();
    let mut child = Command::new(bin("relay"))
        .args(["--db", db, "--listen", "127.0.0.1:0", "--core", core])
        .stdin(Stdio::null())
        .stdout(File::create(&out).expect("stdout file"))
        .stderr(File::create(&err).expect("stderr file"))
        .spawn()
        .expect("spawn relay");
    let mut status = None;
    while started.elapsed() < limit {
        if let Some(st) = child.try_wait().expect("try_wait") {
            status = Some(st);
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let elapsed = started.elapsed();
    if status.is_none() {
        let _ = child.kill();
    }
    let _ = child.wait();
    Refused {
        status,
        stdout: std::fs::read_to_string(&out).unwrap_or_default(),
        stderr: std::fs::read_to_string(&err).unwrap_or_default(),
        elapsed,
    }
}

/// The relay refused to start with one line on stderr, exit 1, `secret` (its password) not
/// shown.
pub fn assert_refused(r: &Refused, what: &str, secret: &str) {
    let lines: Vec<&str> = r.stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(
        r.status.and_then(|s| s.code()),
        Some(1),
        "{what}: the relay did not exit 1: {r:?}"
    );
    assert_eq!(lines.len(), 1, "{what}: not one line: {r:?}");
    assert!(lines[0].starts_with("relay: "), "{what}: {r:?}");
    assert!(
        !r.stderr.contains(secret) && !r.stdout.contains(secret),
        "{what}: the password is shown: {r:?}"
    );
    assert!(
        r.stdout.is_empty(),
        "{what}: the relay announced itself: {r:?}"
    );
}

/// A GUID no other call of this process uses: `prefix` and a counter.
pub fn guid(prefix: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    )
}

/// A valid request message for `guid`.
pub fn msg(guid: &str) -> Vec<u8> {
    wire::encode_request(&Transfer {
        guid: guid.into(),
        from_account: "00000000000001".into(),
        to_account: "00000000000002".into(),
        amount: 1250,
        memo: "fault test".into(),
    })
    .expect("a valid request")
}

/// One request on a fresh channel connection, timed.
#[derive(Debug, Clone)]
pub struct Call {
    pub guid: String,
    /// The reply's result code, or why there was none (`no reply: …`).
    pub code: String,
    pub started: Instant,
    pub elapsed: Duration,
}

impl Call {
    pub fn ended(&self) -> Instant {
        self.started + self.elapsed
    }
}

/// Sends a new transfer for `guid` and waits (up to 30 s) for its reply.
pub fn call(relay: &str, guid: &str) -> Call {
    let m = msg(guid);
    let started = Instant::now();
    let reply = Chan::connect(relay, REPLY_WAIT).and_then(|mut c| c.call(&m));
    let elapsed = started.elapsed();
    let code = match reply {
        Ok(r) => String::from_utf8_lossy(r.get(41..45).unwrap_or(&r)).into_owned(),
        Err(e) => format!("no reply: {e}"),
    };
    Call {
        guid: guid.to_string(),
        code,
        started,
        elapsed,
    }
}

/// Asserts a request made while the database was failing: `E905`, within `CALL_LIMIT`.
pub fn assert_e905_in_time(c: &Call, what: &str) {
    assert_eq!(c.code, "E905", "{what}: {} answered {:?}", c.guid, c.code);
    assert!(
        c.elapsed <= CALL_LIMIT,
        "{what}: {} took {:?} (limit {CALL_LIMIT:?})",
        c.guid,
        c.elapsed
    );
}

/// New transfers, one after another, until one is booked (`0000`) or `limit` passes; every
/// call made, the booked one last.
pub fn until_booked(relay: &str, prefix: &str, limit: Duration) -> Vec<Call> {
    let start = Instant::now();
    let mut calls = Vec::new();
    loop {
        let c = call(relay, &guid(prefix));
        let ok = c.code == "0000";
        calls.push(c);
        if ok || start.elapsed() > limit {
            return calls;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Milliseconds, for the printed figures.
pub fn ms(d: Duration) -> u128 {
    d.as_millis()
}

/// The ledger's rows, read straight from the server (not through the product), on one
/// connection made when first needed.
pub struct Rows {
    url: String,
    client: Mutex<Option<postgres::Client>>,
}

/// A row's columns the checks look at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowView {
    pub state: String,
    pub rsp_code: Option<String>,
    pub attempts: i32,
}

impl Rows {
    /// `url`: the ledger's URL as the tests' superuser may use it without TLS (the schema in
    /// its `options`).
    pub fn new(url: &str) -> Rows {
        Rows {
            url: url.to_string(),
            client: Mutex::new(None),
        }
    }

    /// `f` on the connection; once more on a new one if the server closed it meanwhile
    /// (restarted).
    pub fn with<T>(&self, f: impl Fn(&mut postgres::Client) -> Result<T, postgres::Error>) -> T {
        let mut held = self.client.lock().unwrap_or_else(|e| e.into_inner());
        let mut last = None;
        for _ in 0..2 {
            if held.as_ref().is_none_or(|c| c.is_closed()) {
                *held = Some(
                    postgres::Client::connect(&self.url, postgres::NoTls)
                        .unwrap_or_else(|e| panic!("cannot read the ledger: {e}")),
                );
            }
            match f(held.as_mut().expect("a client")) {
                Ok(v) => return v,
                Err(e) if e.as_db_error().is_none() => {
                    *held = None;
                    last = Some(e);
                }
                Err(e) => panic!("ledger query: {e}"),
            }
        }
        panic!("ledger query: {}", last.expect("an error"))
    }

    pub fn row(&self, guid: &str) -> Option<RowView> {
        self.with(|c| {
            c.query_opt(
                "SELECT state, rsp_code, attempts FROM tx WHERE guid = $1",
                &[&guid],
            )
        })
        .map(|r| RowView {
            state: r.get(0),
            rsp_code: r.get(1),
            attempts: r.get(2),
        })
    }

    /// Moves SENT rows of `guids` back in time, past resolve's stale-sent floor (60 s), as if
    /// their relay had given up long ago. The number moved.
    pub fn age_sent(&self, guids: &[String]) -> u64 {
        self.with(|c| {
            c.execute(
                "UPDATE tx SET updated_at = now() - interval '120 seconds' \
                 WHERE guid = ANY($1) AND state = 'SENT'",
                &[&guids],
            )
        })
    }
}

/// The core simulator's booking counts per GUID.
pub fn bookings(core: &CoreHttp) -> HashMap<String, u64> {
    let stats = core.stats().expect("the simulator's /_stats");
    stats["by_guid"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(g, n)| (g.clone(), n.as_u64().unwrap_or(0)))
                .collect()
        })
        .unwrap_or_default()
}

/// What a fault left behind, as the check found it.
#[derive(Debug, Default)]
pub struct Aftermath {
    pub booked: usize,
    pub e905: usize,
    /// `E905` GUIDs that had a row (`SENT`: a claim that committed after its deadline).
    pub e905_rows: Vec<(String, RowView)>,
    /// What a resend got before resolve settled a `SENT` row (`E903`: in flight).
    pub resent_before_settling: Vec<(String, String)>,
    /// `E905` GUIDs settled by `resolve --stale-sent` before their resend.
    pub settled: u64,
}

impl std::fmt::Display for Aftermath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let left: Vec<String> = self
            .e905_rows
            .iter()
            .map(|(g, r)| format!("{g} {}/{}", r.state, r.attempts))
            .collect();
        write!(
            f,
            "{} booked, {} E905; E905 GUIDs with a row: {left:?}, resent before settling: \
             {:?}; {} settled by resolve --stale-sent; every E905 GUID then resent and booked \
             once",
            self.booked, self.e905, self.resent_before_settling, self.settled
        )
    }
}

/// The check after a fault: every call was answered `0000` or `E905`; no GUID is booked
/// twice; a `0000` GUID is booked once with a `DONE` row; an `E905` GUID was never sent to
/// the core and has no row or a `SENT`/`FAILED` one. Then each `E905` GUID is settled
/// (`resolve --stale-sent` for a `SENT` row) and resent: `0000`, booked once.
pub fn check_aftermath(
    calls: &[Call],
    relay: &str,
    db: &str,
    rows: &Rows,
    core: &CoreHttp,
    core_url: &str,
) -> Aftermath {
    let mut a = Aftermath::default();
    let counts = bookings(core);
    for (g, n) in &counts {
        assert!(*n <= 1, "{g} booked {n} times");
    }
    let mut to_settle = Vec::new();
    for c in calls {
        let n = counts.get(&c.guid).copied().unwrap_or(0);
        let row = rows.row(&c.guid);
        match c.code.as_str() {
            "0000" => {
                a.booked += 1;
                assert_eq!(n, 1, "{} answered 0000 but booked {n} times", c.guid);
                let row = row.unwrap_or_else(|| panic!("{} answered 0000 has no row", c.guid));
                assert_eq!(
                    (row.state.as_str(), row.rsp_code.as_deref()),
                    ("DONE", Some("0000")),
                    "{}",
                    c.guid
                );
            }
            "E905" => {
                a.e905 += 1;
                assert_eq!(n, 0, "{} answered E905 but the core booked it", c.guid);
                if let Some(row) = row {
                    assert!(
                        row.state == "SENT" || row.state == "FAILED",
                        "{} answered E905 has a row {row:?}",
                        c.guid
                    );
                    a.e905_rows.push((c.guid.clone(), row));
                }
                to_settle.push(c.guid.clone());
            }
            other => panic!("{} answered {other:?} ({:?})", c.guid, c.elapsed),
        }
    }
    // A SENT row left by a claim that committed after its deadline holds its GUID "in
    // flight" until resolve --stale-sent settles it.
    for (g, row) in &a.e905_rows {
        if row.state == "SENT" {
            let c = call(relay, g);
            assert_eq!(c.code, "E903", "resend of {g} while its row is SENT");
            a.resent_before_settling.push((g.clone(), c.code));
        }
    }
    if rows.age_sent(&to_settle) > 0 {
        let out = Command::new(bin("resolve"))
            .args(["--db", db, "--core", core_url, "--min-age", "60"])
            .args(["--stale-sent", "60"])
            .output()
            .expect("run resolve");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            !format!("{stdout}{}", String::from_utf8_lossy(&out.stderr)).contains(PASSWORD),
            "resolve shows the password"
        );
        assert!(
            out.status.success(),
            "resolve: {:?}\n{stdout}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        a.settled = a
            .e905_rows
            .iter()
            .filter(|(_, r)| r.state == "SENT")
            .count() as u64;
        for g in &to_settle {
            let row = rows.row(g);
            assert!(
                row.as_ref().is_none_or(|r| r.state == "FAILED"),
                "{g} after resolve: {row:?}"
            );
        }
    }
    for g in &to_settle {
        let c = call(relay, g);
        assert_eq!(c.code, "0000", "resend of {g} after the fault");
    }
    let counts = bookings(core);
    for g in &to_settle {
        assert_eq!(counts.get(g).copied(), Some(1), "{g} after its resend");
    }
    for (g, n) in &counts {
        assert!(*n <= 1, "{g} booked {n} times");
    }
    a
}

/// The synchronous standby every commit must wait for: none is ever connected, so a commit
/// that waits for it waits until the setting goes (`release_standby`) or the server does.
pub const MISSING_STANDBY: &str = "nosuch";

/// Makes every commit that waits for a synchronous standby wait for `MISSING_STANDBY`.
pub fn require_missing_standby(server: &Server) {
    server
        .set_server_default("synchronous_standby_names", MISSING_STANDBY)
        .expect("name a synchronous standby");
}

/// No synchronous standby any more: the commits waiting for one return.
pub fn release_standby(server: &Server) {
    server
        .set_server_default("synchronous_standby_names", "")
        .expect("forget the synchronous standby");
}

/// Waits (up to 10 s) until a session of the server waits for the synchronous standby: a
/// claim whose COMMIT is flushed locally and not acknowledged.
pub fn wait_for_a_commit_on_the_standby(rows: &Rows) {
    let limit = Instant::now() + Duration::from_secs(10);
    while !rows.with(|c| {
        c.query_one(
            "SELECT count(*) > 0 FROM pg_stat_activity WHERE wait_event = 'SyncRep'",
            &[],
        )
        .map(|r| r.get::<_, bool>(0))
    }) {
        assert!(
            Instant::now() < limit,
            "no commit waits for the synchronous standby"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits (up to 10 s) for `guid`'s row, which a commit released late is writing.
pub fn wait_for_row(rows: &Rows, guid: &str) -> RowView {
    let limit = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(r) = rows.row(guid) {
            return r;
        }
        assert!(Instant::now() < limit, "{guid} has no row");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// What most fault tests start from: a private cluster, a ledger schema on it (its URL with
/// `PASSWORD` in it), a core simulator and a relay that has booked one transfer.
pub struct Stage {
    pub server: Server,
    /// The ledger's rows, read straight from the server.
    pub rows: Rows,
    /// The relay's `--db`.
    pub db: String,
    pub core_proc: Proc,
    pub core: CoreHttp,
    pub relay: Proc,
}

impl Stage {
    /// `None` (after one line) where no cluster can be started and none is required.
    pub fn start() -> Option<Stage> {
        Stage::start_with(|_| {})
    }

    /// As `start`, `prepare` run on the server before the relay connects.
    pub fn start_with(prepare: impl FnOnce(&Server)) -> Option<Stage> {
        let server = own_server(None)?;
        prepare(&server);
        let db = server.fresh_db();
        let rows = Rows::new(&db);
        let db = with_password(&db);
        let (core_proc, core) = coresim();
        let relay = relay(&db, &core_proc.url());
        assert_eq!(call(&relay.addr, &guid("before")).code, "0000");
        Some(Stage {
            server,
            rows,
            db,
            core_proc,
            core,
            relay,
        })
    }

    /// `check_aftermath` on this stage's relay, ledger and core.
    pub fn aftermath(&self, calls: &[Call]) -> Aftermath {
        check_aftermath(
            calls,
            &self.relay.addr,
            &self.db,
            &self.rows,
            &self.core,
            &self.core_proc.url(),
        )
    }
}
