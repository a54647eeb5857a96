//! The HTTP client to the core: one agent, its timeouts and keep-alive pool, its connector
//! that marks failures before any byte was sent (`pre_send`); the POST of a transfer and the
//! inquiry about one.

use std::time::Duration;

use serde::Serialize;
use ureq::http::Uri;

use crate::capture::{self, LateCall};
use crate::outcome::{
    Inquiry, InquiryDetail, Ours, Outcome, booking_or_other, classify, outcome_of,
};
use crate::pre_send::{MarkingConnector, MarkingResolver};
use crate::tls::{self, TlsFiles};
use wire::{TX_TRNF, Transfer};

/// Idle keep-alive connections kept to the core, and for how long.
pub const MAX_IDLE: usize = core_api::MAX_PARALLEL;

/// How many calls to the core a batch tool (resolve, reprocess) makes at once unless told
/// otherwise (their `--parallel`); at most [`MAX_IDLE`], so that every worker keeps its own
/// connection alive.
pub use core_api::DEFAULT_PARALLEL;
const MAX_IDLE_AGE: Duration = Duration::from_secs(2);

/// Largest core answer we read; anything longer is not a booking and is cut (→ unknown).
const MAX_BODY: u64 = 64 * 1024;

/// The core's URL, or its TLS settings, were not usable: one line for the operator.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadCoreUrl(pub String);

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
        // A query string may carry a token: the URL is shown without it.
        let shown = match base_url.split_once('?') {
            Some((before, _)) => format!("{before}?…"),
            None => base_url.to_string(),
        };
        let bad = |why: &str| BadCoreUrl(format!("core URL {shown:?}: {why}"));
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
        self.inquire_detail(t).into()
    }

    /// As [`CoreClient::inquire`], telling a booking of `t`'s GUID for another amount apart
    /// from the other errors (recovery mode answers it `E904`, contract §11).
    pub fn inquire_detail(&self, t: &Transfer) -> InquiryDetail {
        let result = self
            .agent
            .get(format!("{}/v1/transfers/{}", self.base, t.guid))
            .call();
        let mut resp = match result {
            Ok(r) => r,
            Err(e) => return InquiryDetail::Error(format!("inquiry failed: {e}")),
        };
        let status = resp.status().as_u16();
        if status != 200 && status != 404 {
            return InquiryDetail::Error(format!("inquiry answered HTTP {status}"));
        }
        let text = match resp.body_mut().with_config().limit(MAX_BODY).read_to_vec() {
            Ok(text) => text,
            Err(e) => return InquiryDetail::Error(format!("inquiry body not read: {e}")),
        };
        if status == 404 {
            // Proof of "never booked" only from the core itself: its 404 carries a JSON
            // object. A proxy's or load balancer's 404 page (or an empty body) is not it.
            return match serde_json::from_slice::<serde_json::Value>(&text) {
                Ok(serde_json::Value::Object(_)) => InquiryDetail::NotFound,
                _ => InquiryDetail::Error(
                    "inquiry answered 404 without the core's JSON body (a proxy's page?)".into(),
                ),
            };
        }
        match booking_or_other(&text, Ours::of(t)) {
            Ok(body) => InquiryDetail::Booked(body),
            Err((Some(amount), why)) => InquiryDetail::BookedOther {
                amount,
                why: format!("inquiry answered 200 but {why}"),
            },
            Err((None, why)) => InquiryDetail::Error(format!("inquiry answered 200 but {why}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io;

    use ureq::Error;
    use ureq::unversioned::transport::{ConnectionDetails, Connector, Transport};

    use super::*;

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
    fn a_refused_url_is_shown_without_its_query_string() {
        let e = CoreClient::new(
            "http://core:9201/v1?token=Xq9secret",
            Duration::from_millis(500),
            Duration::from_millis(500),
        )
        .err()
        .expect("a query string is refused");
        assert!(!e.0.contains("Xq9secret"), "{}", e.0);
        assert!(e.0.contains("http://core:9201/v1?…"), "{}", e.0);
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
        // Never sent, so any transfer will do.
        let t = Transfer {
            guid: "G-EMFILE".into(),
            from_account: "1".repeat(14),
            to_account: "2".repeat(14),
            amount: 1,
            memo: String::new(),
        };
        let o = c.post_transfer(&t);
        assert!(
            matches!(&o, Outcome::NotSent(why) if why.contains("connect")),
            "{o:?}"
        );
    }
}
