//! The safety review's scenarios end to end (contract v1.1): a late booking never leaves a
//! row FAILED, the stale-sent floor, the bounded core call, the canary inquiry, a proxy's 404,
//! the descriptor and per-peer connection limits, a result retried past the busy timeout,
//! purge in chunks, reprocess's selection, a read-only inspect and the timeout flags'
//! environment twins. Real binaries on port 0, a temp ledger each; every test checks reply
//! bytes, ledger rows and the core simulator's per-GUID booking counts where they apply.

mod common;

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use common::*;
use ledger::{Row, State, wire};

/// Age given to rows that `--min-age 60` / `--stale-sent 60` should admit.
const OLD: u64 = 120;
const WAIT: Duration = Duration::from_secs(10);
const DAY: u64 = 24 * 60 * 60;

// ---------------------------------------------------------------------------------------
// helpers
// ---------------------------------------------------------------------------------------

/// A hand-made row with a known attempts count and age.
fn put(
    db: &Db,
    guid: &str,
    state: &str,
    rsp: Option<&str>,
    req: Option<&[u8]>,
    attempts: i64,
    age: u64,
) {
    insert_row(
        db,
        &HandRow {
            guid,
            state,
            rsp_code: rsp,
            request: req,
            response: None,
            attempts: Some(attempts),
            age_secs: age,
        },
    );
}

/// The header-only reply the relay gives for `m` with `code`.
fn short(m: &[u8], code: &[u8; 4]) -> Vec<u8> {
    wire::reply_to(m, code, None)
}

fn resolve(db: &Db, core: &str, extra: &[&str]) -> Run {
    let mut args = vec!["--db", db.arg(), "--core", core];
    args.extend_from_slice(extra);
    tool("resolve", &args)
}

fn reprocess(db: &Db, core: &str, extra: &[&str]) -> Run {
    let mut args = vec!["--db", db.arg(), "--core", core];
    args.extend_from_slice(extra);
    tool("reprocess", &args)
}

fn inquiries(core: &Server) -> u64 {
    stats(core)["inquiries"].as_u64().unwrap()
}

fn by_guid(core: &Server) -> BTreeMap<String, u64> {
    stats(core)["by_guid"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_u64().unwrap()))
        .collect()
}

/// Sends `m` on a fresh connection from another thread; join for the reply.
fn send_in_background(addr: &str, m: &[u8]) -> thread::JoinHandle<Vec<u8>> {
    let (addr, m) = (addr.to_string(), m.to_vec());
    thread::spawn(move || call(&addr, &m))
}

/// Asserts the row is DONE/0000 on its first attempt, holding `reply`, which is the reply
/// built from `m` and the core's (only) booking of its GUID.
fn assert_done_with(db: &Db, core: &Server, m: &[u8], reply: &[u8]) {
    let guid = wire::parse_request(m).unwrap().guid;
    let booking = core_inquiry(core, &guid).unwrap_or_else(|| panic!("{guid} not booked"));
    assert_eq!(
        String::from_utf8_lossy(reply),
        String::from_utf8_lossy(&booked_reply(m, &booking)),
        "{guid}: the reply carries the core's booking"
    );
    let row = db.row(&guid).unwrap();
    assert_eq!(
        (row.state, row.rsp_code.as_deref(), row.attempts),
        (State::Done, Some("0000"), Some(1)),
        "{guid}"
    );
    assert_eq!(row.request.as_deref(), Some(m), "{guid}: request unchanged");
    assert_eq!(row.response.as_deref(), Some(reply), "{guid}: reply stored");
}

