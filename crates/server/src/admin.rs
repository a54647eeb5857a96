//! `relay --admin ADDR`: a small HTTP/1.1 server for operators, apart from the channel
//! port. `GET /metrics` is the Prometheus text exposition of `metrics`; `GET /healthz` is
//! 200 while the ledger takes a claim-like write of `tx` (rolled back) and answers a write
//! and a read round trip (`Store::health_round_trip`), 503 otherwise.
//!
//! It is std::net and a thread per request, at most `MAX_CONNECTIONS` at once (more are
//! closed at once): a scraper every few seconds is all it serves. A request's head must be
//! complete within `HEAD_DEADLINE` of its connection's acceptance, however slowly it comes,
//! so that connections dribbling a byte now and then hold no slot for longer; each write
//! is bounded by `IO_TIMEOUT`. Nothing it does touches the channel connections, their limits or their threads;
//! the ledger rows it reports are read by the `metrics::Sampler`, not per scrape.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use log::{info, warn};

use crate::metrics::{CONTENT_TYPE, Metrics, SAMPLE_INTERVAL, Sampler, Thresholds};
use ledger::store::Store;

/// Admin requests served at once; more connections are closed at once. Enough that a few
/// stuck or slow clients leave room for the scrapers and health checks (a thread of 256 KiB
/// stack each, for at most `HEAD_DEADLINE` plus the answer).
pub const MAX_CONNECTIONS: usize = 16;
/// The whole request head, from the connection's acceptance to its blank line.
pub const HEAD_DEADLINE: Duration = Duration::from_secs(5);
/// Each write on an admin connection.
const IO_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest request head read.
const MAX_HEAD: usize = 8 * 1024;

/// The admin server: its accept thread and the ledger sampler. Dropping it stops both.
pub struct Admin {
    addr: SocketAddr,
    stopping: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
    _sampler: Sampler,
}

impl Admin {
    /// Binds `addr` (the caller reports a failure as a start error).
    pub fn bind(addr: &str) -> io::Result<TcpListener> {
        TcpListener::bind(addr)
    }

    /// Serves `listener` and starts sampling `store` for the metrics, counting against
    /// `limits`.
    pub fn start(
        listener: TcpListener,
        store: Arc<dyn Store>,
        metrics: Arc<Metrics>,
        limits: Thresholds,
    ) -> io::Result<Admin> {
        let addr = listener.local_addr()?;
        let sampler = Sampler::start(
            Arc::clone(&store),
            Arc::clone(&metrics),
            SAMPLE_INTERVAL,
            limits,
        )?;
        let stopping = Arc::new(AtomicBool::new(false));
        let stop = Arc::clone(&stopping);
        let accept = std::thread::Builder::new()
            .name("admin".into())
            .stack_size(256 * 1024)
            .spawn(move || accept_loop(&listener, &store, &metrics, &stop))?;
        info!("admin listening on {addr} (GET /metrics, GET /healthz)");
        Ok(Admin {
            addr,
            stopping,
            accept: Some(accept),
            _sampler: sampler,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Admin {
    fn drop(&mut self) {
        self.stopping.store(true, Ordering::SeqCst);
        // `accept` has no timeout: wake it with a connection of our own.
        let mut wake = self.addr;
        if wake.ip().is_unspecified() {
            wake.set_ip(match wake {
                SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
            });
        }
        if TcpStream::connect_timeout(&wake, Duration::from_secs(1)).is_ok()
            && let Some(t) = self.accept.take()
        {
            let _ = t.join();
        }
    }
}

fn accept_loop(
    listener: &TcpListener,
    store: &Arc<dyn Store>,
    metrics: &Arc<Metrics>,
    stopping: &AtomicBool,
) {
    let busy = Arc::new(AtomicUsize::new(0));
    for stream in listener.incoming() {
        if stopping.load(Ordering::SeqCst) {
            return;
        }
        let stream = match stream {
            Ok(s) => s,
            Err(e) => {
                warn!("admin: accept failed: {e}");
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        if busy.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
            busy.fetch_sub(1, Ordering::SeqCst);
            continue; // closed: a scraper retries at its next interval
        }
        let (store, metrics, done) = (Arc::clone(store), Arc::clone(metrics), Arc::clone(&busy));
        let spawned = std::thread::Builder::new()
            .name("admin-conn".into())
            .stack_size(256 * 1024)
            .spawn(move || {
                if let Err(e) = serve(&stream, store.as_ref(), &metrics) {
                    info!("admin: connection closed: {e}");
                }
                let _ = stream.shutdown(Shutdown::Both);
                done.fetch_sub(1, Ordering::SeqCst);
            });
        if let Err(e) = spawned {
            busy.fetch_sub(1, Ordering::SeqCst);
            warn!("admin: cannot start a thread: {e}");
        }
    }
}

/// Answers one request, then closes.
fn serve(stream: &TcpStream, store: &dyn Store, metrics: &Metrics) -> io::Result<()> {
    let deadline = Instant::now() + HEAD_DEADLINE;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    let head = read_head(stream, deadline)?;
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut req = httparse::Request::new(&mut headers);
    let (method, path) = match req.parse(&head) {
        Ok(httparse::Status::Complete(_)) => (
            req.method.unwrap_or_default().to_string(),
            req.path.unwrap_or_default().to_string(),
        ),
        _ => return respond(stream, 400, "text/plain", "bad request\n"),
    };
    let path = path.split('?').next().unwrap_or_default();
    let (status, content_type, body) = route(&method, path, store, metrics);
    respond(stream, status, content_type, &body)
}

/// What a request gets: status, content type, body.
pub fn route(
    method: &str,
    path: &str,
    store: &dyn Store,
    metrics: &Metrics,
) -> (u16, &'static str, String) {
    const TEXT: &str = "text/plain; charset=utf-8";
    match (method, path) {
        ("GET", "/metrics") => (200, CONTENT_TYPE, metrics.encode()),
        ("GET", "/healthz") => match store.health_round_trip() {
            Ok(()) => (200, TEXT, "ok\n".into()),
            Err(e) => {
                warn!("admin: /healthz: the ledger did not answer: {e}");
                (503, TEXT, format!("ledger: {e}\n"))
            }
        },
        (_, "/metrics" | "/healthz") => (405, TEXT, "method not allowed\n".into()),
        _ => (404, TEXT, "not found: try /metrics or /healthz\n".into()),
    }
}

/// The request line and headers, up to the blank line, by `deadline` however they come.
fn read_head(mut stream: &TcpStream, deadline: Instant) -> io::Result<Vec<u8>> {
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        if head.len() > MAX_HEAD {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "request head too long",
            ));
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "request head not complete in time",
            ));
        }
        stream.set_read_timeout(Some(left))?;
        let n = match stream.read(&mut buf) {
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                continue; // the deadline check above says so
            }
            r => r?,
        };
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        head.extend_from_slice(&buf[..n]);
    }
    Ok(head)
}

