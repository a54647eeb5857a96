//! The relay's one look at its core when it starts: an inquiry (`GET /v1/transfers/{guid}`,
//! never a POST) about a GUID that no channel can have sent, which the core answers with
//! its JSON 404. Anything else is said in one loud warning and in the metric
//! `txrelay_core_start_probe{result=…}`, because otherwise the first sign of a wrong
//! `--core` is the transfers themselves: a wrong port makes every transfer E902, another
//! service at the URL makes every one E901 (UNKNOWN, for resolve and an operator to settle).
//! It is not a reason to refuse to start: the core may come up after the relay, and the
//! relay then serves as soon as it does.
//!
//! The GUID is `txrelay-start-probe-` and 16 random hex digits: a valid GUID (contract §2),
//! so that the core's route matches it, and a new one at every start, so that a channel that
//! once sent a GUID of that form cannot make a later probe see a booking.
//!
//! One thing it cannot tell: a core simulator behind a wrong path prefix answers every
//! unknown path with the same JSON 404 as a GUID it never booked. A real core (or whatever
//! serves the wrong path) answering a 404 page is told apart.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;

use core_client::InquiryDetail;
use log::{info, warn};
use prometheus::{IntGaugeVec, Opts, Registry};
use wire::Transfer;

use crate::metrics::Metrics;
use engine::core::Core;

/// What the probe found: the `result` label of `txrelay_core_start_probe`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    /// The core's JSON 404: the core, at the right path.
    Ok,
    /// No answer: a refused connection, a name that does not resolve, a timeout, a reset.
    Unreachable,
    /// An answer that is not the core's: a 404 without its JSON body (a proxy's page,
    /// another service, a wrong path prefix), or a booking of a GUID never sent.
    NotTheCore,
    /// Another status (a 5xx, a 401), or a body that could not be read.
    Other,
}

impl Found {
    pub const ALL: [Found; 4] = [
        Found::Ok,
        Found::Unreachable,
        Found::NotTheCore,
        Found::Other,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Found::Ok => "ok",
            Found::Unreachable => "unreachable",
            Found::NotTheCore => "not_the_core",
            Found::Other => "other",
        }
    }
}

/// The probe's result: 1 for what the last probe found, 0 for the rest (all 0 before it),
/// registered with `registry` (`Metrics::new`).
pub(crate) fn gauge(registry: &Registry) -> IntGaugeVec {
    let gauge = IntGaugeVec::new(
        Opts::new(
            "txrelay_core_start_probe",
            "What the relay's inquiry at start about a GUID never sent found at --core: \
             1 for the result (ok: the core's JSON 404; unreachable: no answer; \
             not_the_core: a 404 page or a booking; other: another status), 0 for the rest.",
        ),
        &["result"],
    )
    .expect("valid gauge");
    registry
        .register(Box::new(gauge.clone()))
        .expect("metric names are unique and valid");
    for found in Found::ALL {
        gauge.with_label_values(&[found.label()]).set(0);
    }
    gauge
}

/// The prefix of every probe's GUID.
pub const PROBE_PREFIX: &str = "txrelay-start-probe-";

/// A GUID for this start's probe: the prefix and 16 random hex digits (36 characters).
pub fn probe_guid() -> String {
    // A process-wide random key, seeded by the standard library from the system's source.
    let random = RandomState::new().hash_one(std::process::id());
    format!("{PROBE_PREFIX}{random:016x}")
}

/// Asks `core` (at `url`, for the log lines) about a GUID never sent; says what the answer
/// means in the log and in the metric, and returns it.
pub fn probe<C: Core + ?Sized>(core: &C, metrics: &Metrics, url: &str) -> Found {
    let guid = probe_guid();
    let t = Transfer {
        guid: guid.clone(),
        from_account: "0".repeat(14),
        to_account: "0".repeat(14),
        amount: 1,
        memo: String::new(),
    };
    let answer = core.inquire_detail(&t);
    let found = classify(&answer);
    for f in Found::ALL {
        metrics
            .core_start_probe
            .with_label_values(&[f.label()])
            .set(i64::from(f == found));
    }
    report(found, &answer, url, &guid);
    found
}

