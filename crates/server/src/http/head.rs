//! Reading one HTTP/1.1 request under the idle and request timeouts: its head (parsed by
//! `httparse`) and a `Content-Length` body, and nothing the relay does not take.

use std::io::{self, BufRead, BufReader, Read};
use std::time::{Duration, Instant};

use super::super::clock::{Clock, await_request};
use super::super::frames::{ConnEnd, is_timeout};

/// The longest request head read: a larger one is refused (431) and the connection closed.
pub(super) const MAX_HEAD: usize = 16 * 1024;
/// The largest body a POST may carry (CONTRACT §9).
pub(super) const MAX_BODY: usize = 16 * 1024;
/// Header lines read at most.
const MAX_HEADERS: usize = 64;

/// A request head as the relay needs it.
#[derive(Debug)]
pub(super) struct Head {
    pub method: String,
    /// The request target as sent (origin form).
    pub target: String,
    /// HTTP/1.0 (`0`) or HTTP/1.1 (`1`).
    pub version: u8,
    /// Names lower-cased, values as sent.
    pub headers: Vec<(String, Vec<u8>)>,
}

impl Head {
    /// Every value of the header `name` (lower case).
    pub fn all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.headers
            .iter()
            .filter(move |(n, _)| n == name)
            .map(|(_, v)| v.as_slice())
    }

    /// Whether an HTTP/1.1 client waits for `100 Continue` before it sends its body.
    pub fn expects_continue(&self) -> bool {
        self.version == 1
            && self
                .all("expect")
                .any(|v| v.trim_ascii().eq_ignore_ascii_case(b"100-continue"))
    }

    /// Whether the connection stays open after the answer (HTTP/1.1 unless `close`;
    /// HTTP/1.0 only with `keep-alive`).
    pub fn keep_alive(&self) -> bool {
        let has = |token: &str| {
            self.all("connection").any(|v| {
                String::from_utf8_lossy(v)
                    .split(',')
                    .any(|t| t.trim().eq_ignore_ascii_case(token))
            })
        };
        if self.version == 0 {
            has("keep-alive")
        } else {
            !has("close")
        }
    }
}

/// Why no request head could be had.
#[derive(Debug)]
pub(super) enum BadHead {
    /// The connection ended (cleanly, late, or by an error): close it without an answer.
    End(ConnEnd),
    /// Not a request line and headers httparse takes: answer 400 and close.
    Malformed(String),
    /// Longer than `MAX_HEAD`: answer 431 and close.
    TooLarge,
}

/// Reads one request head from `r`, a reader over the connection's socket whose reads
/// `clock` bounds. `Ok(None)`: the channel closed cleanly between requests. The idle timeout
/// runs until the first byte; from then on the request has until the returned deadline
/// (`frame`), which also bounds its body.
pub(super) fn read_head<R: Read>(
    r: &mut BufReader<R>,
    clock: &Clock,
    idle: Duration,
    frame: Duration,
) -> Result<Option<(Head, Instant)>, BadHead> {
    match await_request(r, clock, idle) {
        Ok(true) => {}
        Ok(false) => return Ok(None),
        Err(end) => return Err(BadHead::End(end)),
    }
    let at = Instant::now() + frame;
    clock.until(at);
    let mut raw = Vec::with_capacity(512);
    loop {
        // What the reader holds (refilled by `at` when empty), taken up to the head's end:
        // the body and any pipelined request stay in the reader.
        let chunk = match r.fill_buf() {
            Ok([]) => return Err(BadHead::End(ConnEnd::EofMidFrame)),
            Ok(chunk) => chunk,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(BadHead::End(end_of(e))),
        };
        let (mut taken, mut done) = (chunk.len(), false);
        for (i, &b) in chunk.iter().enumerate() {
            if raw.len() >= MAX_HEAD {
                return Err(BadHead::TooLarge);
            }
            raw.push(b);
            // A bare LF line end is not the CRLF of RFC 9112: refused by httparse below.
            if raw.ends_with(b"\r\n\r\n") || raw.ends_with(b"\n\n") {
                (taken, done) = (i + 1, true);
                break;
            }
        }
        r.consume(taken);
        if done {
            return parse(&raw).map(|h| Some((h, at)));
        }
    }
}

fn end_of(e: io::Error) -> ConnEnd {
    match e.kind() {
        io::ErrorKind::UnexpectedEof => ConnEnd::EofMidFrame,
        _ if is_timeout(&e) => ConnEnd::FrameTimeout,
        _ => ConnEnd::Io(e),
    }
}

fn parse(raw: &[u8]) -> Result<Head, BadHead> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    match req.parse(raw) {
        Ok(httparse::Status::Complete(n)) if n == raw.len() => {}
        Ok(_) => return Err(BadHead::Malformed("incomplete request head".into())),
        Err(e) => return Err(BadHead::Malformed(e.to_string())),
    }
    let (Some(method), Some(target), Some(version)) = (req.method, req.path, req.version) else {
        return Err(BadHead::Malformed("incomplete request line".into()));
    };
    Ok(Head {
        method: method.to_string(),
        target: target.to_string(),
        version,
        headers: req
            .headers
            .iter()
            .map(|h| (h.name.to_ascii_lowercase(), h.value.to_vec()))
            .collect(),
    })
}

/// What a request's framing headers say about its body.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum BodyLen {
    /// No `Content-Length` (and no `Transfer-Encoding`): no body.
    None,
    /// A `Transfer-Encoding` (chunked or any other): the relay reads no such body.
    Encoded,
    Length(usize),
    /// Several `Content-Length`s that differ, or one that is not digits: 400 and close.
    Bad,
}

pub(super) fn body_len(head: &Head) -> BodyLen {
    if head.all("transfer-encoding").next().is_some() {
        return BodyLen::Encoded;
    }
    let mut found: Option<usize> = None;
    for v in head.all("content-length") {
        for part in v.split(|&b| b == b',') {
            let part = part.trim_ascii();
            if part.is_empty() || part.len() > 19 || !part.iter().all(u8::is_ascii_digit) {
                return BodyLen::Bad;
            }
            let n = std::str::from_utf8(part)
                .ok()
                .and_then(|s| s.parse::<u64>().ok())
                .map_or(usize::MAX, |n| usize::try_from(n).unwrap_or(usize::MAX));
            match found {
                Some(m) if m != n => return BodyLen::Bad,
                _ => found = Some(n),
            }
        }
    }
    found.map_or(BodyLen::None, BodyLen::Length)
}

/// Reads a body of `len` bytes by `at`.
pub(super) fn read_body<R: Read>(
    r: &mut BufReader<R>,
    clock: &Clock,
    len: usize,
    at: Instant,
) -> Result<Vec<u8>, ConnEnd> {
    let mut body = vec![0u8; len];
    clock.until(at);
    r.read_exact(&mut body).map_err(end_of)?;
    Ok(body)
}