fn respond(mut stream: &TcpStream, status: u16, content_type: &str, body: &str) -> io::Result<()> {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        _ => "Service Unavailable",
    };
    let head = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\n\
         Content-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(body.as_bytes())?;
    stream.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ledger::group_commit::GroupCommit;

    fn get(addr: SocketAddr, path: &str) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    }

    #[test]
    fn serves_metrics_and_health_and_stops_when_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("l.db");
        let store: Arc<dyn Store> = Arc::new(GroupCommit::open(&path, "test").unwrap());
        let admin = Admin::start(
            Admin::bind("127.0.0.1:0").unwrap(),
            store,
            Arc::new(Metrics::new("test")),
            Thresholds::default(),
        )
        .unwrap();
        let addr = admin.local_addr();

        let m = get(addr, "/metrics");
        assert!(m.starts_with("HTTP/1.1 200 OK\r\n"), "{m}");
        assert!(m.contains("Content-Type: text/plain; version=0.0.4"), "{m}");
        assert!(m.contains("# TYPE txrelay_requests_total counter"), "{m}");

        let h = get(addr, "/healthz");
        assert!(h.starts_with("HTTP/1.1 200 OK\r\n"), "{h}");
        assert!(h.ends_with("\r\n\r\nok\n"), "{h}");
        // The health row is written; no tx row is.
        let l = ledger::sqlite::Ledger::open(&path).unwrap();
        assert!(l.read_health().unwrap().is_some());
        assert_eq!(l.count_by_state().unwrap(), vec![]);

        assert!(get(addr, "/nope").starts_with("HTTP/1.1 404 "));
        let mut s = TcpStream::connect(addr).unwrap();
        write!(s, "POST /metrics HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        assert!(out.starts_with("HTTP/1.1 405 "), "{out}");

        drop(admin);
        assert!(TcpStream::connect(addr).is_err(), "the port is closed");
    }

    #[test]
    fn health_is_503_when_the_ledger_cannot_be_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("l.db");
        let store = GroupCommit::open(&path, "test").unwrap();
        assert_eq!(
            route("GET", "/healthz", &store, &Metrics::new("test")).0,
            200
        );
        // Another connection holds the write lock past the busy timeout.
        let other = ledger::sqlite::Ledger::open(&path).unwrap();
        other.connection().execute_batch("BEGIN IMMEDIATE").unwrap();
        let (status, _, body) = route("GET", "/healthz", &store, &Metrics::new("test"));
        assert_eq!(status, 503, "{body}");
        assert!(body.starts_with("ledger: "), "{body}");
        other.connection().execute_batch("ROLLBACK").unwrap();
        assert_eq!(
            route("GET", "/healthz", &store, &Metrics::new("test")).0,
            200
        );
    }
}
