//! Small builders over `std::process::Command` for end-to-end tests: the real binaries, on
//! port 0, each with its own temp ledger. Whatever a failing test spawned prints its argv,
//! status and stderr, so that a CI log says what happened.
#![allow(dead_code)] // each test file uses its own part of this module

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use ledger::wire::{self, Transfer};
use ledger::{Ledger, Row, State};

/// The workspace's binaries, built once per test process so that tests never run stale
/// ones (`cargo test` alone does not build the binaries of other packages).
pub fn bin(name: &str) -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    let dir = DIR.get_or_init(|| {
        let exe = std::env::current_exe().unwrap();
        let dir = exe.parent().unwrap().parent().unwrap().to_path_buf(); // target/<profile>
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.args(["build", "--workspace", "--bins", "--quiet"])
            .current_dir(env!("CARGO_MANIFEST_DIR"));
        if dir.file_name().is_some_and(|n| n == "release") {
            cmd.arg("--release");
        }
        let out = cmd.output().expect("cannot run cargo build");
        assert!(
            out.status.success(),
            "cargo build --workspace --bins failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        dir
    });
    let path = dir.join(name);
    assert!(path.exists(), "{} was not built", path.display());
    path
}

/// A spawned binary that announced `listening on HOST:PORT`. Killed on drop; its stderr is
/// printed if the test is failing.
pub struct Server {
    pub name: String,
    pub addr: String,
    argv: Vec<String>,
    child: Child,
    stderr_path: PathBuf,
    _dir: tempfile::TempDir,
}

impl Server {
    pub fn spawn(name: &str, args: &[&str]) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let stderr_path = dir.path().join("stderr");
        let argv: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let mut child = Command::new(bin(name))
            .args(&argv)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(File::create(&stderr_path).unwrap())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot spawn {name}: {e}"));
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            let _ = tx.send(lines.next());
            for _ in lines {} // keep draining
        });
        let mut server = Server {
            name: name.into(),
            addr: String::new(),
            argv,
            child,
            stderr_path,
            _dir: dir,
        };
        match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(Some(Ok(line))) if line.starts_with("listening on ") => {
                server.addr = line["listening on ".len()..].to_string();
            }
            other => panic!(
                "{name} {:?} did not announce itself: {other:?}\nstderr:\n{}",
                server.argv,
                server.stderr()
            ),
        }
        server
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Kills the process (SIGKILL) and waits for it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Waits for the process to exit by itself, up to `limit`.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
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

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
        if std::thread::panicking() {
            eprintln!(
                "--- {} {:?}\n--- stderr:\n{}",
                self.name,
                self.argv,
                self.stderr()
            );
        }
    }
}

/// A core simulator on a free port.
pub fn coresim(extra: &[&str]) -> Server {
    let mut args = vec!["--listen", "127.0.0.1:0"];
    args.extend_from_slice(extra);
    Server::spawn("coresim", &args)
}

/// A temp directory with a ledger path in it.
pub struct Db {
    pub dir: tempfile::TempDir,
    pub path: PathBuf,
}

impl Db {
    pub fn new() -> Db {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.db");
        Db { dir, path }
    }

    pub fn arg(&self) -> &str {
        self.path.to_str().unwrap()
    }

    pub fn row(&self, guid: &str) -> Option<Row> {
        Ledger::open(&self.path).unwrap().get(guid).unwrap()
    }

    pub fn state(&self, guid: &str) -> Option<State> {
        self.row(guid).map(|r| r.state)
    }

    pub fn count(&self) -> i64 {
        Ledger::open(&self.path)
            .unwrap()
            .connection()
            .query_row("SELECT count(*) FROM tx", [], |r| r.get(0))
            .unwrap()
    }

    /// Runs SQL by hand, as an operator or another tool would.
    pub fn exec(&self, sql: &str) {
        Ledger::open(&self.path)
            .unwrap()
            .connection()
            .execute_batch(sql)
            .unwrap();
    }
}

/// A relay on a free port in front of `core_url`, with a ledger at `db`.
pub fn relay(db: &Db, core_url: &str, extra: &[&str]) -> Server {
    let mut args = vec![
        "--db",
        db.arg(),
        "--listen",
        "127.0.0.1:0",
        "--core",
        core_url,
    ];
    args.extend_from_slice(extra);
    Server::spawn("relay", &args)
}

