//! The HTTP client to the core (contract §3) and the classification of its failures.
//!
//! The whole safety of the relay rests on one split: `NotSent` only where the request
//! provably never left this process (the name did not resolve, the socket could not be
//! created or connected: see `pre_send`), and `Unknown` for everything else, because the
//! core may have booked it. Also here: its TLS settings (`tls`), the marking of failures
//! before any byte was sent (`pre_send`), the capture of a call given up at its read timeout
//! for a late reply (`capture`), and what it reports about its connections (`observe`).

pub mod capture;
pub mod observe;
pub mod pre_send;
pub mod tls;

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use ureq::Error;
use ureq::http::Uri;

use crate::capture::LateCall;
use crate::pre_send::{MarkingConnector, MarkingResolver};
use crate::tls::TlsFiles;
use wire::{BOOKING_BODY_LEN, Code, TX_TRNF, Transfer};

/// Idle keep-alive connections kept to the core, and for how long.
pub const MAX_IDLE: usize = 256;
const MAX_IDLE_AGE: Duration = Duration::from_secs(2);

/// Largest core answer we read; anything longer is not a booking and is cut (→ unknown).
const MAX_BODY: u64 = 64 * 1024;

/// What a POST of a transfer came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Booked: the 45-byte reply body built from the core's JSON.
    Booked([u8; BOOKING_BODY_LEN]),
    /// A definitive business rejection: not booked.
    Rejected(Code),
    /// The request never left: safe to send again.
    NotSent(String),
    /// The core may or may not have booked it.
    Unknown(String),
}

/// What an inquiry (`GET /v1/transfers/{guid}`) came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inquiry {
    Booked([u8; BOOKING_BODY_LEN]),
    /// The core says it never booked this GUID.
    NotFound,
    /// No usable answer: settle nothing.
    Error(String),
}

/// The core's URL, or its TLS settings, were not usable: one line for the operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadCoreUrl(pub String);

impl fmt::Display for BadCoreUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadCoreUrl {}

/// The body of a POST, in the contract's field order.
#[derive(Serialize)]
struct TransferJson<'a> {
    guid: &'a str,
    tx_code: &'a str,
    from_account: &'a str,
    to_account: &'a str,
    amount: u64,
    memo: &'a str,
}

/// The body of a POST of `t` (contract §3), in the contract's field order, memo without its
/// padding.
pub fn transfer_json(t: &Transfer) -> Vec<u8> {
    let body = TransferJson {
        guid: &t.guid,
        tx_code: TX_TRNF,
        from_account: &t.from_account,
        to_account: &t.to_account,
        amount: t.amount,
        memo: &t.memo,
    };
    serde_json::to_vec(&body).expect("plain struct serialises")
}

#[derive(Deserialize)]
struct BookingJson {
    guid: Option<String>,
    core_ref: String,
    amount: u64,
    booked_at: String,
}

#[derive(Deserialize)]
struct RejectionJson {
    code: String,
}

pub struct CoreClient {
    agent: ureq::Agent,
    base: String,
    deadline: Duration,
}

impl CoreClient {
    /// `connect` bounds the name lookup and establishing the connection (for `https://`, the
    /// TLS handshake too); `read` bounds each later phase (sending, waiting for the answer,
    /// reading its body); and the whole call, from lookup to the last byte, is bounded by
    /// `connect + read` (its `deadline`), so that how long a send can be in flight is a
    /// number the other tools can rely on. Which phase failed is known from where the error
    /// came from (`pre_send`), not from the timeout. An `https://` core is checked against
    /// the system's roots; see [`CoreClient::with_tls`] for other settings.
    pub fn new(
        base_url: &str,
        connect: Duration,
        read: Duration,
    ) -> Result<CoreClient, BadCoreUrl> {
        Self::with_tls(base_url, connect, read, &TlsFiles::default())
    }

    /// As [`CoreClient::new`], with the TLS settings `tls` (`--core-ca`, `--core-cert`,
    /// `--core-key`) for an `https://` core; their files are read and checked here.
    pub fn with_tls(
        base_url: &str,
        connect: Duration,
        read: Duration,
        tls: &TlsFiles,
    ) -> Result<CoreClient, BadCoreUrl> {
        Self::with_connector(base_url, connect, read, tls, MarkingConnector::default())
    }

