//! The frame and idle timeouts inside TLS (CONTRACT §2, §8 v1.3, §9): a channel that sends
//! a TLS record one byte at a time lets no single read of the socket wait long, yet it must
//! not keep a connection open past `--frame-timeout-ms` from a request's first byte, nor
//! past `--idle-timeout-secs` between requests — on the frames' door and on the HTTP door.
//!
//! The trickling channel is a rustls client driven by hand: it seals a request (or its rest)
//! into one record, then sends that record's bytes one by one.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use rustls::ClientConnection;
use rustls::pki_types::ServerName;
use testkit::pki::Pki;
use testkit::tls_client::ClientTls;

use super::metrics::relay_with_admin;
use super::tls_scene::path;
use crate::util::*;

/// The frame timeout the tests run with.
const FRAME: Duration = Duration::from_millis(1500);
/// The idle timeout the idle tests run with (`--idle-timeout-secs 2`).
const IDLE: Duration = Duration::from_secs(2);
/// How long past a timeout the relay may take to close (a busy machine's scheduling).
const MARGIN: Duration = Duration::from_secs(2);
/// One byte every this long: far within every timeout, so that only a deadline that spans
/// the reads can end the connection (the whole record takes many seconds).
const EVERY: Duration = Duration::from_millis(100);

/// A TLS session whose records the test puts on the wire itself.
struct RawTls {
    sock: TcpStream,
    conn: ClientConnection,
}

impl RawTls {
    /// Connects to `addr` and finishes the handshake, trusting `pki`'s CA.
    fn connect(addr: &str, pki: &Pki) -> RawTls {
        let config = ClientTls::new(pki.ca(), "127.0.0.1")
            .config()
            .expect("a client configuration");
        let name = ServerName::try_from("127.0.0.1").expect("a server name");
        let mut conn = ClientConnection::new(config, name).expect("a client session");
        let mut sock = TcpStream::connect(addr).expect("connect");
        sock.set_read_timeout(Some(WAIT)).unwrap();
        sock.set_nodelay(true).unwrap();
        while conn.is_handshaking() {
            conn.complete_io(&mut sock).expect("a handshake");
        }
        RawTls { sock, conn }
    }

    /// `plain` sealed into TLS records (one, for the sizes here), as bytes for the wire.
    fn seal(&mut self, plain: &[u8]) -> Vec<u8> {
        self.conn.writer().write_all(plain).unwrap();
        let mut wire = Vec::new();
        while self.conn.wants_write() {
            self.conn.write_tls(&mut wire).unwrap();
        }
        wire
    }

    /// Sends `plain` at once, in one record.
    fn send(&mut self, plain: &[u8]) {
        let wire = self.seal(plain);
        self.sock.write_all(&wire).unwrap();
    }

    /// Sends `bytes` one at a time, `EVERY` apart, until they are all sent or the relay has
    /// closed the connection; the moment the relay's close (end of stream or a reset) was
    /// seen, or `None` if not within `limit`.
    fn trickle_until_closed(&self, bytes: Vec<u8>, limit: Duration) -> Option<Instant> {
        let stop = Arc::new(AtomicBool::new(false));
        let (closed_tx, closed) = mpsc::channel();
        let mut reader = self.sock.try_clone().unwrap();
        reader
            .set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        let stop_reading = Arc::clone(&stop);
        // What the relay sends (session tickets, its close_notify) is read raw, only to see
        // the connection end.
        let watcher = thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while !stop_reading.load(Ordering::SeqCst) {
                match reader.read(&mut buf) {
                    Ok(0) => break,
                    Ok(_) => {}
                    Err(e) if testkit::channel::is_timeout(&e) => {}
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
            let _ = closed_tx.send(Instant::now());
        });
        let mut writer = self.sock.try_clone().unwrap();
        let stop_writing = Arc::clone(&stop);
        let trickler = thread::spawn(move || {
            for b in bytes {
                if stop_writing.load(Ordering::SeqCst) || writer.write_all(&[b]).is_err() {
                    return;
                }
                thread::sleep(EVERY);
            }
        });
        let closed_at = closed.recv_timeout(limit).ok();
        stop.store(true, Ordering::SeqCst);
        watcher.join().unwrap();
        trickler.join().unwrap();
        closed_at
    }

    fn port(&self) -> u16 {
        self.sock.local_addr().unwrap().port()
    }
}

/// A relay with TLS on its channel listener and its HTTP door, with `extra` flags; its
/// ledger, core, CA and HTTP address.
struct Doors {
    pki: Pki,
    db: TempLedger,
    core: Core,
    relay: Server,
    http: String,
}

fn doors(extra: &[&str]) -> Doors {
    let pki = Pki::new("relay CA");
    let server = pki.server(&["localhost", "127.0.0.1"]);
    let db = temp_ledger();
    let core = Core::start(&[]);
    let (flag, http) = http_listen();
    let mut args = vec![
        "--tls-cert",
        path(&server.cert),
        "--tls-key",
        path(&server.key),
        &flag,
        &http,
    ];
    args.extend(extra);
    let (relay, _admin) = relay_with_admin(&db, &core.url(), &args);
    Doors {
        pki,
        db,
        core,
        relay,
        http,
    }
}