/// A command run to its end within `limit` (killed otherwise), its output kept in files so
/// that a process that never exits cannot block the test on a pipe.
struct Bounded {
    argv: Vec<String>,
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Bounded {
    fn run(mut cmd: Command, limit: Duration) -> Bounded {
        let argv: Vec<String> = std::iter::once(cmd.get_program())
            .chain(cmd.get_args())
            .map(|s| s.to_string_lossy().into_owned())
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let (out, err) = (dir.path().join("stdout"), dir.path().join("stderr"));
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(File::create(&out).unwrap())
            .stderr(File::create(&err).unwrap())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {argv:?}: {e}"));
        let deadline = Instant::now() + limit;
        let code = loop {
            if let Some(st) = child.try_wait().unwrap() {
                break st.code();
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            thread::sleep(Duration::from_millis(20));
        };
        Bounded {
            argv,
            code,
            stdout: std::fs::read_to_string(out).unwrap_or_default(),
            stderr: std::fs::read_to_string(err).unwrap_or_default(),
        }
    }

    fn expect_code(&self, want: i32) -> &Bounded {
        assert_eq!(
            self.code,
            Some(want),
            "{:?} exited {:?} (None: still running, killed)\nstdout:\n{}\nstderr:\n{}",
            self.argv,
            self.code,
            self.stdout,
            self.stderr
        );
        self
    }
}

/// The relay run through `bash -c '<limits>; exec "$0" "$@"'`, so that it starts under the
/// given `ulimit`s with the bash process's PID.
fn relay_under_ulimit(limits: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new("bash");
    cmd.arg("-c")
        .arg(format!("{limits}; exec \"$0\" \"$@\""))
        .arg(bin("relay"))
        .args(args)
        .env("RUST_LOG", "info");
    cmd
}

/// A process started by the test that announced `listening on HOST:PORT`; killed on drop.
struct Started {
    child: Child,
    stderr_path: PathBuf,
    _dir: tempfile::TempDir,
}

impl Started {
    fn spawn(mut cmd: Command) -> Started {
        let dir = tempfile::tempdir().unwrap();
        let stderr_path = dir.path().join("stderr");
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(File::create(&stderr_path).unwrap())
            .spawn()
            .expect("cannot spawn");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            let _ = tx.send(lines.next());
            for _ in lines {}
        });
        let started = Started {
            child,
            stderr_path,
            _dir: dir,
        };
        match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(Some(Ok(line))) if line.starts_with("listening on ") => started,
            other => panic!(
                "{cmd:?} did not announce itself: {other:?}\nstderr:\n{}",
                started.stderr()
            ),
        }
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }
}

impl Drop for Started {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if thread::panicking() {
            eprintln!("--- stderr:\n{}", self.stderr());
        }
    }
}

/// (soft, hard) "Max open files" of a running process.
fn open_files_limit(pid: u32) -> (String, String) {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap_or_else(|| panic!("no Max open files in {limits}"));
    let mut f = line["Max open files".len()..].split_whitespace();
    (f.next().unwrap().to_string(), f.next().unwrap().to_string())
}

/// A channel connection whose source address is `source` (e.g. 127.0.0.2:0).
fn connect_from(source: &str, addr: &str) -> Chan {
    use socket2::{Domain, Socket, Type};
    let sock = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    let source: SocketAddr = source.parse().unwrap();
    let addr: SocketAddr = addr.parse().unwrap();
    sock.bind(&source.into()).unwrap();
    sock.connect(&addr.into()).unwrap();
    let s: TcpStream = sock.into();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.set_nodelay(true).unwrap();
    Chan { s }
}

/// One round trip on a fresh connection, or `None` if the relay closed it without a reply.
fn try_call(addr: &str, m: &[u8]) -> Option<Vec<u8>> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.write_all(&wire::frame(m)).ok()?;
    let mut prefix = [0u8; 4];
    s.read_exact(&mut prefix).ok()?;
    let mut reply = vec![0u8; wire::parse_len(&prefix)?];
    s.read_exact(&mut reply).ok()?;
    Some(reply)
}

/// An HTTP server that answers every request `404` with an HTML page, as a proxy or load
/// balancer in front of the wrong backend would. Returns its base URL and a request count.
fn html_404_server() -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let served = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&served);
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { continue };
            let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
            // Read the request head (inquiries are GETs without a body).
            let mut head = Vec::new();
            let mut b = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") {
                match s.read(&mut b) {
                    Ok(1) => head.push(b[0]),
                    _ => break,
                }
            }
            count.fetch_add(1, Ordering::SeqCst);
            let page = "<html><body><h1>404 Not Found</h1>nginx</body></html>";
            let _ = write!(
                s,
                "HTTP/1.1 404 Not Found\r\nContent-Type: text/html\r\nContent-Length: {}\r\n\
                 Connection: close\r\n\r\n{page}",
                page.len()
            );
        }
    });
    (url, served)
}

// ---------------------------------------------------------------------------------------
// 1, 2: a late result after resolve --stale-sent moved the row to FAILED
// ---------------------------------------------------------------------------------------

