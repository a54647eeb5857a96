//! `--http`: a channel's requests through a relay's HTTP channel API (CONTRACT §9) instead
//! of frames, on a kept-alive HTTP/1.1 connection per relay, the GUID as the
//! Idempotency-Key. The answer is mapped back to the reply frame the TCP door would have
//! sent for it (§9's table read backwards: a 200's `rsp_code` and booking, 202 → `E901`, a
//! problem's `code`), so every check holds HTTP answers to the same rules as frames. What
//! cannot be mapped (another GUID, a 0000 without its booking, a status without a code) is
//! `Garbage`, a finding of check (e).

use std::io::{self, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use serde_json::Value;
use testkit::channel::is_timeout;
use testkit::http_channel;

use crate::channel::Answer;

/// A kept-alive connection to one relay's `--http-listen` address.
pub struct HttpConn {
    conn: BufReader<TcpStream>,
}

impl HttpConn {
    pub fn connect(addr: &SocketAddr, connect: Duration, reply: Duration) -> io::Result<Self> {
        let s = TcpStream::connect_timeout(addr, connect)?;
        if s.local_addr().ok() == s.peer_addr().ok() {
            return Err(io::Error::other("connected to itself"));
        }
        s.set_read_timeout(Some(reply))?;
        s.set_write_timeout(Some(reply))?;
        let _ = s.set_nodelay(true);
        Ok(HttpConn {
            conn: BufReader::new(s),
        })
    }

    /// POSTs the transfer `msg` holds. The second value: whether the connection may be
    /// used again.
    pub fn exchange(&mut self, msg: &[u8]) -> (Answer, bool) {
        let (guid, request) = match http_channel::post_transfer(msg, "relay") {
            Ok(r) => r,
            Err(rule) => return (Answer::Garbage(format!("cannot send {rule:?}")), false),
        };
        if let Err(e) = self.conn.get_mut().write_all(request.as_bytes()) {
            return (Answer::NoReply(format!("write: {e}")), false);
        }
        match http_channel::read_answer(&mut self.conn) {
            Ok((status, close, body)) => {
                let a = to_frame(msg, &guid, status, &body);
                let reuse = !close && matches!(a, Answer::Reply(_));
                (a, reuse)
            }
            Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                (Answer::Garbage(e.to_string()), false)
            }
            Err(e) if is_timeout(&e) => (Answer::Timeout, false),
            Err(e) => (Answer::NoReply(format!("reply: {e}")), false),
        }
    }
}

/// The reply frame an HTTP answer to `request` (for `guid`) stands for.
pub fn to_frame(request: &[u8], guid: &str, status: u16, body: &[u8]) -> Answer {
    let garbage = |why: String| Answer::Garbage(format!("HTTP {status}: {why}"));
    let j: Value = match serde_json::from_slice(body) {
        Ok(j) => j,
        Err(_) => {
            return garbage(format!("not JSON: {:?}", String::from_utf8_lossy(body)));
        }
    };
    let code = match status {
        200 | 202 => {
            if j["guid"].as_str() != Some(guid) {
                return garbage(format!("for another GUID: {j}"));
            }
            j["rsp_code"].as_str().unwrap_or_default().to_string()
        }
        _ => j["code"].as_str().unwrap_or_default().to_string(),
    };
    let Ok(code4) = <[u8; 4]>::try_from(code.as_bytes()) else {
        return garbage(format!("no 4-character code: {j}"));
    };
    let expected = match code.as_str() {
        "E901" => 202,
        "E900" => 400,
        "E902" | "E905" => 503,
        "E903" => 409,
        "E904" => 422,
        _ => 200,
    };
    if status != expected {
        return garbage(format!("{code} should come with {expected}: {j}"));
    }
    if code != "0000" {
        return Answer::Reply(wire::reply_to(request, &code4, None));
    }
    let booking = (
        j["core_ref"].as_str(),
        j["amount"].as_u64(),
        j["booked_at"].as_str(),
    );
    let (Some(core_ref), Some(amount), Some(booked_at)) = booking else {
        return garbage(format!("0000 without its booking: {j}"));
    };
    match wire::booking_body(core_ref, amount, booked_at) {
        Ok(b) => Answer::Reply(wire::reply_to(request, &code4, Some(&b))),
        Err(e) => garbage(format!("{e}: {j}")),
    }
}