/// Whether the relay logged that the connection from local `port` closed with `why`.
fn closed_for(relay: &Server, port: u16, why: &str) -> bool {
    let peer = format!("connection 127.0.0.1:{port} closed: {why}");
    eventually(WAIT, || relay.stderr().lines().any(|l| l.contains(&peer)))
}

/// Asserts that `closed_at` (a trickle's end) came after `timeout` from `from`, and not
/// much later.
fn assert_closed_at_the_timeout(
    what: &str,
    from: Instant,
    closed_at: Option<Instant>,
    timeout: Duration,
) {
    let closed_at = closed_at.unwrap_or_else(|| {
        panic!(
            "{what}: still open {:?} after the {timeout:?} timeout began",
            timeout + MARGIN
        )
    });
    let took = closed_at.duration_since(from);
    assert!(
        took + Duration::from_millis(20) >= timeout,
        "{what}: closed after {took:?}, before the {timeout:?} timeout"
    );
}

/// Sends `head` bytes of `request` to the door at `addr` at once and the rest one byte of its
/// TLS record at a time: the connection is closed at the frame timeout, logged so, and
/// `guid` never claimed.
fn trickled_request_is_closed_at_the_frame_timeout(
    s: &Doors,
    addr: &str,
    request: &[u8],
    head: usize,
    guid: &str,
    what: &str,
) {
    let mut chan = RawTls::connect(addr, &s.pki);
    let started = Instant::now();
    chan.send(&request[..head]);
    let rest = chan.seal(&request[head..]);
    let closed_at = chan.trickle_until_closed(rest, FRAME + MARGIN);
    assert_closed_at_the_timeout(what, started, closed_at, FRAME);
    assert!(
        closed_for(
            &s.relay,
            chan.port(),
            "frame not complete within the frame timeout"
        ),
        "{}",
        s.relay.stderr()
    );
    assert_eq!(s.db.state(guid), None, "nothing was claimed");
    assert_eq!(s.core.total_bookings(), 0);
}

#[test]
fn a_frame_trickled_inside_tls_is_closed_at_the_frame_timeout() {
    skip_if_unavailable!();
    let s = doors(&["--frame-timeout-ms", "1500", "--idle-timeout-secs", "300"]);
    // The frame's length at once, the rest one byte of its record at a time.
    let frame = wire::frame(&msg("G-TRICKLE-TCP", 5, ""));
    let addr = s.relay.addr.clone();
    trickled_request_is_closed_at_the_frame_timeout(
        &s,
        &addr,
        &frame,
        4,
        "G-TRICKLE-TCP",
        "a trickled frame",
    );
}

#[test]
fn an_http_request_trickled_inside_tls_is_closed_at_the_frame_timeout() {
    skip_if_unavailable!();
    let s = doors(&["--frame-timeout-ms", "1500", "--idle-timeout-secs", "300"]);
    let request = post_bytes(Some("\"G-TRICKLE-HTTP\""), &transfer_body(5, ""));
    let addr = s.http.clone();
    trickled_request_is_closed_at_the_frame_timeout(
        &s,
        &addr,
        &request,
        20,
        "G-TRICKLE-HTTP",
        "a trickled HTTP request",
    );
}

/// Between requests, a record that never ends is idleness: closed at the idle timeout,
/// counted from the end of the previous answer (here: of the handshake), on both doors.
#[test]
fn a_tls_connection_that_trickles_between_requests_is_closed_at_the_idle_timeout() {
    skip_if_unavailable!();
    let s = doors(&["--frame-timeout-ms", "30000", "--idle-timeout-secs", "2"]);
    let http_request = post_bytes(Some("\"G-IDLE-HTTP\""), &transfer_body(5, ""));
    for (door, addr, request) in [
        ("tcp", &s.relay.addr, wire::frame(&msg("G-IDLE-TCP", 5, ""))),
        ("http", &s.http, http_request),
    ] {
        let mut chan = RawTls::connect(addr, &s.pki);
        let started = Instant::now();
        let record = chan.seal(&request);
        let closed_at = chan.trickle_until_closed(record, IDLE + MARGIN);
        assert_closed_at_the_timeout(door, started, closed_at, IDLE - Duration::from_millis(200));
        assert!(
            closed_for(&s.relay, chan.port(), "idle timeout"),
            "{door}: {}",
            s.relay.stderr()
        );
    }
    assert_eq!(s.core.total_bookings(), 0);
    // A channel that sends its request whole is served as ever.
    let mut chan = testkit::tls_client::connect(
        &s.relay.addr.parse().unwrap(),
        &ClientTls::new(s.pki.ca(), "127.0.0.1").config().unwrap(),
        "127.0.0.1",
        WAIT,
    )
    .unwrap();
    assert_code(&chan.call(&msg("G-IDLE-OK", 5, "")).unwrap(), "0000");
}
