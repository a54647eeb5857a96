//! Talking HTTP to the core simulator from tests and tools: `/_stats`, inquiries, and
//! bookings made directly (as if an earlier send had reached the core). Uses the same HTTP
//! client as the relay (ureq), with keep-alive, no retries and no proxy.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context, bail};
use core_client::pre_send::MarkingResolver;
use core_client::tls::{self, TlsFiles};
use core_client::transfer_json;
use serde_json::Value;
use ureq::unversioned::transport::{ConnectionDetails, Connector, DefaultConnector, Transport};
use wire::Transfer;

/// Largest answer read (a long run's `/_stats` lists every GUID).
const MAX_BODY: u64 = 256 * 1024 * 1024;

/// A client for one core (simulator) base URL. Its clones share one pool of kept-alive
/// connections.
#[derive(Clone)]
pub struct CoreHttp {
    agent: ureq::Agent,
    base: String,
    connects: Arc<AtomicU64>,
}

/// One answer, with the header the simulator's tests look at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub content_type: Option<String>,
    pub body: String,
}

/// ureq's connector chain, counting the connections it opens.
#[derive(Debug)]
struct Counting(DefaultConnector, Arc<AtomicU64>);

impl Connector<()> for Counting {
    type Out = Box<dyn Transport>;

    fn connect(
        &self,
        details: &ConnectionDetails,
        chained: Option<()>,
    ) -> Result<Option<Self::Out>, ureq::Error> {
        let out = self.0.connect(details, chained)?;
        if out.is_some() {
            self.1.fetch_add(1, Ordering::Relaxed);
        }
        Ok(out)
    }
}

impl CoreHttp {
    /// `base` is `http://host:port` (a trailing path is kept as a prefix).
    pub fn new(base: &str, timeout: Duration) -> CoreHttp {
        CoreHttp::with_tls(base, timeout, &TlsFiles::default())
    }

    /// As [`CoreHttp::new`]; an `https://` base is checked against `tls` as the relay checks
    /// its core (`--core-ca`, `--core-cert`, `--core-key`).
    pub fn with_tls(base: &str, timeout: Duration, tls: &TlsFiles) -> CoreHttp {
        let mut config = ureq::Agent::config_builder()
            .timeout_global(Some(timeout))
            .http_status_as_error(false)
            .max_redirects(0)
            .proxy(None);
        if base.starts_with("https://") {
            let uri: ureq::http::Uri = base.parse().expect("a core URL");
            let host = uri.host().expect("a host in the core URL");
            config = config
                .tls_config(tls::load(tls, host).unwrap_or_else(|e| panic!("TLS to {base}: {e}")));
        }
        let config = config.build();
        let connects = Arc::new(AtomicU64::new(0));
        let connector = Counting(DefaultConnector::new(), Arc::clone(&connects));
        CoreHttp {
            // The relay's resolver: ureq's own would start a lookup thread for every call,
            // even to a literal IP address on a kept-alive connection.
            agent: ureq::Agent::with_parts(config, connector, MarkingResolver::default()),
            base: base.trim_end_matches('/').to_string(),
            connects,
        }
    }

    /// TCP connections opened so far by this client and its clones (a kept-alive one is
    /// counted once).
    pub fn connects(&self) -> u64 {
        self.connects.load(Ordering::Relaxed)
    }

    /// One exchange: (status, body). Never retried.
    pub fn request(
        &self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
    ) -> anyhow::Result<(u16, String)> {
        self.exchange(method, path, body)
            .map(|r| (r.status, r.body))
    }

    /// One exchange, with the answer's `Content-Type`. Never retried.
    pub fn exchange(
        &self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
    ) -> anyhow::Result<Response> {
        let url = format!("{}{path}", self.base);
        let sent = match (method, body) {
            ("GET", None) => self.agent.get(&url).call(),
            ("POST", Some(b)) => self
                .agent
                .post(&url)
                .header("Content-Type", "application/json")
                .send(b),
            ("POST", None) => self.agent.post(&url).send_empty(),
            _ => bail!("unsupported request {method} {path}"),
        };
        let mut resp = sent.with_context(|| format!("{method} {url}"))?;
        let status = resp.status().as_u16();
        let content_type = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let body = resp
            .body_mut()
            .with_config()
            .limit(MAX_BODY)
            .read_to_string()
            .with_context(|| format!("{method} {url}: body"))?;
        Ok(Response {
            status,
            content_type,
            body,
        })
    }