    fn with_connector<C>(
        base_url: &str,
        connect: Duration,
        read: Duration,
        tls: &TlsFiles,
        connector: MarkingConnector<C>,
    ) -> Result<CoreClient, BadCoreUrl>
    where
        MarkingConnector<C>: ureq::unversioned::transport::Connector<()>,
    {
        let bad = |why: &str| BadCoreUrl(format!("core URL {base_url:?}: {why}"));
        let uri: Uri = base_url.parse().map_err(|e| bad(&format!("{e}")))?;
        let host = match uri.host() {
            Some(h) if !h.is_empty() => h,
            _ => return Err(bad("no host")),
        };
        if uri.query().is_some() {
            return Err(bad("a query string is not allowed"));
        }
        let tls_config = match uri.scheme_str() {
            Some("http") if tls.is_empty() => None,
            Some("http") => {
                return Err(bad(
                    "--core-ca, --core-cert and --core-key are for an https:// core, not an http:// one",
                ));
            }
            Some("https") => Some(
                tls::load(tls, host)
                    .map_err(|why| BadCoreUrl(format!("TLS to the core: {why}")))?,
            ),
            _ => return Err(bad("only http:// and https:// are supported")),
        };
        let deadline = connect + read;
        let config = ureq::Agent::config_builder()
            .timeout_global(Some(deadline))
            .timeout_resolve(Some(connect))
            .timeout_connect(Some(connect))
            .timeout_send_request(Some(read))
            .timeout_send_body(Some(read))
            .timeout_recv_response(Some(read))
            .timeout_recv_body(Some(read))
            .http_status_as_error(false)
            .max_redirects(0)
            .proxy(None)
            // Keep-alive: a connection per call costs a handshake and a port in TIME_WAIT.
            // A reused connection that fails is classified like any failure after
            // connecting (UNKNOWN), so reuse can cost an avoidable UNKNOWN but never a
            // double booking; ureq checks a pooled connection is still open before reuse,
            // and idle ones are dropped well before servers commonly close them (5 s+).
            .max_idle_connections(MAX_IDLE)
            .max_idle_connections_per_host(MAX_IDLE)
            .max_idle_age(MAX_IDLE_AGE)
            .tls_config(tls_config.unwrap_or_default())
            .build();
        Ok(CoreClient {
            agent: ureq::Agent::with_parts(config, connector, MarkingResolver::default()),
            base: base_url.trim_end_matches('/').to_string(),
            deadline,
        })
    }

    /// The longest a call can take, name lookup to last byte: connect + read timeout.
    pub fn deadline(&self) -> Duration {
        self.deadline
    }

    /// POSTs a transfer once. Never retried here or by ureq.
    pub fn post_transfer(&self, t: &Transfer) -> Outcome {
        self.post(t)
    }

    /// POSTs a transfer once; if the call timed out waiting for the answer, also the call
    /// itself, whose connection is still open, for a late reply (`late`).
    pub fn post_transfer_keeping_late(&self, t: &Transfer) -> (Outcome, Option<LateCall>) {
        let (outcome, caught) = capture::capture(|| self.post(t));
        let call = match (&outcome, caught) {
            (Outcome::Unknown(_), Some(transport)) => Some(LateCall {
                transport,
                ours: Ours::of(t),
            }),
            _ => None,
        };
        (outcome, call)
    }

    fn post(&self, t: &Transfer) -> Outcome {
        let json = transfer_json(t);
        let result = self
            .agent
            .post(format!("{}/v1/transfers", self.base))
            .header("Content-Type", "application/json")
            .send(&json[..]);
        let mut resp = match result {
            Ok(r) => r,
            Err(e) => return classify(&e),
        };
        let status = resp.status().as_u16();
        match resp.body_mut().with_config().limit(MAX_BODY).read_to_vec() {
            Ok(body) => outcome_of(status, &body, Ours::of(t)),
            Err(e) => Outcome::Unknown(format!("HTTP {status}, body not read: {e}")),
        }
    }