/// A request message (without length prefix).
pub fn msg(guid: &str, amount: u64, memo: &str) -> Vec<u8> {
    wire::encode_request(&Transfer {
        guid: guid.into(),
        from_account: "00000000000001".into(),
        to_account: "00000000000002".into(),
        amount,
        memo: memo.into(),
    })
    .unwrap()
}

/// A channel connection.
pub struct Chan {
    pub s: TcpStream,
}

impl Chan {
    pub fn connect(addr: &str) -> Chan {
        let s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        s.set_nodelay(true).unwrap();
        Chan { s }
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.s.write_all(bytes).unwrap();
    }

    pub fn send(&mut self, msg: &[u8]) {
        self.send_raw(&wire::frame(msg));
    }

    /// Reads one reply message (without prefix).
    pub fn recv(&mut self) -> Vec<u8> {
        let mut prefix = [0u8; 4];
        self.s.read_exact(&mut prefix).expect("reply prefix");
        let len = wire::parse_len(&prefix).expect("4-digit reply prefix");
        let mut reply = vec![0u8; len];
        self.s.read_exact(&mut reply).expect("reply body");
        reply
    }

    pub fn call(&mut self, msg: &[u8]) -> Vec<u8> {
        self.send(msg);
        self.recv()
    }

    /// True if the relay has closed this connection (EOF or reset) within `limit`.
    pub fn closed_within(&mut self, limit: Duration) -> bool {
        self.s.set_read_timeout(Some(limit)).unwrap();
        let mut b = [0u8; 1];
        match self.s.read(&mut b) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => matches!(
                e.kind(),
                std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::ConnectionAborted
            ),
        }
    }
}

/// One round trip on a fresh connection.
pub fn call(addr: &str, msg: &[u8]) -> Vec<u8> {
    Chan::connect(addr).call(msg)
}

/// The reply code of a reply message.
pub fn code(reply: &[u8]) -> String {
    String::from_utf8_lossy(&reply[41..45]).into_owned()
}

/// The core simulator's `/_stats`.
pub fn stats(core: &Server) -> serde_json::Value {
    let mut s = TcpStream::connect(&core.addr).unwrap();
    write!(
        s,
        "GET /_stats HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let body = text.split_once("\r\n\r\n").expect("HTTP response").1;
    serde_json::from_str(body).unwrap_or_else(|e| panic!("bad /_stats {body:?}: {e}"))
}

/// How many times the core booked `guid`.
pub fn bookings(core: &Server, guid: &str) -> u64 {
    stats(core)["by_guid"][guid].as_u64().unwrap_or(0)
}

/// Polls `f` until it is true or `limit` passes.
pub fn eventually(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if f() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs a batch tool to completion, printing argv, status, stdout and stderr on failure.
pub struct Run {
    pub argv: Vec<String>,
    pub out: Output,
}

impl Run {
    pub fn new(name: &str, args: &[&str]) -> Run {
        Run::with_env(name, args, &[])
    }

    pub fn with_env(name: &str, args: &[&str], env: &[(&str, &str)]) -> Run {
        let out = Command::new(bin(name))
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("cannot run {name}: {e}"));
        Run {
            argv: std::iter::once(name.to_string())
                .chain(args.iter().map(|s| s.to_string()))
                .collect(),
            out,
        }
    }

    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.out.stdout).into_owned()
    }

    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.out.stderr).into_owned()
    }

    pub fn code(&self) -> Option<i32> {
        self.out.status.code()
    }

    /// Asserts the exit code, with everything needed to understand a mismatch.
    pub fn expect_code(&self, want: i32) -> &Run {
        assert_eq!(
            self.code(),
            Some(want),
            "{:?} exited {:?}\nstdout:\n{}\nstderr:\n{}",
            self.argv,
            self.out.status,
            self.stdout(),
            self.stderr()
        );
        self
    }
}

/// Path helper for tests that need a file next to the ledger.
pub fn sibling(db: &Db, name: &str) -> PathBuf {
    Path::new(db.dir.path()).join(name)
}

// --- batch helpers ---
// Used by tests/batch.rs: hand-made ledger rows, direct HTTP to the core simulator, and
// the batch tools run with their default log level.

/// A port with nothing listening on it (a core that is down).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A core URL where nothing listens: connections are refused.
pub fn dead_core_url() -> String {
    format!("http://127.0.0.1:{}", free_port())
}

