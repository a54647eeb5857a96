//! A client certificate whose CN is `-` (issue 39, item 7): the log, the metrics and
//! `inspect` show an anonymous connection as `-`, so a channel named so would pass for
//! anonymous. Under `--client-ca` it is refused in the handshake like a subject without
//! exactly one CN, on the frames' door and on the HTTP door alike: nothing written, the
//! refusal one log line naming the peer, counted under `bad_subject`. A channel with a good
//! name is still served beside it.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rustls::ClientConfig;
use testkit::Chan;
use testkit::pki::{Pair, Pki};
use testkit::tls_client::{ClientTls, connect};

use super::metrics::{relay_with_admin, scrape};
use super::tls_scene::path;
use crate::util::*;

const TIMEOUT: Duration = Duration::from_secs(10);

fn config(pki: &Pki, identity: &Pair) -> Arc<ClientConfig> {
    ClientTls::new(pki.ca(), "127.0.0.1")
        .with_identity(&identity.cert, &identity.key)
        .config()
        .expect("a client configuration")
}

/// A TLS session to `addr` (either door: the session carries frames or HTTP alike).
fn session(addr: &str, config: &Arc<ClientConfig>) -> io::Result<Chan> {
    let addr: SocketAddr = addr.parse().expect("an address");
    connect(&addr, config, "127.0.0.1", TIMEOUT)
}

/// Sends `request` over a TLS session to `addr`; whether it was served (anything came
/// back), and the local port when the handshake got that far. Under TLS 1.3 the client's
/// side of the handshake ends first: the refusal shows at its first read.
fn served(addr: &str, config: &Arc<ClientConfig>, request: &[u8]) -> (bool, Option<u16>) {
    let Ok(mut c) = session(addr, config) else {
        return (false, None);
    };
    let port = c.stream().local_addr().ok().map(|a| a.port());
    if c.send_raw(request).is_err() {
        return (false, port);
    }
    (!c.closed_within(TIMEOUT), port)
}

/// Whether `relay` logged the refusal of the handshake from `port` (any port if `None`).
fn refusal_logged(relay: &Server, port: Option<u16>) -> bool {
    let want = match port {
        Some(port) => format!("TLS handshake from 127.0.0.1:{port} refused (bad_subject)"),
        None => "refused (bad_subject)".to_string(),
    };
    eventually(WAIT, || relay.stderr().lines().any(|l| l.contains(&want)))
}

#[test]
fn a_certificate_named_dash_is_refused_on_both_doors() {
    skip_if_unavailable!();
    let pki = Pki::new("relay CA");
    let server = pki.server(&["localhost", "127.0.0.1"]);
    let db = temp_ledger();
    let core = Core::start(&[]);
    let (flag, h) = http_listen();
    let args = [
        "--tls-cert",
        path(&server.cert),
        "--tls-key",
        path(&server.key),
        "--client-ca",
        path(pki.ca()),
        &flag,
        &h,
    ];
    let (relay, admin) = relay_with_admin(&db, &core.url(), &args);
    let dash = config(&pki, &pki.client("-"));

    let frame = wire::frame(&msg("G-CN-DASH-TCP", 5, ""));
    let (answered, port) = served(&relay.addr, &dash, &frame);
    assert!(!answered, "the frames' door served CN \"-\"");
    assert!(refusal_logged(&relay, port), "{}", relay.stderr());

    let post = post_bytes(Some("\"G-CN-DASH-HTTP\""), &transfer_body(5, ""));
    let (answered, port) = served(&h, &dash, &post);
    assert!(!answered, "the HTTP door served CN \"-\"");
    assert!(refusal_logged(&relay, port), "{}", relay.stderr());

    // A good name is served on the same relay, and is the only row.
    let good = config(&pki, &pki.client("branch-7"));
    let mut c = session(&relay.addr, &good).expect("a TLS session");
    assert_code(&c.call(&msg("G-CN-GOOD", 5, "")).expect("a reply"), "0000");
    assert_eq!(
        db.row("G-CN-GOOD").unwrap().channel.as_deref(),
        Some("branch-7")
    );
    assert_eq!(
        rows_by_guid(&db).len(),
        1,
        "nothing of CN \"-\" was written"
    );
    assert_eq!(core.total_bookings(), 1);

    let text = scrape(&admin);
    assert_eq!(
        sample(
            &text,
            "txrelay_tls_handshakes_refused_total{reason=\"bad_subject\"}"
        ),
        2.0,
        "{text}"
    );
    // Nothing was counted as an anonymous channel's request.
    let anonymous = samples(&text)
        .get("txrelay_channel_requests_total{channel=\"-\"}")
        .copied()
        .unwrap_or(0.0);
    assert_eq!(anonymous, 0.0, "{text}");
}