    /// Asks the core whether it booked transfer `t` (its GUID, our stored request). Never
    /// POSTs. A booking counts only if it names `t`'s GUID and amount.
    pub fn inquire(&self, t: &Transfer) -> Inquiry {
        let result = self
            .agent
            .get(format!("{}/v1/transfers/{}", self.base, t.guid))
            .call();
        let mut resp = match result {
            Ok(r) => r,
            Err(e) => return Inquiry::Error(format!("inquiry failed: {e}")),
        };
        let status = resp.status().as_u16();
        if status != 200 && status != 404 {
            return Inquiry::Error(format!("inquiry answered HTTP {status}"));
        }
        let text = match resp.body_mut().with_config().limit(MAX_BODY).read_to_vec() {
            Ok(text) => text,
            Err(e) => return Inquiry::Error(format!("inquiry body not read: {e}")),
        };
        if status == 404 {
            // Proof of "never booked" only from the core itself: its 404 carries a JSON
            // object. A proxy's or load balancer's 404 page (or an empty body) is not it.
            return match serde_json::from_slice::<serde_json::Value>(&text) {
                Ok(serde_json::Value::Object(_)) => Inquiry::NotFound,
                _ => Inquiry::Error(
                    "inquiry answered 404 without the core's JSON body (a proxy's page?)".into(),
                ),
            };
        }
        match booking(&text, Ours::of(t)) {
            Ok(body) => Inquiry::Booked(body),
            Err(why) => Inquiry::Error(format!("inquiry answered 200 but {why}")),
        }
    }
}

/// The transfer a booking must be for: our GUID and our amount. A booking that names
/// another GUID, none, or another amount is not ours to record (a core that mixed up its
/// answers, an environment's core booking something else under our GUID): the outcome stays
/// in doubt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ours {
    pub guid: String,
    pub amount: u64,
}

impl Ours {
    pub fn of(t: &Transfer) -> Ours {
        Ours {
            guid: t.guid.clone(),
            amount: t.amount,
        }
    }
}

/// What a complete answer to a POST of `ours` means (contract §3).
pub fn outcome_of(status: u16, body: &[u8], ours: Ours) -> Outcome {
    match status {
        200 => match booking(body, ours) {
            Ok(body) => Outcome::Booked(body),
            Err(why) => Outcome::Unknown(format!("HTTP 200 but {why}")),
        },
        400..=499 => match rejection(body) {
            Ok(code) => Outcome::Rejected(code),
            Err(why) => Outcome::Unknown(format!("HTTP {status} but {why}")),
        },
        _ => Outcome::Unknown(format!("HTTP {status}")),
    }
}

/// Only a failure before any request byte was written (marked by the resolver or the
/// connector) is `NotSent`; every other failure may have reached the core.
fn classify(e: &Error) -> Outcome {
    match pre_send::pre_send(e) {
        Some(why) => Outcome::NotSent(why.to_string()),
        None => Outcome::Unknown(format!("after connecting: {e}")),
    }
}

/// A 200 body that is a booking of `ours` (its GUID and amount) and fits the reply format.
/// The error says both sides, for the log.
fn booking(text: &[u8], ours: Ours) -> Result<[u8; BOOKING_BODY_LEN], String> {
    let b: BookingJson =
        serde_json::from_slice(text).map_err(|e| format!("body is not a booking: {e}"))?;
    let theirs = || {
        format!(
            "(core_ref {:?}, amount {}, booked_at {:?})",
            b.core_ref, b.amount, b.booked_at
        )
    };
    match &b.guid {
        Some(g) if *g == ours.guid => {}
        Some(g) => {
            return Err(format!(
                "the booking is for guid {g:?} {}, ours is {:?}",
                theirs(),
                ours.guid
            ));
        }
        None => {
            return Err(format!(
                "the booking names no guid {}, ours is {:?}",
                theirs(),
                ours.guid
            ));
        }
    }
    // What the reply cannot carry first (its own message), then whether it is our amount.
    let body = wire::booking_body(&b.core_ref, b.amount, &b.booked_at).map_err(|e| e.0)?;
    if b.amount != ours.amount {
        return Err(format!(
            "the booking is for amount {} {}, ours is {}",
            b.amount,
            theirs(),
            ours.amount
        ));
    }
    Ok(body)
}

/// A 4xx body with a business code: four of `[A-Z0-9]`, never `0000` nor `E9..`, which
/// are ours and would mislead a channel.
fn rejection(text: &[u8]) -> Result<Code, String> {
    let r: RejectionJson =
        serde_json::from_slice(text).map_err(|e| format!("body is not a rejection: {e}"))?;
    let code: Code = r
        .code
        .as_bytes()
        .try_into()
        .map_err(|_| format!("code {:?} is not 4 characters", r.code))?;
    let valid = code
        .iter()
        .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit());
    if !valid || &code == b"0000" || code.starts_with(b"E9") {
        return Err(format!("code {:?} is not a business rejection", r.code));
    }
    Ok(code)
}