/// One HTTP/1.1 exchange with the core simulator: (status, body).
pub fn core_http(core: &Server, method: &str, path: &str, body: &str) -> (u16, String) {
    let mut s = TcpStream::connect(&core.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").expect("HTTP response");
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line in {head:?}"));
    (status, body.to_string())
}

/// `GET /v1/transfers/{guid}` at the core (counts as an inquiry in `/_stats`).
pub fn core_inquiry(core: &Server, guid: &str) -> Option<serde_json::Value> {
    match core_http(core, "GET", &format!("/v1/transfers/{guid}"), "") {
        (200, body) => Some(serde_json::from_str(&body).unwrap()),
        (404, _) => None,
        other => panic!("inquiry for {guid}: {other:?}"),
    }
}

/// Books the transfer in request message `m` at the core directly, as if an earlier send
/// had reached it. Returns the booking JSON.
pub fn core_book(core: &Server, m: &[u8]) -> serde_json::Value {
    let t = wire::parse_request(m).unwrap();
    let body = serde_json::json!({
        "guid": t.guid, "tx_code": "TRNF", "from_account": t.from_account,
        "to_account": t.to_account, "amount": t.amount, "memo": t.memo,
    });
    let (status, text) = core_http(core, "POST", "/v1/transfers", &body.to_string());
    assert_eq!(status, 200, "{text}");
    serde_json::from_str(&text).unwrap()
}

/// The 0000 reply the relay would give for request `m` and a core booking JSON.
pub fn booked_reply(m: &[u8], booking: &serde_json::Value) -> Vec<u8> {
    let body = wire::booking_body(
        booking["core_ref"].as_str().unwrap(),
        booking["amount"].as_u64().unwrap(),
        booking["booked_at"].as_str().unwrap(),
    )
    .unwrap();
    wire::reply_to(m, &wire::OK, Some(&body))
}

/// A row as the batch tests describe it; `None` columns are left NULL (attempts: default).
pub struct HandRow<'a> {
    pub guid: &'a str,
    pub state: &'a str,
    pub rsp_code: Option<&'a str>,
    pub request: Option<&'a [u8]>,
    pub response: Option<&'a [u8]>,
    pub attempts: Option<i64>,
    /// `updated_at = datetime('now', '-AGE seconds')`.
    pub age_secs: u64,
}

/// Inserts a row by hand, as another tool or an operator would.
pub fn insert_row(db: &Db, r: &HandRow<'_>) {
    let l = Ledger::open(&db.path).unwrap();
    l.connection()
            .execute(
                "INSERT INTO tx (guid, tx_code, state, rsp_code, request, response, attempts, updated_at) \
                 VALUES (?1, CASE WHEN ?4 IS NULL THEN NULL ELSE 'TRNF' END, ?2, ?3, ?4, ?5, \
                 coalesce(?6, 0), datetime('now', ?7))",
                rusqlite::params![
                    r.guid,
                    r.state,
                    r.rsp_code,
                    r.request,
                    r.response,
                    r.attempts,
                    format!("-{} seconds", r.age_secs)
                ],
            )
            .unwrap();
}

/// Makes a row look `secs` seconds old.
pub fn age_row(db: &Db, guid: &str, secs: u64) {
    let l = Ledger::open(&db.path).unwrap();
    let n = l
        .connection()
        .execute(
            "UPDATE tx SET updated_at = datetime('now', ?2) WHERE guid = ?1",
            rusqlite::params![guid, format!("-{secs} seconds")],
        )
        .unwrap();
    assert_eq!(n, 1, "no row {guid} to age");
}

/// Every row, by guid.
pub fn all_rows(db: &Db) -> Vec<Row> {
    let l = Ledger::open(&db.path).unwrap();
    let guids: Vec<String> = l
        .connection()
        .prepare("SELECT guid FROM tx ORDER BY guid")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    guids.iter().map(|g| l.get(g).unwrap().unwrap()).collect()
}

/// Runs a batch tool with its default log level (so that per-row warnings reach stderr
/// whatever RUST_LOG the test runner has).
pub fn tool(name: &str, args: &[&str]) -> Run {
    Run::with_env(name, args, &[("RUST_LOG", "info")])
}

/// stdout as the one JSON object `--json` prints.
pub fn run_json(run: &Run) -> serde_json::Value {
    let out = run.stdout();
    assert_eq!(
        out.lines().count(),
        1,
        "{:?}: one JSON line, got {out:?}",
        run.argv
    );
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{:?}: {e}: {out:?}", run.argv))
}
