//! The HTTP channel API over HTTPS and mutual TLS (CONTRACT §9 with §8): the channel
//! identity owns its GUIDs whichever door they came through, a GET does not show another
//! channel's row, a connection without a client certificate is refused; and the door, the
//! status and the code in the metrics and the log.

use std::time::Duration;

use serde_json::json;
use testkit::pki::{Pair, Pki};
use testkit::tls_client::ClientTls;

use super::metrics::relay_with_admin;
use super::tls_scene::path;
use crate::util::*;

fn client(pki: &Pki, identity: Option<&Pair>) -> ClientTls {
    let tls = ClientTls::new(pki.ca(), "127.0.0.1");
    match identity {
        Some(id) => tls.with_identity(&id.cert, &id.key),
        None => tls,
    }
}

/// Whether the relay logged a line containing every one of `parts`.
fn logged(relay: &Server, parts: &[&str]) -> bool {
    eventually(Duration::from_secs(10), || {
        relay
            .stderr()
            .lines()
            .any(|l| parts.iter().all(|p| l.contains(p)))
    })
}

#[test]
fn over_mutual_tls_a_guid_belongs_to_its_channel_across_doors() {
    skip_if_unavailable!();
    let pki = Pki::new("relay CA");
    let server = pki.server(&["localhost", "127.0.0.1"]);
    let (a, b) = (pki.client("chan-a"), pki.client("chan-b"));
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
    let (relay, _admin) = relay_with_admin(&db, &core.url(), &args);
    let body = transfer_body(310, "owned");

    let mut ca = https_connect(&h, &client(&pki, Some(&a))).unwrap();
    let first = ca.post(Some("\"G-T-OWN\""), &body);
    assert_eq!(first.status, 200, "{first:?}");
    assert_eq!(
        db.row("G-T-OWN").unwrap().channel.as_deref(),
        Some("chan-a")
    );
    assert!(logged(
        &relay,
        &["guid=G-T-OWN", "channel=chan-a", "code=0000", "door=http"]
    ));

    let mut cb = https_connect(&h, &client(&pki, Some(&b))).unwrap();
    let theirs = cb.post(Some("\"G-T-OWN\""), &body);
    assert_eq!(theirs.status, 422);
    assert_eq!(theirs.json()["code"], json!("E904"));
    assert_eq!(cb.get("/v1/transfers/G-T-OWN").status, 404, "not B's row");
    assert_eq!(
        ca.get("/v1/transfers/G-T-OWN").json()["state"],
        json!("DONE")
    );

    // The same identity over the frames' door: a replay of the reply the row holds.
    let tls = client(&pki, Some(&a));
    let config = tls.config().unwrap();
    let addr = relay.addr.parse().unwrap();
    let mut frames =
        testkit::tls_client::connect(&addr, &config, "127.0.0.1", Duration::from_secs(10)).unwrap();
    let m = msg("G-T-OWN", 310, "owned");
    let reply = frames.call(&m).unwrap();
    assert_eq!(Some(reply), db.row("G-T-OWN").unwrap().response);

    // No client certificate: refused in the handshake, or at the first read under TLS 1.3.
    let refused = https_connect(&h, &client(&pki, None)).map(|mut c| {
        c.send_raw(b"GET /v1/transfers/G-T-OWN HTTP/1.1\r\nHost: r\r\n\r\n");
        c.answer()
    });
    assert!(matches!(refused, Err(_) | Ok(None)), "{refused:?}");
    assert_eq!(core.bookings("G-T-OWN"), 1);
}

#[test]
fn https_without_client_certificates_books_as_plain_http() {
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
        &flag,
        &h,
    ];
    let (_relay, _admin) = relay_with_admin(&db, &core.url(), &args);
    let mut c = https_connect(&h, &client(&pki, None)).unwrap();
    let a = c.post(Some("\"G-T-ANON\""), &transfer_body(12, ""));
    assert_eq!(a.status, 200);
    let row = db.row("G-T-ANON").unwrap();
    assert_eq!(row.channel, None);
    assert_eq!(row.request.as_deref(), Some(&msg("G-T-ANON", 12, "")[..]));
    assert_eq!(core.bookings("G-T-ANON"), 1);
}

#[test]
fn metrics_count_by_door_status_and_code() {
    skip_if_unavailable!();
    let db = temp_ledger();
    let core = Core::start(&[]);
    let (flag, h) = http_listen();
    let (relay, admin) = relay_with_admin(&db, &core.url(), &[&flag, &h]);
    assert_code(&call(&relay.addr, &msg("G-T-M1", 1, "")), "0000");
    assert_eq!(
        http_post(&h, Some("\"G-T-M2\""), &transfer_body(2, "")).status,
        200
    );
    assert_eq!(
        http_post(&h, Some("\"G-T-M2\""), &transfer_body(2, "")).status,
        200
    );
    assert_eq!(http_post(&h, None, &transfer_body(2, "")).status, 400);
    assert_eq!(http_get_answer(&h, "/nowhere").status, 404);
    let (status, text) = http_get(&admin, "/metrics");
    assert_eq!(status, 200);
    assert_eq!(
        sample(&text, "txrelay_door_requests_total{door=\"tcp\"}"),
        1.0
    );
    assert_eq!(
        sample(&text, "txrelay_door_requests_total{door=\"http\"}"),
        3.0
    );
    let http = |status: &str, code: &str| {
        let key = format!("txrelay_http_responses_total{{code=\"{code}\",status=\"{status}\"}}");
        sample(&text, &key)
    };
    assert_eq!(http("200", "0000"), 2.0);
    assert_eq!(http("400", "E900"), 1.0);
    assert_eq!(http("404", "-"), 1.0);
    assert_eq!(sample(&text, "txrelay_requests_total{code=\"0000\"}"), 3.0);
    assert!(logged(&relay, &["guid=G-T-M1", "code=0000", "door=tcp"]));
    assert!(logged(
        &relay,
        &["guid=-", "code=E900", "detail=Idempotency-Key", "door=http"]
    ));
}