#[cfg(test)]
mod tests {
    //! Each failure shape against a tiny server that misbehaves in exactly one way.
    use super::*;
    use std::io::{self, Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::thread;
    use ureq::Timeout;
    use ureq::unversioned::transport::{ConnectionDetails, Connector, Transport};

    fn transfer() -> Transfer {
        Transfer {
            guid: "G1".into(),
            from_account: "00000000000001".into(),
            to_account: "00000000000002".into(),
            amount: 1500,
            memo: "rent".into(),
        }
    }

    fn client(url: &str) -> CoreClient {
        CoreClient::new(url, Duration::from_millis(500), Duration::from_millis(500)).unwrap()
    }

    /// Reads one HTTP request (headers and a Content-Length body) and returns it.
    fn read_request(s: &mut impl Read) -> String {
        let mut buf = Vec::new();
        let mut byte = [0u8; 1];
        while !buf.ends_with(b"\r\n\r\n") {
            if s.read(&mut byte).unwrap_or(0) == 0 {
                break;
            }
            buf.push(byte[0]);
        }
        let head = String::from_utf8_lossy(&buf).to_string();
        let len = head
            .lines()
            .find_map(|l| {
                let l = l.to_ascii_lowercase();
                l.strip_prefix("content-length:")
                    .map(|v| v.trim().parse::<usize>().unwrap())
            })
            .unwrap_or(0);
        let mut body = vec![0; len];
        s.read_exact(&mut body).unwrap();
        head + &String::from_utf8_lossy(&body)
    }

    /// Serves one connection with `f` and returns the base URL.
    fn serve(f: impl FnOnce(TcpStream) + Send + 'static) -> String {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", l.local_addr().unwrap());
        thread::spawn(move || {
            let (s, _) = l.accept().unwrap();
            f(s);
        });
        url
    }

    fn answer(raw: &'static str) -> String {
        serve(move |mut s| {
            read_request(&mut s);
            s.write_all(raw.as_bytes()).unwrap();
        })
    }

    fn json_response(status: &str, body: &str) -> &'static str {
        format!(
            "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .leak()
    }

    const BOOKING: &str = r#"{"guid":"G1","core_ref":"C00000000000000001","amount":1500,"booked_at":"2026-12-02T09:30:12Z"}"#;

    fn is_unknown(o: &Outcome) -> bool {
        matches!(o, Outcome::Unknown(_))
    }

    #[test]
    fn booked_and_the_request_is_the_contract_json() {
        let (tx, rx) = std::sync::mpsc::channel();
        let url = serve(move |mut s| {
            tx.send(read_request(&mut s)).unwrap();
            s.write_all(json_response("200 OK", BOOKING).as_bytes())
                .unwrap();
        });
        let o = client(&url).post_transfer(&transfer());
        assert_eq!(
            o,
            Outcome::Booked(*b"C00000000000000001000000000150020261202093012")
        );
        let req = rx.recv().unwrap();
        assert!(req.starts_with("POST /v1/transfers HTTP/1.1\r\n"), "{req}");
        assert!(req.ends_with(
            r#"{"guid":"G1","tx_code":"TRNF","from_account":"00000000000001","to_account":"00000000000002","amount":1500,"memo":"rent"}"#
        ));
    }

    #[test]
    fn refused_is_not_sent() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", l.local_addr().unwrap());
        drop(l);
        assert!(matches!(
            client(&url).post_transfer(&transfer()),
            Outcome::NotSent(_)
        ));
    }

    #[test]
    fn unresolvable_host_is_not_sent() {
        let o = client("http://no-such-host.invalid:9201").post_transfer(&transfer());
        assert!(matches!(o, Outcome::NotSent(_)), "{o:?}");
    }

    #[test]
    fn accept_and_close_is_unknown() {
        let url = serve(drop);
        assert!(is_unknown(&client(&url).post_transfer(&transfer())));
    }

    #[test]
    fn read_then_close_is_unknown() {
        let url = serve(|mut s| {
            read_request(&mut s);
        });
        assert!(is_unknown(&client(&url).post_transfer(&transfer())));
    }

    #[test]
    fn never_answering_is_unknown() {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let url = serve(move |mut s| {
            read_request(&mut s);
            let _ = rx.recv(); // hold the connection open until the test ends
        });
        let o = client(&url).post_transfer(&transfer());
        drop(tx);
        assert!(is_unknown(&o), "{o:?}");
    }

