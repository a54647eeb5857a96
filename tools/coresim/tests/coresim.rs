//! Black-box tests: the real binary on a free port. Requests go through the test kit's HTTP
//! client; what must be seen on the wire itself (nothing at all, for DROP) is checked over
//! raw TCP.

use std::fs::{self, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use core_client::transfer_json;
use serde_json::{Value, json};
use testkit::{CoreHttp, spawn_listening};
use wire::Transfer;

/// A running simulator, killed when the test ends however it ends.
struct Core {
    child: Child,
    addr: String,
    http: CoreHttp,
}

impl Core {
    fn start(extra: &[&str]) -> Core {
        Core::start_logged(extra, Stdio::null())
    }

    fn start_logged(extra: &[&str], stderr: Stdio) -> Core {
        Core::spawn(
            Command::new(env!("CARGO_BIN_EXE_coresim"))
                .args(["--listen", "127.0.0.1:0"])
                .args(extra)
                .env_remove("CORESIM_JOURNAL")
                .stderr(stderr),
        )
    }

    /// Starts `cmd` and waits for its `listening on` line.
    fn spawn(cmd: &mut Command) -> Core {
        let (child, addr) = spawn_listening(cmd, Duration::from_secs(10)).expect("start coresim");
        let http = CoreHttp::new(&format!("http://{addr}"), Duration::from_secs(5));
        Core { child, addr, http }
    }

    /// A raw connection, for what the HTTP client cannot show (a hang-up without a byte).
    fn connect(&self) -> TcpStream {
        let stream = TcpStream::connect(&self.addr).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("set timeout");
        stream
    }

    /// One exchange; every answer is JSON (a body that does not parse is `Null`).
    fn request(&self, method: &str, path: &str, body: &[u8]) -> (u16, Value) {
        let body = (method == "POST").then_some(body);
        let r = self
            .http
            .exchange(method, path, body)
            .expect("HTTP exchange");
        assert_eq!(
            r.content_type.as_deref(),
            Some("application/json"),
            "{method} {path}: {r:?}"
        );
        (
            r.status,
            serde_json::from_str(&r.body).unwrap_or(Value::Null),
        )
    }

    fn get(&self, path: &str) -> (u16, Value) {
        self.request("GET", path, b"")
    }

    fn post(&self, guid: &str, memo: &str) -> (u16, Value) {
        self.request("POST", "/v1/transfers", &transfer(guid, memo))
    }

    fn stats(&self) -> Value {
        let (status, stats) = self.get("/_stats");
        assert_eq!(status, 200);
        stats
    }

    /// POSTs a transfer over a raw connection (`close`: asking for `Connection: close`)
    /// and returns the connection unread.
    fn post_raw(&self, guid: &str, memo: &str, close: bool) -> TcpStream {
        let mut stream = self.connect();
        let connection = if close { "Connection: close\r\n" } else { "" };
        let body = transfer(guid, memo);
        let head = format!(
            "POST /v1/transfers HTTP/1.1\r\nHost: core\r\n{connection}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        stream
            .write_all(&[head.as_bytes(), &body].concat())
            .expect("send request");
        stream
    }
}

impl Drop for Core {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The contract's POST body for a transfer of 1500 from account 1 to account 2.
fn transfer(guid: &str, memo: &str) -> Vec<u8> {
    transfer_json(&Transfer {
        guid: guid.into(),
        from_account: "00000000000001".into(),
        to_account: "00000000000002".into(),
        amount: 1500,
        memo: memo.into(),
    })
}

/// Reads until the server closes; the connection must end promptly and empty.
fn assert_hung_up_silently(mut stream: TcpStream) {
    let started = Instant::now();
    let mut raw = Vec::new();
    match stream.read_to_end(&mut raw) {
        Ok(_) => {}
        Err(e) if e.kind() == ErrorKind::ConnectionReset => {}
        Err(e) => panic!(
            "expected EOF or reset, got {e} after {:?}",
            started.elapsed()
        ),
    }
    assert!(raw.is_empty(), "got response bytes: {raw:?}");
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn every_post_books_anew() {
    let core = Core::start(&[]);
    let (s1, first) = core.post("G1", "rent");
    let (s2, second) = core.post("G1", "rent");
    assert_eq!((s1, s2), (200, 200));
    assert_eq!(first["guid"], "G1");
    assert_eq!(first["amount"], 1500);
    assert_ne!(first["core_ref"], second["core_ref"]);
    for core_ref in [&first["core_ref"], &second["core_ref"]] {
        let core_ref = core_ref.as_str().expect("core_ref is a string");
        assert!(
            core_ref.len() == 18 && core_ref.starts_with('C'),
            "{core_ref}"
        );
    }

    let stats = core.stats();
    assert_eq!(stats["bookings"], 2);
    assert_eq!(stats["by_guid"], json!({"G1": 2}));
}

#[test]
fn inquiry_returns_first_booking_or_404_and_is_counted() {
    let core = Core::start(&[]);
    let (_, first) = core.post("G1", "rent");
    core.post("G1", "rent");

    assert_eq!(core.get("/v1/transfers/G1"), (200, first));
    let (status, body) = core.get("/v1/transfers/NOPE");
    assert_eq!(status, 404);
    assert_eq!(body["code"], "N404");

    assert_eq!(core.stats()["inquiries"], 2);
}

#[test]
fn reject_and_fail500_book_nothing() {
    let core = Core::start(&[]);
    let (status, body) = core.post("R1", "REJECT please");
    assert_eq!(status, 422);
    assert_eq!(body["code"], "B001");
    assert_eq!(core.post("F1", "FAIL500").0, 500);

    let stats = core.stats();
    assert_eq!(stats["bookings"], 0);
    assert_eq!(stats["by_guid"], json!({}));
}

#[test]
fn malformed_requests_are_400_and_book_nothing() {
    let core = Core::start(&[]);
    for body in ["{not json", r#"{"guid":"G1","memo":"rent"}"#] {
        let (status, answer) = core.request("POST", "/v1/transfers", body.as_bytes());
        assert_eq!(status, 400, "{body}");
        assert_eq!(answer["code"], "B400");
    }
    assert_eq!(core.get("/nowhere").0, 404);
    assert_eq!(core.stats()["bookings"], 0);
}

#[test]
fn drop_books_then_hangs_up_without_a_byte() {
    let core = Core::start(&[]);
    assert_hung_up_silently(core.post_raw("D1", "DROP", true));
    // A keep-alive client is the harder case: tiny_http would keep reading it.
    assert_hung_up_silently(core.post_raw("D1", "DROP", false));

    assert_eq!(core.stats()["by_guid"], json!({"D1": 2}));
}

#[test]
fn slow_books_after_the_delay_even_for_a_departed_client() {
    let core = Core::start(&["--slow-ms", "300"]);

    drop(core.post_raw("S0", "SLOW", true));

    let started = Instant::now();
    let (status, body) = core.post("S1", "SLOW");
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_eq!(status, 200);
    assert_eq!(body["guid"], "S1");

    // S0 was sent first with the same delay; give it a little slack to finish.
    let deadline = Instant::now() + Duration::from_secs(2);
    while core.stats()["by_guid"].get("S0").is_none() && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(core.stats()["by_guid"], json!({"S0": 1, "S1": 1}));
}

#[test]
fn slow_requests_proceed_concurrently() {
    let core = Core::start(&["--slow-ms", "300"]);
    let started = Instant::now();
    thread::scope(|scope| {
        let handles: Vec<_> = (0..60)
            .map(|i| {
                let core = &core;
                scope.spawn(move || core.post(&format!("P{i}"), "SLOW").0)
            })
            .collect();
        for handle in handles {
            assert_eq!(handle.join().expect("client thread"), 200);
        }
    });
    // Serialised, 60 × 300 ms would be 18 s.
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(core.stats()["bookings"], 60);
}

#[test]
fn inquiry_ms_slows_every_inquiry_and_they_proceed_concurrently() {
    let core = Core::start(&["--inquiry-ms", "300"]);
    let (_, booked) = core.post("I1", "rent");
    let started = Instant::now();
    assert_eq!(core.get("/v1/transfers/I1"), (200, booked));
    assert!(started.elapsed() >= Duration::from_millis(300));

    let started = Instant::now();
    thread::scope(|scope| {
        let handles: Vec<_> = (0..20)
            .map(|i| {
                let core = &core;
                scope.spawn(move || core.get(&format!("/v1/transfers/N{i}")).0)
            })
            .collect();
        for handle in handles {
            assert_eq!(handle.join().expect("client thread"), 404);
        }
    });
    // Serialised, 20 × 300 ms would be 6 s.
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(core.stats()["inquiries"], 21);
    // A POST is not slowed.
    let started = Instant::now();
    core.post("I2", "rent");
    assert!(started.elapsed() < Duration::from_millis(300));
}

// --- the journal (--journal): bookings survive a restart ---

/// A core on `journal` whose stderr goes to `log` (appended).
fn start_journaled(journal: &Path, log: &Path) -> Core {
    let log = OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .expect("open log");
    Core::start_logged(&["--journal", journal.to_str().unwrap()], Stdio::from(log))
}

fn journal_lines(journal: &Path) -> Vec<Value> {
    fs::read_to_string(journal)
        .expect("read journal")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}")))
        .collect()
}

#[test]
fn restart_with_the_same_journal_keeps_bookings_and_inquiries() {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("core.journal");
    let log = dir.path().join("stderr");

    let mut core = start_journaled(&journal, &log);
    let (_, g1) = core.post("G1", "rent");
    core.post("G1", "rent");
    let (_, g2) = core.post("G2", "rent");
    assert_hung_up_silently(core.post_raw("D1", "DROP", true));
    assert_eq!(core.post("F1", "FAIL500").0, 500);
    assert_eq!(core.post("R1", "REJECT").0, 422);
    let before = core.stats();
    assert_eq!(before["by_guid"], json!({"G1": 2, "G2": 1, "D1": 1}));
    // One line per booking, written before the answer: all four are on file already.
    let lines = journal_lines(&journal);
    assert_eq!(lines.len(), 4);
    assert_eq!(lines[0], g1);

    // SIGKILL, as the chaos run does, then the same journal again.
    let _ = core.child.kill();
    let _ = core.child.wait();
    let core = start_journaled(&journal, &log);
    let after = core.stats();
    assert_eq!(after["by_guid"], before["by_guid"]);
    assert_eq!(after["bookings"], 4);
    assert_eq!(core.get("/v1/transfers/G1"), (200, g1.clone()));
    assert_eq!(core.get("/v1/transfers/G2"), (200, g2));
    assert_eq!(core.get("/v1/transfers/F1").0, 404);
    assert_eq!(core.get("/v1/transfers/D1").0, 200);

    // New bookings go on with fresh core_refs and land in the same journal.
    let (status, g3) = core.post("G3", "rent");
    assert_eq!(status, 200);
    let old_refs: Vec<&Value> = lines.iter().map(|l| &l["core_ref"]).collect();
    assert!(
        !old_refs.contains(&&g3["core_ref"]),
        "{g3} reuses a core_ref"
    );
    assert!(g3["core_ref"].as_str() > g1["core_ref"].as_str());
    assert_eq!(core.stats()["bookings"], 5);
    assert_eq!(journal_lines(&journal).len(), 5);
    assert!(
        fs::read_to_string(&log).unwrap().contains("4 bookings"),
        "start-up should say what it loaded"
    );
}

#[test]
fn a_torn_last_line_is_ignored_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("core.journal");
    let log = dir.path().join("stderr");
    let good = r#"{"guid":"G1","core_ref":"C00000000000000007","amount":1500,"booked_at":"2026-01-01T00:00:00Z"}"#;
    // A process killed in the middle of writing its second line.
    fs::write(&journal, format!("{good}\n{{\"guid\":\"G2\",\"core_r")).unwrap();

    let core = start_journaled(&journal, &log);
    assert_eq!(core.stats()["by_guid"], json!({"G1": 1}));
    assert_eq!(core.get("/v1/transfers/G2").0, 404);
    let stderr = fs::read_to_string(&log).unwrap();
    assert!(
        stderr.contains("torn"),
        "no warning about the torn line: {stderr}"
    );

    // The torn bytes are gone, so the next booking is a clean line of its own.
    let (_, g3) = core.post("G3", "rent");
    let lines = journal_lines(&journal);
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[1], g3);
    drop(core);
    let core = start_journaled(&journal, &log);
    assert_eq!(core.stats()["by_guid"], json!({"G1": 1, "G3": 1}));
}

#[test]
fn a_damaged_line_before_the_last_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("core.journal");
    let good = r#"{"guid":"G1","core_ref":"C00000000000000007","amount":1500,"booked_at":"2026-01-01T00:00:00Z"}"#;
    fs::write(&journal, format!("garbage\n{good}\n")).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_coresim"))
        .args([
            "--listen",
            "127.0.0.1:0",
            "--journal",
            journal.to_str().unwrap(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn coresim");
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("coresim started on a damaged journal");
        }
        thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("line 1"), "{stderr}");
    // Nothing was cut from a journal it refused.
    assert_eq!(
        fs::read_to_string(&journal).unwrap(),
        format!("garbage\n{good}\n")
    );
}

#[test]
fn the_journal_can_be_given_by_environment() {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("env.journal");
    let core = Core::spawn(
        Command::new(env!("CARGO_BIN_EXE_coresim"))
            .args(["--listen", "127.0.0.1:0"])
            .env("CORESIM_JOURNAL", &journal)
            .stderr(Stdio::null()),
    );
    core.post("E1", "rent");
    assert_eq!(journal_lines(&journal).len(), 1);
}
