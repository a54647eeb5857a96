//! One loadgen connection and what comes back on it: a persistent channel connection to the
//! relay (`RelayConn`), or, for `--direct`, a kept-alive HTTP connection to the core that
//! POSTs the same transfers as JSON. Every answer is validated here.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use serde_json::Value;
use testkit::channel::is_timeout;
use testkit::tls_client::Dialer;
use testkit::{Chan, CoreHttp};
use wire::{self, Transfer};

/// A reply that passed validation.
pub struct Answer {
    pub code: String,
    /// The relay's reply message (without prefix); `None` in direct mode.
    pub bytes: Option<Vec<u8>>,
}

/// Why a request got no valid answer.
pub enum Fail {
    /// The connection failed (refused, reset, closed, timed out): no answer at all.
    Broken { what: String, timeout: bool },
    /// An answer came that is not a valid one.
    Malformed(String),
}

impl Fail {
    fn io(e: &io::Error) -> Fail {
        Fail::Broken {
            what: e.to_string(),
            timeout: is_timeout(e),
        }
    }
}

/// Where a worker sends its load.
pub enum Target {
    Relay(RelayConn),
    /// One client (one agent, so one kept-alive connection) per worker.
    Direct(CoreHttp),
    /// `--http`: the relay's HTTP channel API.
    Http(crate::http::HttpConn),
}

impl Target {
    /// Opens the relay connection now if there is none (so that connecting is not timed).
    /// A direct connection is opened by its first request.
    pub fn ensure_connected(&mut self) -> io::Result<()> {
        match self {
            Target::Relay(r) => r.ensure_connected(),
            Target::Http(h) => h.ensure_connected(),
            Target::Direct(_) => Ok(()),
        }
    }

    /// TCP connections made so far, the first one included.
    pub fn connects(&self) -> u64 {
        match self {
            Target::Relay(r) => r.connects,
            Target::Http(h) => h.connects,
            Target::Direct(h) => h.connects(),
        }
    }

    pub fn call(&mut self, t: &Transfer, msg: &[u8]) -> Result<Answer, Fail> {
        match self {
            Target::Relay(r) => {
                let bytes = r.call(msg)?;
                let code = validate_reply(&bytes, &t.guid).map_err(Fail::Malformed)?;
                Ok(Answer {
                    code,
                    bytes: Some(bytes),
                })
            }
            Target::Direct(h) => direct_call(h, t),
            Target::Http(h) => h.call(t, msg),
        }
    }
}

/// A persistent channel connection to the relay, reopened after any failure.
pub struct RelayConn {
    addr: String,
    /// With TLS: the relay's address, resolved once, and the shared client configuration.
    tls: Option<(SocketAddr, Dialer)>,
    timeout: Duration,
    chan: Option<Chan>,
    connects: u64,
}

impl RelayConn {
    pub fn new(addr: &str, timeout: Duration, tls: Option<(SocketAddr, Dialer)>) -> RelayConn {
        RelayConn {
            addr: addr.to_string(),
            tls,
            timeout,
            chan: None,
            connects: 0,
        }
    }

    /// On a plain connection already open (one of the idle ones).
    pub fn open(addr: &str, timeout: Duration, chan: Chan) -> RelayConn {
        RelayConn {
            chan: Some(chan),
            connects: 1,
            ..RelayConn::new(addr, timeout, None)
        }
    }

    pub fn ensure_connected(&mut self) -> io::Result<()> {
        if self.chan.is_none() {
            self.chan = Some(match &self.tls {
                None => Chan::connect(&self.addr, self.timeout)?,
                Some((addr, dialer)) => dialer.connect(addr, self.timeout, self.timeout)?,
            });
            self.connects += 1;
        }
        Ok(())
    }

    /// Sends one framed request and reads one framed reply. Any failure drops the
    /// connection (its framing can no longer be trusted); the next call reconnects.
    pub fn call(&mut self, msg: &[u8]) -> Result<Vec<u8>, Fail> {
        let r = self.exchange(msg);
        if r.is_err() {
            self.chan = None;
        }
        r
    }