#[test]
fn a_booking_that_arrives_after_stale_sent_moved_the_row_to_failed_is_recorded_done() {
    let core = coresim(&["--slow-ms", "2000"]);
    let db = Db::new();
    let relay = relay(&db, &core.url(), &[]);
    let g = "G-LATE-DONE";
    let m = msg(g, 4100, "SLOW late booking");
    let pending = send_in_background(&relay.addr, &m);
    assert!(eventually(WAIT, || db.state(g) == Some(State::Sent)));
    // As if the relay had been paused past the floor while the core works on the request.
    age_row(&db, g, OLD);

    // The core is still sleeping on the request: its inquiry answers 404, so FAILED/E902.
    let r = resolve(
        &db,
        &core.url(),
        &["--min-age", "60", "--stale-sent", "60", "--json"],
    );
    r.expect_code(0);
    let j = run_json(&r);
    assert_eq!(
        (&j["examined"], &j["failed"], &j["done"]),
        (&1.into(), &1.into(), &0.into()),
        "resolve ran while the core was still working: {j}"
    );

    // Then the core books, and the relay's result must not leave the row FAILED.
    let reply = pending.join().unwrap();
    assert_eq!(
        code(&reply),
        "0000",
        "{:?}",
        String::from_utf8_lossy(&reply)
    );
    assert_done_with(&db, &core, &m, &reply);

    // Nothing for reprocess to send; a resend replays the stored reply.
    let r = reprocess(&db, &core.url(), &["--max-attempts", "5"]);
    r.expect_code(0);
    assert!(
        r.stdout().starts_with("reprocess: 0 examined, 0 sent"),
        "{}",
        r.stdout()
    );
    assert_eq!(call(&relay.addr, &m), reply);
    assert_eq!(bookings(&core, g), 1);
}

#[test]
fn an_unknown_outcome_after_stale_sent_moved_the_row_to_failed_is_recorded_unknown() {
    let core = coresim(&["--slow-ms", "2500"]);
    let db = Db::new();
    let relay = relay(&db, &core.url(), &["--read-timeout-ms", "2000"]);
    let g = "G-LATE-UNKNOWN";
    let m = msg(g, 4200, "SLOW late unknown");
    let pending = send_in_background(&relay.addr, &m);
    assert!(eventually(WAIT, || db.state(g) == Some(State::Sent)));
    age_row(&db, g, OLD);

    let r = resolve(
        &db,
        &core.url(),
        &["--min-age", "60", "--stale-sent", "60", "--json"],
    );
    r.expect_code(0);
    let j = run_json(&r);
    assert_eq!(
        (&j["examined"], &j["failed"]),
        (&1.into(), &1.into()),
        "resolve ran while the core was still working: {j}"
    );

    // The relay times out before the core answers: the outcome is unknown, never "not sent".
    let reply = pending.join().unwrap();
    assert_eq!(reply, short(&m, b"E901"));
    let row = db.row(g).unwrap();
    assert_eq!(
        (row.state, row.rsp_code.as_deref(), row.attempts),
        (State::Unknown, Some("E901"), Some(1))
    );
    assert_eq!(row.response.as_deref(), Some(&short(&m, b"E901")[..]));
    assert_eq!(row.request.as_deref(), Some(&m[..]));

    let r = reprocess(&db, &core.url(), &["--max-attempts", "5"]);
    r.expect_code(0);
    assert!(
        r.stdout().starts_with("reprocess: 0 examined, 0 sent"),
        "{}",
        r.stdout()
    );
    assert_eq!(call(&relay.addr, &m), short(&m, b"E901"));

    // The core has booked by now; an inquiry settles the row.
    assert!(eventually(WAIT, || bookings(&core, g) == 1));
    let r = resolve(&db, &core.url(), &["--min-age", "0"]);
    r.expect_code(0);
    assert!(
        r.stdout().starts_with("resolve: 1 examined, 1 DONE"),
        "{}",
        r.stdout()
    );
    let settled = db.row(g).unwrap().response.unwrap();
    assert_done_with(&db, &core, &m, &settled);
    assert_eq!(call(&relay.addr, &m), settled);
    assert_eq!(bookings(&core, g), 1);
}

// ---------------------------------------------------------------------------------------
// 3, 4: the stale-sent floor and the bounded core call
// ---------------------------------------------------------------------------------------

