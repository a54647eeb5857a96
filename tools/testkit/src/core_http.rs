//! Talking HTTP to the core simulator from tests and tools: `/_stats`, inquiries, and
//! bookings made directly (as if an earlier send had reached the core). Uses the same HTTP
//! client as the relay (ureq), with keep-alive, no retries and no proxy.

use std::time::Duration;

use anyhow::{Context, bail};
use ledger::core_client::transfer_json;
use ledger::wire::Transfer;
use serde_json::Value;

/// Largest answer read (a long run's `/_stats` lists every GUID).
const MAX_BODY: u64 = 256 * 1024 * 1024;

/// A client for one core (simulator) base URL.
#[derive(Clone)]
pub struct CoreHttp {
    agent: ureq::Agent,
    base: String,
}

impl CoreHttp {
    /// `base` is `http://host:port` (a trailing path is kept as a prefix).
    pub fn new(base: &str, timeout: Duration) -> CoreHttp {
        let agent = ureq::Agent::config_builder()
            .timeout_global(Some(timeout))
            .http_status_as_error(false)
            .max_redirects(0)
            .proxy(None)
            .build()
            .into();
        CoreHttp {
            agent,
            base: base.trim_end_matches('/').to_string(),
        }
    }

    /// One exchange: (status, body). Never retried.
    pub fn request(
        &self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
    ) -> anyhow::Result<(u16, String)> {
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
        let body = resp
            .body_mut()
            .with_config()
            .limit(MAX_BODY)
            .read_to_string()
            .with_context(|| format!("{method} {url}: body"))?;
        Ok((status, body))
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