/// What an inquiry about a GUID never sent says about the server that answered it.
///
/// The inquiry's errors are told apart by the words `core_client` gives them: a transport
/// error is "inquiry failed: …", an answer it did not accept says which ("inquiry answered
/// 404 without the core's JSON body …", "inquiry answered 200 but …", "inquiry answered
/// HTTP 503"). The unit tests hold those words to what this expects.
pub fn classify(answer: &InquiryDetail) -> Found {
    match answer {
        InquiryDetail::NotFound => Found::Ok,
        InquiryDetail::Booked(_) | InquiryDetail::BookedOther { .. } => Found::NotTheCore,
        InquiryDetail::Error(why) if why.starts_with("inquiry failed") => Found::Unreachable,
        InquiryDetail::Error(why)
            if why.starts_with("inquiry answered 404")
                || why.starts_with("inquiry answered 200") =>
        {
            Found::NotTheCore
        }
        InquiryDetail::Error(_) => Found::Other,
    }
}

/// One line: INFO when the core answered as the core, a WARN saying what it means otherwise.
fn report(found: Found, answer: &InquiryDetail, url: &str, guid: &str) {
    let why = match answer {
        InquiryDetail::Error(why) => why.as_str(),
        InquiryDetail::Booked(_) | InquiryDetail::BookedOther { .. } => {
            "it answered 200 with a booking"
        }
        InquiryDetail::NotFound => "",
    };
    match found {
        Found::Ok => info!(
            "core probe: the core at {url} answers (its JSON 404 for {guid}, a GUID never sent)"
        ),
        Found::Unreachable => warn!(
            "core probe: NO ANSWER from the core at {url} ({why}): it is down, --core names \
             the wrong host or port, or TLS to it fails; until it answers, transfers are \
             answered E902 (not sent) and reprocess resends them"
        ),
        Found::NotTheCore => warn!(
            "core probe: {url} is NOT THE CORE, or not its path: asked about {guid}, a GUID \
             never sent, {why} (another service, a proxy's page, or a wrong path prefix in \
             --core?); transfers sent there would be answered E901 (outcome unknown) or a \
             false rejection: check --core"
        ),
        Found::Other => warn!(
            "core probe: the core at {url} did not answer an inquiry as the core does ({why}): \
             check the core and --core; transfers may be answered E901 (outcome unknown)"
        ),
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::TcpListener;
    use std::thread;
    use std::time::Duration;

    use core_client::CoreClient;

    use super::*;

    /// A server that answers the one request it gets `status` with `body`; its URL.
    fn answering(status: &'static str, body: &'static str) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        thread::spawn(move || {
            let Ok((mut s, _)) = listener.accept() else {
                return;
            };
            let mut head = Vec::new();
            let mut b = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && s.read(&mut b).is_ok_and(|n| n == 1) {
                head.push(b[0]);
            }
            let _ = write!(
                s,
                "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        });
        url
    }

    fn found_at(url: &str) -> Found {
        let ms = Duration::from_millis(2000);
        classify(
            &CoreClient::new(url, ms, ms)
                .unwrap()
                .inquire_detail(&Transfer {
                    guid: probe_guid(),
                    from_account: "0".repeat(14),
                    to_account: "0".repeat(14),
                    amount: 1,
                    memo: String::new(),
                }),
        )
    }

    #[test]
    fn the_cores_json_404_is_ok_and_anything_else_is_named() {
        let json_404 = answering("404 Not Found", r#"{"code":"N404","message":"not found"}"#);
        assert_eq!(found_at(&json_404), Found::Ok);
        let page = answering("404 Not Found", "<html>404 Not Found</html>");
        assert_eq!(found_at(&page), Found::NotTheCore);
        let booked = answering(
            "200 OK",
            r#"{"guid":"x","core_ref":"C1","amount":1,"booked_at":"2026-12-02T09:30:12Z"}"#,
        );
        assert_eq!(found_at(&booked), Found::NotTheCore);
        let everything_ok = answering("200 OK", "ok");
        assert_eq!(found_at(&everything_ok), Found::NotTheCore);
        let busy = answering("503 Service Unavailable", "");
        assert_eq!(found_at(&busy), Found::Other);
        // A port nobody listens on: bound, then closed.
        let closed = {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            format!("http://{}", l.local_addr().unwrap())
        };
        assert_eq!(found_at(&closed), Found::Unreachable);
    }

    #[test]
    fn the_probe_guid_is_a_valid_guid_of_its_own_each_time() {
        let (a, b) = (probe_guid(), probe_guid());
        assert!(wire::valid_guid(a.as_bytes()), "{a}");
        assert_eq!(a.len(), 36);
        assert!(a.starts_with(PROBE_PREFIX));
        assert_ne!(a, b);
    }
}