#[test]
fn resolve_refuses_a_stale_sent_under_60_seconds_and_never_reads_it_from_the_environment() {
    let core = coresim(&[]);
    let db = Db::new();
    let g = "G-FLOOR";
    let m = msg(g, 7, "");
    put(&db, g, "SENT", None, Some(&m), 1, OLD);
    let before = db.row(g).unwrap();

    for secs in ["30", "59"] {
        let r = resolve(&db, &core.url(), &["--min-age", "60", "--stale-sent", secs]);
        r.expect_code(2);
        assert!(
            r.stderr().contains("--stale-sent"),
            "{secs}: {}",
            r.stderr()
        );
        assert_eq!(r.stdout(), "");
        assert_eq!(db.row(g).unwrap(), before, "{secs}: refused, nothing done");
    }

    // The environment alone never turns it on.
    let r = Run::with_env(
        "resolve",
        &[
            "--db",
            db.arg(),
            "--core",
            &core.url(),
            "--min-age",
            "60",
            "--json",
        ],
        &[("RUST_LOG", "info"), ("RESOLVE_STALE_SENT", "60")],
    );
    r.expect_code(0);
    assert_eq!(run_json(&r)["examined"], 0);
    assert!(
        r.stderr().contains("RESOLVE_STALE_SENT"),
        "says the variable is ignored: {}",
        r.stderr()
    );
    assert_eq!(db.row(g).unwrap(), before, "SENT stays SENT");
    assert_eq!(inquiries(&core), 0);

    // 60 is accepted: the orphaned row is asked about and, never booked, becomes FAILED.
    let r = resolve(
        &db,
        &core.url(),
        &["--min-age", "60", "--stale-sent", "60", "--json"],
    );
    r.expect_code(0);
    let j = run_json(&r);
    assert_eq!(
        (&j["examined"], &j["failed"]),
        (&1.into(), &1.into()),
        "{j}"
    );
    let row = db.row(g).unwrap();
    assert_eq!(
        (row.state, row.rsp_code.as_deref(), row.attempts),
        (State::Failed, Some("E902"), Some(1))
    );
    assert_eq!(row.response.as_deref(), Some(&short(&m, b"E902")[..]));
    assert_eq!(bookings(&core, g), 0);
}

#[test]
fn the_relay_refuses_a_core_call_that_may_take_over_30_seconds() {
    let db = Db::new();
    let core = dead_core_url();
    let base = ["--db", db.arg(), "--listen", "127.0.0.1:0", "--core", &core];
    for (connect, read) in [("1000", "40000"), ("20000", "10001")] {
        let mut cmd = Command::new(bin("relay"));
        cmd.args(base)
            .args(["--connect-timeout-ms", connect, "--read-timeout-ms", read])
            .env("RUST_LOG", "info");
        let r = Bounded::run(cmd, Duration::from_secs(10));
        r.expect_code(2);
        assert!(
            r.stderr.contains("--read-timeout-ms") && r.stderr.contains("--connect-timeout-ms"),
            "{}",
            r.stderr
        );
        assert_eq!(
            r.stderr.lines().filter(|l| l.starts_with("error:")).count(),
            1,
            "one message: {}",
            r.stderr
        );
        assert!(!r.stdout.contains("listening on"), "{}", r.stdout);
        assert!(!db.path.exists(), "refused before the ledger is opened");
    }
    // Exactly 30 s is allowed.
    let ok = relay(
        &db,
        &core,
        &["--connect-timeout-ms", "1000", "--read-timeout-ms", "29000"],
    );
    let m = msg("G-30S", 5, "");
    assert_eq!(call(&ok.addr, &m), short(&m, b"E902"));
}

// ---------------------------------------------------------------------------------------
// 5, 6: the canary inquiry, and a 404 that is not the core's
// ---------------------------------------------------------------------------------------