    fn exchange(&mut self, msg: &[u8]) -> Result<Vec<u8>, Fail> {
        self.ensure_connected().map_err(|e| Fail::io(&e))?;
        let chan = self.chan.as_mut().expect("connected");
        chan.call(msg).map_err(|e| match e.kind() {
            io::ErrorKind::InvalidData => Fail::Malformed(format!("reply {e}")),
            _ => Fail::io(&e),
        })
    }
}

/// Checks a relay reply to a request for `guid`; returns its code.
pub fn validate_reply(bytes: &[u8], guid: &str) -> Result<String, String> {
    let r = wire::parse_reply(bytes)?;
    if r.tx_code != wire::TX_TRNF {
        return Err(format!("reply tx_code {:?}", r.tx_code));
    }
    if r.guid != guid {
        return Err(format!(
            "reply for GUID {:?} to a request for {guid:?}",
            r.guid
        ));
    }
    if !r
        .code
        .bytes()
        .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
    {
        return Err(format!("reply code {:?}", r.code));
    }
    if r.code == "0000" && bytes.len() != wire::HEADER_LEN + wire::BOOKING_BODY_LEN {
        return Err(format!("0000 reply of {} bytes", bytes.len()));
    }
    Ok(r.code)
}

/// The same transfer as a JSON POST to the core (contract §3); the answer is classified the
/// way the relay would: 200 with a representable booking for this GUID is `0000`, a 4xx
/// with a 4-character code is that code, any other status is `http_NNN`.
fn direct_call(h: &CoreHttp, t: &Transfer) -> Result<Answer, Fail> {
    let (status, body) = h.post_transfer(t).map_err(|e| Fail::Broken {
        what: format!("{e:#}"),
        timeout: testkit::core_http::is_timeout(&e),
    })?;
    let json: Option<Value> = serde_json::from_str(&body).ok();
    let code = match status {
        200 => {
            let j = json.ok_or_else(|| Fail::Malformed("200 with a non-JSON body".into()))?;
            if j["guid"].as_str() != Some(t.guid.as_str()) {
                return Err(Fail::Malformed(format!("200 for another GUID: {j}")));
            }
            wire::booking_body(
                j["core_ref"].as_str().unwrap_or_default(),
                j["amount"].as_u64().unwrap_or(u64::MAX),
                j["booked_at"].as_str().unwrap_or_default(),
            )
            .map_err(|e| Fail::Malformed(format!("booking not representable: {e}")))?;
            "0000".to_string()
        }
        400..=499 => {
            let code = json
                .as_ref()
                .and_then(|j| j["code"].as_str())
                .filter(|c| c.len() == 4)
                .map(str::to_string);
            code.unwrap_or_else(|| format!("http_{status}"))
        }
        s => format!("http_{s}"),
    };
    Ok(Answer { code, bytes: None })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(guid: &str) -> Vec<u8> {
        wire::encode_request(&Transfer {
            guid: guid.into(),
            from_account: "1".into(),
            to_account: "2".into(),
            amount: 1500,
            memo: String::new(),
        })
        .unwrap()
    }

    #[test]
    fn a_reply_must_be_for_its_request_and_complete() {
        let booked = wire::booking_body("C1", 1500, "2026-01-01T00:00:00Z").unwrap();
        let ok = wire::reply_to(&request("G1"), &wire::OK, Some(&booked));
        assert_eq!(validate_reply(&ok, "G1").unwrap(), "0000");
        let e903 = wire::reply_to(&request("G1"), &wire::E_IN_FLIGHT, None);
        assert_eq!(validate_reply(&e903, "G1").unwrap(), "E903");

        assert!(validate_reply(&ok, "G2").unwrap_err().contains("GUID"));
        let bare = wire::reply_to(&request("G1"), &wire::OK, None);
        assert!(validate_reply(&bare, "G1").is_err(), "0000 without a body");
        let lower = wire::reply_to(&request("G1"), b"b001", None);
        assert!(validate_reply(&lower, "G1").unwrap_err().contains("code"));
        assert!(validate_reply(b"Q", "G1").is_err());
    }
}
