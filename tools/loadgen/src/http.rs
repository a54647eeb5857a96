//! `--http`: the same transfers through the relay's HTTP channel API (contract §9), one
//! kept-alive HTTP/1.1 connection per loadgen connection, the GUID as the Idempotency-Key.
//! An answer's code is the §4 code it carries (`rsp_code`, or a problem's `code`; `E901` for
//! a 202); its bytes (for the resend check) are the JSON body of a 200.

use std::io::{self, BufReader, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::Value;
use testkit::channel::is_timeout;
use testkit::http_channel;
use wire::Transfer;

use crate::conn::{Answer, Fail};

/// A kept-alive connection to the relay's `--http-listen` address, reopened after any
/// failure or a `Connection: close`.
pub struct HttpConn {
    addr: String,
    timeout: Duration,
    conn: Option<BufReader<TcpStream>>,
    pub connects: u64,
}

impl HttpConn {
    pub fn new(addr: &str, timeout: Duration) -> HttpConn {
        HttpConn {
            addr: addr.to_string(),
            timeout,
            conn: None,
            connects: 0,
        }
    }

    pub fn ensure_connected(&mut self) -> io::Result<()> {
        if self.conn.is_none() {
            let s = TcpStream::connect(&self.addr)?;
            s.set_read_timeout(Some(self.timeout))?;
            s.set_write_timeout(Some(self.timeout))?;
            let _ = s.set_nodelay(true);
            self.conn = Some(BufReader::new(s));
            self.connects += 1;
        }
        Ok(())
    }

    /// POSTs the transfer `msg` holds (a resend: the same bytes, so the same fields).
    pub fn call(&mut self, t: &Transfer, msg: &[u8]) -> Result<Answer, Fail> {
        let r = self.exchange(t, msg);
        if r.is_err() {
            self.conn = None;
        }
        r
    }

    fn exchange(&mut self, t: &Transfer, msg: &[u8]) -> Result<Answer, Fail> {
        // Head and body in one write: one segment, as a client with a buffered writer sends.
        let (_, req) = http_channel::post_transfer(msg, &self.addr)
            .map_err(|rule| Fail::Malformed(format!("cannot send {rule:?}")))?;
        self.ensure_connected().map_err(|e| broken(&e))?;
        let conn = self.conn.as_mut().expect("connected");
        let s = conn.get_mut();
        s.write_all(req.as_bytes()).map_err(|e| broken(&e))?;
        let (status, close, answer) = http_channel::read_answer(conn).map_err(|e| broken(&e))?;
        if close {
            self.conn = None;
        }
        classify(status, &answer, &t.guid)
    }
}

fn broken(e: &io::Error) -> Fail {
    Fail::Broken {
        what: e.to_string(),
        timeout: is_timeout(e),
    }
}

/// The code of an answer for `guid`, checked against §9's table.
fn classify(status: u16, body: &[u8], guid: &str) -> Result<Answer, Fail> {
    let bad = |why: String| Err(Fail::Malformed(why));
    let j: Value = match serde_json::from_slice(body) {
        Ok(j) => j,
        Err(_) => return bad(format!("{status} with a non-JSON body")),
    };
    match status {
        200 | 202 => {
            if j["guid"].as_str() != Some(guid) {
                return bad(format!("{status} for another GUID: {j}"));
            }
            let code = j["rsp_code"].as_str().unwrap_or_default().to_string();
            if status == 202 && code != "E901" {
                return bad(format!("202 with {j}"));
            }
            if code == "0000"
                && !(j["core_ref"].is_string()
                    && j["amount"].is_u64()
                    && j["booked_at"].is_string())
            {
                return bad(format!("0000 without its booking: {j}"));
            }
            let bytes = (status == 200).then(|| body.to_vec());
            Ok(Answer { code, bytes })
        }
        _ => match j["code"].as_str() {
            Some(c) if c.len() == 4 => Ok(Answer {
                code: c.to_string(),
                bytes: None,
            }),
            _ => Ok(Answer {
                code: format!("http_{status}"),
                bytes: None,
            }),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_classified_by_the_table() {
        let ok = br#"{"guid":"G1","rsp_code":"0000","core_ref":"C1","amount":5,"booked_at":"2026-01-01T00:00:00Z"}"#;
        let a = classify(200, ok, "G1").ok().unwrap();
        assert_eq!(
            (a.code.as_str(), a.bytes.as_deref()),
            ("0000", Some(&ok[..]))
        );
        assert!(classify(200, ok, "G2").is_err());
        assert!(classify(200, br#"{"guid":"G1","rsp_code":"0000"}"#, "G1").is_err());
        let unk = br#"{"guid":"G1","state":"UNKNOWN","rsp_code":"E901"}"#;
        assert_eq!(classify(202, unk, "G1").ok().unwrap().code, "E901");
        let busy = br#"{"type":"t","title":"t","status":409,"detail":"d","code":"E903"}"#;
        assert_eq!(classify(409, busy, "G1").ok().unwrap().code, "E903");
        assert_eq!(
            classify(404, br#"{"status":404}"#, "G1").ok().unwrap().code,
            "http_404"
        );
    }
}