#[test]
fn a_core_that_does_not_know_our_bookings_changes_no_row() {
    let a = coresim(&[]);
    let db = Db::new();
    let relay = relay(&db, &a.url(), &[]);
    let booked = msg("G-CAN-BOOKED", 100, "");
    let booked_reply = call(&relay.addr, &booked);
    assert_eq!(code(&booked_reply), "0000");
    let lost = msg("G-CAN-LOST", 200, "");
    put(
        &db,
        "G-CAN-LOST",
        "UNKNOWN",
        Some("E901"),
        Some(&lost),
        1,
        OLD,
    );
    let before = all_rows(&db);

    let b = coresim(&[]);
    let wrong_path = format!("{}/wrongprefix", a.url());
    for (what, url) in [
        ("another environment", b.url()),
        ("a wrong path", wrong_path),
    ] {
        let r = resolve(&db, &url, &["--min-age", "60"]);
        r.expect_code(1);
        let err = r.stderr();
        assert_eq!(err.lines().count(), 1, "{what}: one line: {err}");
        assert!(
            err.contains("canary") && err.contains("G-CAN-BOOKED"),
            "{what}: {err}"
        );
        assert_eq!(r.stdout(), "", "{what}");
        assert_eq!(all_rows(&db), before, "{what}: no row changed");
    }
    assert_eq!(inquiries(&b), 1, "only the canary was asked");

    // The core down entirely: nothing can be checked, nothing changes, a later run may.
    let r = resolve(&db, &dead_core_url(), &["--min-age", "60"]);
    r.expect_code(3);
    assert_eq!(r.stderr().lines().count(), 1, "{}", r.stderr());
    assert!(r.stderr().contains("canary"), "{}", r.stderr());
    assert_eq!(all_rows(&db), before, "core down: no row changed");

    // The core that booked it: the canary passes and the lost send is settled.
    let r = resolve(&db, &a.url(), &["--min-age", "60", "--json"]);
    r.expect_code(0);
    let j = run_json(&r);
    assert_eq!(
        (&j["examined"], &j["failed"], &j["done"]),
        (&1.into(), &1.into(), &0.into()),
        "{j}"
    );
    let row = db.row("G-CAN-LOST").unwrap();
    assert_eq!(
        (row.state, row.rsp_code.as_deref(), row.attempts),
        (State::Failed, Some("E902"), Some(1))
    );
    assert_eq!(row.response.as_deref(), Some(&short(&lost, b"E902")[..]));
    assert_eq!(db.row("G-CAN-BOOKED").unwrap(), before[0]);
    assert_eq!(call(&relay.addr, &booked), booked_reply);
    assert_eq!(by_guid(&a), BTreeMap::from([("G-CAN-BOOKED".into(), 1)]));
    assert_eq!(stats(&b)["bookings"], 0);
}

#[test]
fn a_404_that_is_not_the_cores_json_proves_nothing() {
    let (url, served) = html_404_server();
    let db = Db::new();
    let unknown = msg("G-HTML-UNK", 10, "");
    let sent = msg("G-HTML-SENT", 20, "");
    put(
        &db,
        "G-HTML-UNK",
        "UNKNOWN",
        Some("E901"),
        Some(&unknown),
        1,
        OLD,
    );
    put(&db, "G-HTML-SENT", "SENT", None, Some(&sent), 1, OLD);
    let unk_before = db.row("G-HTML-UNK").unwrap();

    let r = resolve(
        &db,
        &url,
        &["--min-age", "60", "--stale-sent", "60", "--json"],
    );
    r.expect_code(3);
    let j = run_json(&r);
    assert_eq!(
        (
            &j["examined"],
            &j["failed"],
            &j["left"],
            &j["sent_to_unknown"]
        ),
        (&2.into(), &0.into(), &1.into(), &1.into()),
        "{j}"
    );
    assert_eq!(served.load(Ordering::SeqCst), 2, "one inquiry per row");
    assert_eq!(db.row("G-HTML-UNK").unwrap(), unk_before, "stays UNKNOWN");
    // A stale SENT row whose inquiry proves nothing is UNKNOWN, never FAILED.
    let row = db.row("G-HTML-SENT").unwrap();
    assert_eq!(
        (row.state, row.rsp_code.as_deref(), row.attempts),
        (State::Unknown, Some("E901"), Some(1))
    );
    assert!(r.stderr().contains("G-HTML-UNK"), "{}", r.stderr());
}

// ---------------------------------------------------------------------------------------
// 7, 8: descriptors and connections
// ---------------------------------------------------------------------------------------

