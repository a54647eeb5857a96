//! A minimal HTTP/1.1 server for the simulator: a thread per connection, keep-alive,
//! `Content-Length` bodies only.
//!
//! Why not tiny_http: its 0.12 task pool hands a new connection to a worker that is already
//! taken whenever two connections arrive before a waiting worker wakes, so the new one waits
//! until some other keep-alive connection closes. Against a relay that keeps connections to
//! the core alive this showed as requests stalled for seconds (read timeouts, so UNKNOWNs)
//! and capped the benchmark's ceiling. Here every connection has its own thread, a SLOW
//! request holds up only its own connection, and DROP is a plain socket shutdown.
//!
//! With a TLS configuration (`--tls-cert`, `--tls-key`, `--client-ca`) every connection is
//! TLS (rustls), its handshake done in the connection's own thread on its first read; a
//! handshake that fails ends that connection before any request is read.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::Arc;
use std::thread;

use rustls::{ServerConfig, ServerConnection, StreamOwned};
use std::time::Duration;

use log::{debug, warn};

use crate::sim::{Core, Outcome, Reply};

/// Larger requests are not transfers.
const MAX_HEAD: usize = 16 * 1024;
const MAX_BODY: usize = 64 * 1024;
/// A keep-alive connection silent this long is closed, so abandoned clients cost nothing.
const IDLE: Duration = Duration::from_secs(120);
const STACK: usize = 256 * 1024;

/// A connection's bytes: plain TCP, or TLS over it.
trait Stream: Read + Write {
    fn tcp(&self) -> &TcpStream;
}

impl Stream for TcpStream {
    fn tcp(&self) -> &TcpStream {
        self
    }
}

impl Stream for StreamOwned<ServerConnection, TcpStream> {
    fn tcp(&self) -> &TcpStream {
        &self.sock
    }
}

/// Accepts for ever, a thread per connection; TLS on every connection with `tls`.
pub fn serve(
    listener: TcpListener,
    core: Arc<Core>,
    tls: Option<Arc<ServerConfig>>,
) -> io::Result<()> {
    for stream in listener.incoming() {
        let stream = match stream {
            Ok(s) => s,
            Err(e) => {
                // Out of descriptors, typically: back off rather than spin.
                warn!("accept failed: {e}");
                thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        let core = Arc::clone(&core);
        let tls = tls.clone();
        let spawned = thread::Builder::new()
            .name("http".into())
            .stack_size(STACK)
            .spawn(move || {
                if let Err(e) = accepted(&core, stream, tls) {
                    debug!("connection ended: {e}");
                }
            });
        if let Err(e) = spawned {
            warn!("cannot start a connection thread: {e}");
        }
    }
    Ok(())
}

/// One parsed request.
struct Request {
    method: String,
    path: String,
    body: Vec<u8>,
    keep_alive: bool,
}

fn accepted(core: &Core, stream: TcpStream, tls: Option<Arc<ServerConfig>>) -> io::Result<()> {
    let _ = stream.set_nodelay(true);
    stream.set_read_timeout(Some(IDLE))?;
    match tls {
        None => connection(core, stream),
        Some(config) => {
            let tls = ServerConnection::new(config).map_err(io::Error::other)?;
            connection(core, StreamOwned::new(tls, stream))
        }
    }
}

fn connection(core: &Core, stream: impl Stream) -> io::Result<()> {
    let mut reader = BufReader::new(stream);
    let mut out = Vec::with_capacity(512);
    loop {
        let req = match read_request(&mut reader) {
            Ok(Some(r)) => r,
            Ok(None) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                let _ = send(
                    reader.get_mut(),
                    &response(
                        400,
                        br#"{"code":"B400","message":"bad HTTP request"}"#,
                        false,
                    ),
                );
                return Err(e);
            }
            Err(e) => return Err(e),
        };
        let outcome: Outcome = core.handle(&req.method, &req.path, &req.body);
        debug!(
            "{} {} guid={} directive={}",
            req.method,
            req.path,
            outcome.guid.as_deref().unwrap_or("-"),
            outcome.directive.name()
        );
        match outcome.reply {
            Reply::Json(status, value) => {
                out.clear();
                serde_json::to_writer(&mut out, &value).expect("JSON to memory");
                // A client that has gone (timed out on SLOW) is not our problem: the booking
                // stands, exactly as it would in the real core.
                send(reader.get_mut(), &response(status, &out, req.keep_alive))?;
                if !req.keep_alive {
                    return Ok(());
                }
            }
            Reply::Drop => {
                // Not a byte of answer: the client sees end-of-file or a reset at once.
                let _ = reader.get_ref().tcp().shutdown(Shutdown::Both);
                return Ok(());
            }
        }
    }
}

/// Writes `bytes` and flushes them (TLS: out of rustls's buffer onto the socket).
fn send(w: &mut impl Write, bytes: &[u8]) -> io::Result<()> {
    w.write_all(bytes)?;
    w.flush()
}

fn response(status: u16, body: &[u8], keep_alive: bool) -> Vec<u8> {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        422 => "Unprocessable Entity",
        500 => "Internal Server Error",
        _ => "Status",
    };
    let mut r = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{}\r\n",
        body.len(),
        if keep_alive { "" } else { "Connection: close\r\n" }
    )
    .into_bytes();
    r.extend_from_slice(body);
    r
}

fn invalid(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.to_string())
}

/// Reads one request; `Ok(None)` when the client closed between requests.
fn read_request(r: &mut impl BufRead) -> io::Result<Option<Request>> {
    let mut head = Vec::with_capacity(256);
    loop {
        let n = r
            .by_ref()
            .take(MAX_HEAD as u64)
            .read_until(b'\n', &mut head)?;
        if n == 0 {
            return if head.is_empty() {
                Ok(None)
            } else {
                Err(io::ErrorKind::UnexpectedEof.into())
            };
        }
        if head.ends_with(b"\r\n\r\n") || head.ends_with(b"\n\n") {
            break;
        }
        if head.len() >= MAX_HEAD {
            return Err(invalid("request head too large"));
        }
    }
    let head = std::str::from_utf8(&head).map_err(|_| invalid("request head not UTF-8"))?;
    let mut lines = head.lines();
    let mut first = lines.next().unwrap_or_default().split_whitespace();
    let (Some(method), Some(target), Some(version)) = (first.next(), first.next(), first.next())
    else {
        return Err(invalid("bad request line"));
    };
    let mut keep_alive = version == "HTTP/1.1";
    let mut length = 0usize;
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            length = value.parse().map_err(|_| invalid("bad Content-Length"))?;
        } else if name.eq_ignore_ascii_case("connection") {
            keep_alive = !value.eq_ignore_ascii_case("close")
                && (keep_alive || value.eq_ignore_ascii_case("keep-alive"));
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            return Err(invalid("chunked bodies are not supported"));
        }
    }
    if length > MAX_BODY {
        return Err(invalid("body too large"));
    }
    let mut body = vec![0; length];
    r.read_exact(&mut body)?;
    // The simulator routes on the path only.
    let path = target.split('?').next().unwrap_or(target).to_string();
    Ok(Some(Request {
        method: method.to_string(),
        path,
        body,
        keep_alive,
    }))
}
