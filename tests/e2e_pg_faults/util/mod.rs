//! What the fault tests share, on top of `testkit`: the processes (core simulator, relay;
//! testkit's), timed channel calls, the set-up most tests start from (`Stage`), the ledger's
//! rows read straight from the server (`rows`), and the check that a fault left nothing
//! wrong behind (`aftermath`).

mod aftermath;
mod rows;

pub use self::aftermath::*;
pub use self::rows::*;

use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use testkit::pg::{Server, Setup};
use testkit::process::Run;
use testkit::{Chan, CoreHttp, bin};
use wire::{self, Transfer};

/// The longest a request may take while the database fails: the relay's client-side
/// deadline for one ledger operation (5 s) plus what the test's own timing adds.
pub const CALL_LIMIT: Duration = Duration::from_millis(6500);
/// How soon after the server is back (up, thawed, reachable) a new transfer must be booked.
pub const RECOVERY_LIMIT: Duration = Duration::from_secs(2);
/// How long a channel waits for a reply before the test calls it a hang.
const REPLY_WAIT: Duration = Duration::from_secs(30);

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

/// A process started by a test (core simulator, relay), killed on drop: testkit's
/// (`pg::Server` is the database server here).
pub use testkit::process::Server as Proc;

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

/// Starts a relay on `db` and waits up to `limit` for it to exit by itself.
pub fn relay_refusing(db: &str, core: &str, limit: Duration) -> Run {
    let mut cmd = Command::new(bin("relay"));
    cmd.args(["--db", db, "--listen", "127.0.0.1:0", "--core", core]);
    Run::command(cmd, limit)
}

/// The relay refused to start with one line on stderr, exit 1, `secret` (its password) not
/// shown.
pub fn assert_refused(r: &Run, what: &str, secret: &str) {
    let lines: Vec<&str> = r
        .stderr()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .collect();
    assert_eq!(r.code, Some(1), "{what}: the relay did not exit 1: {r:?}");
    assert_eq!(lines.len(), 1, "{what}: not one line: {r:?}");
    assert!(lines[0].starts_with("relay: "), "{what}: {r:?}");
    assert!(
        !r.stderr().contains(secret) && !r.stdout().contains(secret),
        "{what}: the password is shown: {r:?}"
    );
    assert!(
        r.stdout().is_empty(),
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