#[test]
fn the_relay_raises_its_descriptor_limit_and_refuses_max_connections_that_cannot_fit() {
    let db = Db::new();
    let core = dead_core_url();
    let args = ["--db", db.arg(), "--listen", "127.0.0.1:0", "--core", &core];

    let raised = Started::spawn(relay_under_ulimit("ulimit -Sn 256", &args));
    let (soft, hard) = open_files_limit(raised.child.id());
    assert_eq!(soft, hard, "soft limit raised to the hard limit");
    assert_ne!(soft, "256", "raised");
    drop(raised);

    let mut with_max = args.to_vec();
    with_max.extend(["--max-connections", "1024"]);
    let r = Bounded::run(
        relay_under_ulimit("ulimit -n 512", &with_max),
        Duration::from_secs(10),
    );
    r.expect_code(1);
    assert_eq!(r.stderr.lines().count(), 1, "one line: {}", r.stderr);
    assert!(r.stderr.contains("--max-connections"), "{}", r.stderr);
    assert!(!r.stdout.contains("listening on"), "{}", r.stdout);

    // What fits under the same limit starts.
    let mut small = args.to_vec();
    small.extend(["--max-connections", "100"]);
    let fits = Started::spawn(relay_under_ulimit("ulimit -n 512", &small));
    assert_eq!(
        open_files_limit(fits.child.id()),
        ("512".into(), "512".into())
    );
}

#[test]
fn one_peer_at_its_limit_does_not_lock_out_another() {
    let core = coresim(&[]);
    let db = Db::new();
    let relay = relay(&db, &core.url(), &["--max-connections-per-peer", "2"]);
    let mut c1 = Chan::connect(&relay.addr);
    let mut c2 = Chan::connect(&relay.addr);
    // Served, so both are counted against 127.0.0.1.
    assert_eq!(code(&c1.call(&msg("G-PEER-1", 1, ""))), "0000");
    assert_eq!(code(&c2.call(&msg("G-PEER-2", 2, ""))), "0000");

    let mut third = Chan::connect(&relay.addr);
    assert!(
        third.closed_within(Duration::from_secs(5)),
        "a third connection from 127.0.0.1 is closed at once"
    );
    assert!(
        eventually(WAIT, || relay.stderr().lines().any(|l| l
            .contains("per-peer connection limit 2")
            && l.contains("127.0.0.1"))),
        "logged: {}",
        relay.stderr()
    );

    // Another source address is served.
    let mut other = connect_from("127.0.0.2:0", &relay.addr);
    assert_eq!(other.s.local_addr().unwrap().ip().to_string(), "127.0.0.2");
    let m = msg("G-PEER-OTHER", 3, "");
    let reply = other.call(&m);
    assert_eq!(code(&reply), "0000");
    assert_eq!(db.row("G-PEER-OTHER").unwrap().response, Some(reply));

    // A freed slot lets 127.0.0.1 in again.
    drop(c1);
    let again = msg("G-PEER-AGAIN", 4, "");
    let mut reply = None;
    assert!(
        eventually(WAIT, || {
            reply = try_call(&relay.addr, &again);
            reply.is_some()
        }),
        "127.0.0.1 is served again after one of its connections closed"
    );
    assert_eq!(code(&reply.unwrap()), "0000");
    assert_eq!(code(&c2.call(&msg("G-PEER-2B", 5, ""))), "0000");
    for g in [
        "G-PEER-1",
        "G-PEER-2",
        "G-PEER-OTHER",
        "G-PEER-AGAIN",
        "G-PEER-2B",
    ] {
        assert_eq!(bookings(&core, g), 1, "{g}");
    }
}

// ---------------------------------------------------------------------------------------
// 9: a result blocked past the busy timeout
// ---------------------------------------------------------------------------------------

#[test]
fn a_result_write_blocked_past_the_busy_timeout_is_retried_and_recorded() {
    let core = coresim(&["--slow-ms", "1000"]);
    let db = Db::new();
    let relay = relay(&db, &core.url(), &[]);
    let g = "G-RETRY-RESULT";
    let m = msg(g, 9000, "SLOW");
    let pending = send_in_background(&relay.addr, &m);
    assert!(eventually(WAIT, || db.state(g) == Some(State::Sent)));
    let lock = rusqlite::Connection::open(&db.path).unwrap();
    lock.execute_batch("BEGIN IMMEDIATE").unwrap();
    let locked = Instant::now();
    assert!(eventually(WAIT, || bookings(&core, g) == 1));
    // A deliberate hold, longer than the relay's 5 s busy timeout.
    thread::sleep(Duration::from_secs(7).saturating_sub(locked.elapsed()));
    assert!(
        !pending.is_finished(),
        "the relay is still trying to record the result, not answering E901"
    );
    lock.execute_batch("ROLLBACK").unwrap();
    drop(lock);

    let reply = pending.join().unwrap();
    assert_eq!(
        code(&reply),
        "0000",
        "{:?}",
        String::from_utf8_lossy(&reply)
    );
    assert_done_with(&db, &core, &m, &reply);
    assert_eq!(call(&relay.addr, &m), reply);
    assert_eq!(bookings(&core, g), 1);
}