    #[test]
    fn server_errors_and_odd_statuses_are_unknown() {
        for raw in [
            json_response("500 Internal Server Error", "{}"),
            json_response("503 Service Unavailable", ""),
            json_response("201 Created", BOOKING),
            "HTTP/1.1 307 Temporary Redirect\r\nLocation: /elsewhere\r\nContent-Length: 0\r\n\r\n",
        ] {
            let o = client(&answer(raw)).post_transfer(&transfer());
            assert!(is_unknown(&o), "{raw}: {o:?}");
        }
    }

    #[test]
    fn half_a_response_is_unknown() {
        let raw = "HTTP/1.1 200 OK\r\nContent-Length: 200\r\n\r\n{\"guid\":\"G1\",";
        assert!(is_unknown(&client(&answer(raw)).post_transfer(&transfer())));
        let raw = "HTTP/1.1 200 O";
        assert!(is_unknown(&client(&answer(raw)).post_transfer(&transfer())));
    }

    #[test]
    fn unusable_200_bodies_are_unknown() {
        for body in [
            "not json",
            r#"{"guid":"G1"}"#,
            r#"{"guid":"G2","core_ref":"C1","amount":1500,"booked_at":"2026-12-02T09:30:12Z"}"#,
            r#"{"core_ref":"C1","amount":1500,"booked_at":"2026-12-02T09:30:12Z"}"#,
            r#"{"guid":"G1","core_ref":"C1","amount":1,"booked_at":"2026-12-02T09:30:12Z"}"#,
            r#"{"guid":"G1","core_ref":"C1","amount":1500,"booked_at":"yesterday"}"#,
            r#"{"guid":"G1","core_ref":"C1234567890123456789","amount":1,"booked_at":"2026-12-02T09:30:12Z"}"#,
        ] {
            let o = client(&answer(json_response("200 OK", body))).post_transfer(&transfer());
            assert!(is_unknown(&o), "{body}: {o:?}");
        }
    }