    /// `GET path`, expecting 200 and a JSON body.
    pub fn get_json(&self, path: &str) -> anyhow::Result<Value> {
        match self.request("GET", path, None)? {
            (200, body) => {
                serde_json::from_str(&body).with_context(|| format!("GET {path}: {body:?}"))
            }
            (status, body) => bail!("GET {path}: HTTP {status} {body:?}"),
        }
    }

    /// The simulator's `/_stats`: `{"bookings":N,"by_guid":{…},"inquiries":M}`.
    pub fn stats(&self) -> anyhow::Result<Value> {
        self.get_json("/_stats")
    }

    /// How many times the core booked `guid`.
    pub fn bookings(&self, guid: &str) -> anyhow::Result<u64> {
        Ok(self.stats()?["by_guid"][guid].as_u64().unwrap_or(0))
    }

    /// The inquiry: `Some(booking)` on 200, `None` on 404 (counts as an inquiry).
    pub fn inquiry(&self, guid: &str) -> anyhow::Result<Option<Value>> {
        match self.request("GET", &format!("/v1/transfers/{guid}"), None)? {
            (200, body) => Ok(Some(serde_json::from_str(&body)?)),
            (404, _) => Ok(None),
            (status, body) => bail!("inquiry for {guid}: HTTP {status} {body:?}"),
        }
    }

    /// POSTs `t` as the relay would: (status, body).
    pub fn post_transfer(&self, t: &Transfer) -> anyhow::Result<(u16, String)> {
        self.request("POST", "/v1/transfers", Some(&transfer_json(t)))
    }

    /// Books `t` directly, as if an earlier send had reached the core; the booking JSON.
    pub fn book(&self, t: &Transfer) -> anyhow::Result<Value> {
        match self.post_transfer(t)? {
            (200, body) => Ok(serde_json::from_str(&body)?),
            (status, body) => bail!("booking {}: HTTP {status} {body:?}", t.guid),
        }
    }
}

/// True if a failed exchange ran out of time (rather than being refused, reset, …).
pub fn is_timeout(e: &anyhow::Error) -> bool {
    match e.downcast_ref::<ureq::Error>() {
        Some(ureq::Error::Timeout(_)) => true,
        Some(ureq::Error::Io(io)) => crate::channel::is_timeout(io),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::TcpListener;
    use std::thread;

    use super::*;

    /// A server that answers `n` requests on one kept-alive connection, then hangs up.
    fn server(n: usize) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            for _ in 0..n {
                let mut head = Vec::new();
                let mut b = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    s.read_exact(&mut b).unwrap();
                    head.push(b[0]);
                }
                let body = br#"{"ok":true}"#;
                let answer = format!(
                    "HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\n\
                     Content-Length: {}\r\n\r\n",
                    body.len()
                );
                s.write_all(answer.as_bytes()).unwrap();
                s.write_all(body).unwrap();
            }
        });
        format!("http://{addr}")
    }

    #[test]
    fn keeps_one_connection_alive_and_counts_it() {
        let core = CoreHttp::new(&server(3), Duration::from_secs(5));
        for _ in 0..3 {
            let r = core.exchange("GET", "/x", None).unwrap();
            assert_eq!(r.status, 404);
            assert_eq!(r.content_type.as_deref(), Some("application/json"));
            assert_eq!(r.body, r#"{"ok":true}"#);
        }
        assert_eq!(core.connects(), 1);
    }

    #[test]
    fn a_silent_server_is_a_timeout() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let core = CoreHttp::new(
            &format!("http://{}", listener.local_addr().unwrap()),
            Duration::from_millis(100),
        );
        let e = core.request("GET", "/x", None).unwrap_err();
        assert!(is_timeout(&e), "{e:#}");
        let refused = CoreHttp::new(&crate::dead_url(), Duration::from_secs(5));
        let e = refused.request("GET", "/x", None).unwrap_err();
        assert!(!is_timeout(&e), "{e:#}");
    }
}