// ---------------------------------------------------------------------------------------
// 10, 11: purge in chunks; what reprocess never sends
// ---------------------------------------------------------------------------------------

#[test]
fn purge_deletes_in_chunks_and_only_old_done_rows() {
    const N: usize = 2500;
    let db = Db::new();
    db.exec(&format!(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {N}) \
         INSERT INTO tx (guid, tx_code, state, rsp_code, attempts, updated_at) \
         SELECT printf('G-PC-%05d', i), 'TRNF', 'DONE', '0000', 1, \
                datetime('now', '-40 days') FROM n;"
    ));
    let m = |g: &str| msg(g, 1, "");
    for (g, state, rsp, age) in [
        ("K-UNKNOWN", "UNKNOWN", Some("E901"), 40 * DAY),
        ("K-FAILED", "FAILED", Some("E902"), 40 * DAY),
        ("K-SENT", "SENT", None, 40 * DAY),
        ("K-RECEIVED", "RECEIVED", None, 40 * DAY),
        ("K-DONE-29D", "DONE", Some("0000"), 29 * DAY),
        ("K-DONE-YOUNG", "DONE", Some("B001"), 60),
    ] {
        put(&db, g, state, rsp, Some(&m(g)), 1, age);
    }
    let kept = |rows: Vec<Row>| -> Vec<Row> {
        rows.into_iter()
            .filter(|r| !r.guid.starts_with("G-PC-"))
            .collect()
    };
    let before = kept(all_rows(&db));
    assert_eq!(before.len(), 6);
    assert_eq!(db.count(), (N + 6) as i64);

    let r = tool("purge", &["--db", db.arg(), "--days", "30", "--json"]);
    r.expect_code(0);
    let j = run_json(&r);
    let chunk = ledger::store::PURGE_CHUNK;
    assert_eq!(chunk, 1000);
    assert_eq!(
        (&j["tool"], &j["deleted"], &j["chunks"], &j["exit_code"]),
        (
            &"purge".into(),
            &N.into(),
            &(N / chunk + 1).into(),
            &0.into()
        ),
        "{j}"
    );
    assert_eq!(j["chunks"], 3);
    assert_eq!(all_rows(&db), before, "other rows untouched");
}

#[test]
fn reprocess_never_sends_a_failed_row_whose_code_is_not_e902() {
    let core = coresim(&[]);
    let db = Db::new();
    let never = [
        ("G-NS-E901", "FAILED", Some("E901")),
        ("G-NS-B001", "FAILED", Some("B001")),
        ("G-NS-NULL", "FAILED", None),
        ("G-NS-SPACE", "FAILED", Some("E902 ")),
        ("G-NS-LOWER", "FAILED", Some("e902")),
        ("G-NS-UNKNOWN", "UNKNOWN", Some("E902")),
    ];
    for (g, state, rsp) in never {
        put(&db, g, state, rsp, Some(&msg(g, 5, "")), 1, OLD);
    }
    let control = msg("G-NS-CONTROL", 6, "");
    put(
        &db,
        "G-NS-CONTROL",
        "FAILED",
        Some("E902"),
        Some(&control),
        1,
        OLD,
    );
    let rows = || -> Vec<Row> { never.iter().map(|(g, ..)| db.row(g).unwrap()).collect() };
    let before = rows();

    let r = reprocess(&db, &core.url(), &["--max-attempts", "5"]);
    r.expect_code(0);
    assert_eq!(
        r.stdout(),
        "reprocess: 1 examined, 1 sent, 1 DONE, 0 FAILED, 0 UNKNOWN, \
         0 not tried (core unreachable), 0 skipped, 0 changed by another writer\n"
    );
    assert_eq!(by_guid(&core), BTreeMap::from([("G-NS-CONTROL".into(), 1)]));
    assert_eq!(rows(), before, "byte for byte unchanged");
    let row = db.row("G-NS-CONTROL").unwrap();
    assert_eq!(
        (row.state, row.rsp_code.as_deref(), row.attempts),
        (State::Done, Some("0000"), Some(2))
    );
}