    #[test]
    fn business_rejections_and_their_limits() {
        let r = |body: &str| {
            client(&answer(json_response("422 Unprocessable Entity", body)))
                .post_transfer(&transfer())
        };
        assert_eq!(
            r(r#"{"code":"B001","message":"no funds"}"#),
            Outcome::Rejected(*b"B001")
        );
        for body in [
            r#"{"code":"0000"}"#,
            r#"{"code":"E901"}"#,
            r#"{"code":"b001"}"#,
            r#"{"code":"B01"}"#,
            "oops",
        ] {
            assert!(is_unknown(&r(body)), "{body}");
        }
    }

    #[test]
    fn inquiry_answers() {
        let c = |raw| client(&answer(raw)).inquire(&transfer());
        assert!(matches!(
            c(json_response("200 OK", BOOKING)),
            Inquiry::Booked(_)
        ));
        assert_eq!(
            c(json_response("404 Not Found", r#"{"code":"N404"}"#)),
            Inquiry::NotFound
        );
        assert!(matches!(
            c(json_response("500 Oops", "{}")),
            Inquiry::Error(_)
        ));
        assert!(matches!(
            c(json_response("200 OK", "{}")),
            Inquiry::Error(_)
        ));
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", l.local_addr().unwrap());
        drop(l);
        assert!(matches!(
            client(&url).inquire(&transfer()),
            Inquiry::Error(_)
        ));
    }

    #[test]
    fn a_booking_must_name_our_guid_and_our_amount() {
        let c = |body| client(&answer(json_response("200 OK", body))).inquire(&transfer());
        let cases = [
            (
                r#"{"core_ref":"C1","amount":1500,"booked_at":"2026-12-02T09:30:12Z"}"#,
                "inquiry answered 200 but the booking names no guid (core_ref \"C1\", amount \
                 1500, booked_at \"2026-12-02T09:30:12Z\"), ours is \"G1\"",
            ),
            (
                r#"{"guid":"G1","core_ref":"C1","amount":1,"booked_at":"2026-12-02T09:30:12Z"}"#,
                "inquiry answered 200 but the booking is for amount 1 (core_ref \"C1\", amount 1, \
                 booked_at \"2026-12-02T09:30:12Z\"), ours is 1500",
            ),
            (
                r#"{"guid":"G2","core_ref":"C1","amount":1500,"booked_at":"2026-12-02T09:30:12Z"}"#,
                "inquiry answered 200 but the booking is for guid \"G2\" (core_ref \"C1\", \
                 amount 1500, booked_at \"2026-12-02T09:30:12Z\"), ours is \"G1\"",
            ),
        ];
        for (body, why) in cases {
            assert_eq!(c(body), Inquiry::Error(why.into()), "{body}");
            let late = outcome_of(200, body.as_bytes(), Ours::of(&transfer()));
            assert!(is_unknown(&late), "a late reply too: {late:?}");
        }
    }

    #[test]
    fn a_404_that_is_not_the_cores_json_proves_nothing() {
        let c = |raw| client(&answer(raw)).inquire(&transfer());
        for raw in [
            "HTTP/1.1 404 Not Found\r\nContent-Type: text/html\r\nContent-Length: 22\r\nConnection: close\r\n\r\n<h1>404 Not Found</h1>",
            "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            json_response("404 Not Found", "[]"),
            json_response("404 Not Found", "\"gone\""),
        ] {
            assert!(matches!(c(raw), Inquiry::Error(_)), "{raw}");
        }
    }

    #[test]
    fn only_marked_errors_are_not_sent() {
        let not_sent = |e: Error| matches!(classify(&e), Outcome::NotSent(_));
        for e in [
            Error::Timeout(Timeout::Connect),
            Error::Timeout(Timeout::SendRequest),
            Error::Timeout(Timeout::RecvResponse),
            Error::Timeout(Timeout::RecvBody),
            Error::Timeout(Timeout::Global),
            Error::Io(io::ErrorKind::ConnectionRefused.into()),
            Error::Io(io::ErrorKind::ConnectionReset.into()),
            Error::Io(io::ErrorKind::UnexpectedEof.into()),
            Error::Io(io::Error::other("uncategorised")),
            Error::ConnectionFailed,
            Error::HostNotFound,
        ] {
            assert!(!not_sent(e), "an unmarked error may have left");
        }
    }

    /// A connector that fails the way `socket(2)` does when the process is out of file
    /// descriptors: nothing was created, so nothing can have been sent.
    #[derive(Debug)]
    struct OutOfDescriptors;

    impl Connector<()> for OutOfDescriptors {
        type Out = Box<dyn Transport>;
        fn connect(
            &self,
            _: &ConnectionDetails,
            _: Option<()>,
        ) -> Result<Option<Self::Out>, Error> {
            Err(Error::Io(io::Error::from_raw_os_error(libc::EMFILE)))
        }
    }

    #[test]
    fn a_socket_that_cannot_be_created_is_not_sent() {
        let c = CoreClient::with_connector(
            "http://127.0.0.1:9",
            Duration::from_millis(500),
            Duration::from_millis(500),
            &TlsFiles::default(),
            MarkingConnector(OutOfDescriptors),
        )
        .unwrap();
        let o = c.post_transfer(&transfer());
        assert!(
            matches!(&o, Outcome::NotSent(why) if why.contains("connect")),
            "{o:?}"
        );
    }

    #[test]
    fn the_whole_call_is_bounded_by_connect_plus_read() {
        // Each phase finishes within the read timeout (headers in 0.9 s, then the body in
        // 0.9 s, a booking in the end), but the call as a whole takes longer than
        // connect + read (1.1 s): it must end there, as UNKNOWN, not as a late booking.
        let url = serve(move |mut s| {
            read_request(&mut s);
            let drip = |s: &mut TcpStream, parts: &[&[u8]]| {
                for p in parts {
                    if s.write_all(p).is_err() {
                        return;
                    }
                    thread::sleep(Duration::from_millis(900 / parts.len() as u64));
                }
            };
            drip(
                &mut s,
                &[b"HTTP/1.1 200 OK\r\n", b"X-A: 1\r\n", b"X-B: 1\r\n"],
            );
            let head = format!("Content-Length: {}\r\n\r\n", BOOKING.len());
            let (a, b) = BOOKING.as_bytes().split_at(BOOKING.len() / 2);
            drip(&mut s, &[head.as_bytes(), a, b]);
        });
        let c = CoreClient::new(
            &url,
            Duration::from_millis(100),
            Duration::from_millis(1000),
        )
        .unwrap();
        let started = std::time::Instant::now();
        let o = c.post_transfer(&transfer());
        let took = started.elapsed();
        assert!(is_unknown(&o), "{o:?} after {took:?}");
        assert!(took < Duration::from_millis(1500), "took {took:?}");
    }

    #[test]
    fn bad_urls_are_refused() {
        for u in ["ftp://x:1", "x:1", "http://", "http://h:1/?q=1", "https://"] {
            assert!(
                CoreClient::new(u, Duration::from_secs(1), Duration::from_secs(1)).is_err(),
                "{u}"
            );
        }
    }

    /// TLS to the core: a handshake that fails is "not sent", anything after it is not.
    mod tls {
        use std::path::Path;
        use std::sync::Arc;
        use std::sync::mpsc;

        use rustls::{ServerConfig, ServerConnection, StreamOwned};
        use testkit::pki::{Pair, Pki};
        use testkit::tls::{Versions, server_config};

        use super::*;

        /// Serves one TLS connection: reads a request and answers it with `raw`. Returns the
        /// URL and what the server read of the request ("" if the handshake failed).
        fn serve_tls(
            config: Arc<ServerConfig>,
            raw: &'static str,
        ) -> (String, mpsc::Receiver<String>) {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            let url = format!("https://{}", l.local_addr().unwrap());
            let (tx, rx) = mpsc::channel();
            thread::spawn(move || {
                let (s, _) = l.accept().unwrap();
                let mut tls = StreamOwned::new(ServerConnection::new(config).unwrap(), s);
                let req = read_request(&mut tls);
                if !req.is_empty() {
                    let _ = tls.write_all(raw.as_bytes());
                    let _ = tls.flush();
                }
                tx.send(req).unwrap();
            });
            (url, rx)
        }

        fn config(
            server: &Pair,
            client_ca: Option<&Path>,
            versions: Versions,
        ) -> Arc<ServerConfig> {
            server_config(&server.cert, &server.key, client_ca, versions).unwrap()
        }

        fn files(ca: &Path, client: Option<&Pair>) -> TlsFiles {
            TlsFiles {
                ca: Some(ca.to_path_buf()),
                cert: client.map(|c| c.cert.clone()),
                key: client.map(|c| c.key.clone()),
            }
        }

        fn post(url: &str, tls: &TlsFiles) -> Outcome {
            let read = Duration::from_millis(2000);
            CoreClient::with_tls(url, Duration::from_millis(2000), read, tls)
                .unwrap()
                .post_transfer(&transfer())
        }

        fn booked() -> Outcome {
            Outcome::Booked(*b"C00000000000000001000000000150020261202093012")
        }

        #[test]
        fn a_good_certificate_books() {
            let pki = Pki::new("core CA");
            let server = pki.server(&["127.0.0.1"]);
            let (url, seen) = serve_tls(
                config(&server, None, Versions::Both),
                json_response("200 OK", BOOKING),
            );
            assert_eq!(post(&url, &files(pki.ca(), None)), booked());
            assert!(
                seen.recv()
                    .unwrap()
                    .starts_with("POST /v1/transfers HTTP/1.1\r\n")
            );
        }

        #[test]
        fn an_unknown_ca_or_another_name_is_not_sent() {
            let pki = Pki::new("core CA");
            let other = Pki::new("another CA");
            for (server, ca) in [
                (pki.server(&["127.0.0.1"]), other.ca()),
                (pki.server(&["core.elsewhere.example"]), pki.ca()),
            ] {
                let (url, seen) = serve_tls(
                    config(&server, None, Versions::Both),
                    json_response("200 OK", BOOKING),
                );
                let o = post(&url, &files(ca, None));
                assert!(
                    matches!(&o, Outcome::NotSent(why) if why.contains("certificate")),
                    "{o:?}"
                );
                assert_eq!(seen.recv().unwrap(), "", "the server read no request");
            }
        }

        /// A server that takes the connection but never answers the ClientHello: the
        /// handshake runs out of the connect timeout, before any request byte.
        #[test]
        fn a_handshake_that_never_completes_is_not_sent() {
            let pki = Pki::new("core CA");
            let (tx, rx) = mpsc::channel::<()>();
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            let url = format!("https://{}", l.local_addr().unwrap());
            thread::spawn(move || {
                let (_s, _) = l.accept().unwrap();
                let _ = rx.recv(); // hold the connection open until the test ends
            });
            let connect = Duration::from_millis(300);
            let c = CoreClient::with_tls(
                &url,
                connect,
                Duration::from_secs(5),
                &files(pki.ca(), None),
            );
            let started = std::time::Instant::now();
            let o = c.unwrap().post_transfer(&transfer());
            drop(tx);
            assert!(matches!(o, Outcome::NotSent(_)), "{o:?}");
            assert!(
                started.elapsed() < Duration::from_secs(2),
                "{:?}",
                started.elapsed()
            );
        }

        #[test]
        fn mutual_tls_with_a_good_client_certificate_books() {
            let pki = Pki::new("core CA");
            let server = pki.server(&["127.0.0.1"]);
            let client = pki.client("relay");
            for versions in [Versions::Both, Versions::Tls12] {
                let (url, _) = serve_tls(
                    config(&server, Some(pki.ca()), versions),
                    json_response("200 OK", BOOKING),
                );
                assert_eq!(post(&url, &files(pki.ca(), Some(&client))), booked());
            }
        }

        /// TLS 1.3: the client has finished its side of the handshake, and sent the request,
        /// before the server says it wants a client certificate it did not get: unknown, by
        /// the rule (the server did not read it, but the client cannot know that). TLS 1.2:
        /// the server says so within the handshake: not sent.
        #[test]
        fn a_missing_client_certificate_is_unknown_under_tls13_and_not_sent_under_tls12() {
            let pki = Pki::new("core CA");
            let server = pki.server(&["127.0.0.1"]);
            let strangers = Pki::new("a CA the core does not know");
            let stranger = strangers.client("relay");
            for client in [None, Some(&stranger)] {
                let (url, seen) = serve_tls(
                    config(&server, Some(pki.ca()), Versions::Both),
                    json_response("200 OK", BOOKING),
                );
                let o = post(&url, &files(pki.ca(), client));
                assert!(is_unknown(&o), "TLS 1.3, client {client:?}: {o:?}");
                assert_eq!(seen.recv().unwrap(), "", "the server read no request");

                let (url, seen) = serve_tls(
                    config(&server, Some(pki.ca()), Versions::Tls12),
                    json_response("200 OK", BOOKING),
                );
                let o = post(&url, &files(pki.ca(), client));
                assert!(
                    matches!(o, Outcome::NotSent(_)),
                    "TLS 1.2, client {client:?}: {o:?}"
                );
                assert_eq!(seen.recv().unwrap(), "", "the server read no request");
            }
        }

        fn refused(url: &str, tls: &TlsFiles) -> String {
            match CoreClient::with_tls(url, Duration::from_secs(1), Duration::from_secs(1), tls) {
                Ok(_) => panic!("{url} with {tls:?} was taken"),
                Err(e) => e.0,
            }
        }

        #[test]
        fn bad_settings_are_refused_at_start_with_one_line() {
            let pki = Pki::new("core CA");
            let client = pki.client("relay");
            let others = Pki::new("another CA");
            let other = others.client("relay");
            let garbage = pki.dir().join("garbage.pem");
            std::fs::write(&garbage, "not a certificate\n").unwrap();
            let missing = pki.dir().join("missing.pem");
            let https = "https://127.0.0.1:9";
            let with = |ca: &Path, cert: Option<&Path>, key: Option<&Path>| TlsFiles {
                ca: Some(ca.to_path_buf()),
                cert: cert.map(Path::to_path_buf),
                key: key.map(Path::to_path_buf),
            };
            for (tls, says) in [
                (with(&missing, None, None), "--core-ca"),
                (with(&garbage, None, None), "no PEM certificate"),
                (with(&client.key, None, None), "no PEM certificate"),
                (with(pki.ca(), Some(&client.cert), None), "both or neither"),
                (
                    with(pki.ca(), Some(&client.cert), Some(&missing)),
                    "--core-key",
                ),
                (
                    with(pki.ca(), Some(&client.cert), Some(&garbage)),
                    "--core-key",
                ),
                (
                    with(pki.ca(), Some(&garbage), Some(&client.key)),
                    "--core-cert",
                ),
                // A key that is not the certificate's: found now, not at the first call.
                (
                    with(pki.ca(), Some(&client.cert), Some(&other.key)),
                    "--core-cert",
                ),
            ] {
                let e = refused(https, &tls);
                assert!(e.contains(says), "{tls:?}: {e}");
                assert_eq!(e.lines().count(), 1, "{e}");
            }
            let e = refused("http://127.0.0.1:9", &with(pki.ca(), None, None));
            assert!(e.contains("https://"), "{e}");
            assert!(
                CoreClient::with_tls(
                    https,
                    Duration::from_secs(1),
                    Duration::from_secs(1),
                    &with(pki.ca(), Some(&client.cert), Some(&client.key))
                )
                .is_ok()
            );
        }
    }
}