// ---------------------------------------------------------------------------------------
// 12, 13: inspect is read-only; every timeout flag has an environment twin
// ---------------------------------------------------------------------------------------

/// The sibling files SQLite may create next to `path`.
fn sqlite_siblings(path: &Path) -> Vec<PathBuf> {
    ["-wal", "-shm", "-journal"]
        .iter()
        .map(|s| PathBuf::from(format!("{}{s}", path.display())))
        .filter(|p| p.exists())
        .collect()
}

#[test]
fn inspect_opens_the_ledger_read_only() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hand.db");
    let schema = include_str!("../schema.sql");
    let (table, index) = schema
        .split_once("-- resolve, reprocess and purge")
        .expect("schema.sql: the table, then its index");
    assert!(index.contains("CREATE INDEX IF NOT EXISTS tx_state_updated"));
    {
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute_batch(table).unwrap();
        c.execute_batch(
            "INSERT INTO tx (guid, tx_code, state, rsp_code, attempts, updated_at) \
             VALUES ('G-RO-1', 'TRNF', 'DONE', '0000', 1, '2026-01-02 03:04:05');",
        )
        .unwrap();
        let mode: String = c
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "delete");
    }
    let before = std::fs::read(&path).unwrap();
    assert!(sqlite_siblings(&path).is_empty());

    for extra in [&[][..], &["--json"][..], &["--guid", "G-RO-1"][..]] {
        let mut args = vec!["--db", path.to_str().unwrap()];
        args.extend_from_slice(extra);
        let r = tool("inspect", &args);
        r.expect_code(0);
        assert!(r.stdout().contains("G-RO-1"), "{extra:?}: {}", r.stdout());
    }
    let r = tool("inspect", &["--db", path.to_str().unwrap()]);
    assert!(
        r.stdout()
            .contains("G-RO-1\tDONE\t0000\t1\t2026-01-02 03:04:05\n"),
        "{}",
        r.stdout()
    );

    assert!(
        std::fs::read(&path).unwrap() == before,
        "the file's bytes are unchanged"
    );
    assert_eq!(sqlite_siblings(&path), Vec::<PathBuf>::new());
    let c =
        rusqlite::Connection::open_with_flags(&path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap();
    let version: i64 = c
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, 0);
    let indexes: i64 = c
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE name = 'tx_state_updated'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(indexes, 0, "no index created");
}

#[test]
fn every_timeout_flag_of_the_batch_tools_has_an_environment_twin() {
    for (name, prefix) in [("resolve", "RESOLVE"), ("reprocess", "REPROCESS")] {
        let r = Run::new(name, &["--help"]);
        r.expect_code(0);
        for flag in ["CONNECT_TIMEOUT_MS", "READ_TIMEOUT_MS"] {
            assert!(
                r.stdout().contains(&format!("env: {prefix}_{flag}")),
                "{name} --help: {}",
                r.stdout()
            );
        }
    }
    let help = Run::new("resolve", &["--help"]).stdout();
    assert!(help.contains("--stale-sent"), "{help}");
    assert!(!help.contains("env: RESOLVE_STALE_SENT"), "{help}");

    let db = Db::new();
    let core = dead_core_url();
    for (name, var, flag, args) in [
        (
            "resolve",
            "RESOLVE_READ_TIMEOUT_MS",
            "--read-timeout-ms",
            vec!["--db", db.arg(), "--core", &core, "--min-age", "60"],
        ),
        (
            "resolve",
            "RESOLVE_CONNECT_TIMEOUT_MS",
            "--connect-timeout-ms",
            vec!["--db", db.arg(), "--core", &core, "--min-age", "60"],
        ),
        (
            "reprocess",
            "REPROCESS_READ_TIMEOUT_MS",
            "--read-timeout-ms",
            vec!["--db", db.arg(), "--core", &core, "--max-attempts", "3"],
        ),
        (
            "reprocess",
            "REPROCESS_CONNECT_TIMEOUT_MS",
            "--connect-timeout-ms",
            vec!["--db", db.arg(), "--core", &core, "--max-attempts", "3"],
        ),
    ] {
        let r = Run::with_env(name, &args, &[(var, "abc")]);
        r.expect_code(2);
        assert!(r.stderr().contains(flag), "{name} {var}: {}", r.stderr());
        assert_eq!(r.stdout(), "");
    }
    assert!(!db.path.exists(), "usage errors create nothing");
}
