//! TLS on the channel listener (CONTRACT §8): `--tls-cert`/`--tls-key`, mutual TLS with
//! `--client-ca`, refusals in the handshake (logged with the peer, counted by reason),
//! a stalled handshake, files that cannot be used at start, usage errors, SIGHUP rotation,
//! the per-channel limit (GUIDs that belong to their channel: `tls_ownership`). Certificates are made in
//! the test by throwaway CAs (`testkit::pki`).

use std::path::Path;
use std::time::Duration;

use testkit::pki::{Pair, Pki};

use super::metrics::relay_with_admin;
use super::tls_scene::{TIMEOUT, TlsScene, path, tls_chan, tls_flags};
use crate::util::*;

fn scrape(admin: &str) -> String {
    let (status, body) = http_get(admin, "/metrics");
    assert_eq!(status, 200, "{body}");
    body
}

/// Waits for a stderr line of `relay` containing every one of `parts`.
fn logged(relay: &Server, parts: &[&str]) -> bool {
    eventually(WAIT, || {
        relay
            .stderr()
            .lines()
            .any(|l| parts.iter().all(|p| l.contains(p)))
    })
}

#[test]
fn tls_without_client_certificates_books_with_the_bytes_of_plain_tcp() {
    skip_if_unavailable!();
    let s = TlsScene::new(false, &[]);
    let m = msg("G-TLS-CH-1", 1500, "rent");
    let mut chan = s.chan(None).expect("a TLS session");
    let reply = chan.call(&m).expect("a reply");
    assert_code(&reply, "0000");
    assert_done_with(&s.db, &s.core, &m, &reply);
    assert_eq!(chan.call(&m).expect("a reply"), reply, "the stored reply");
    assert!(logged(
        &s.relay,
        &["guid=G-TLS-CH-1 peer=127.0.0.1:", " channel=- code=0000"]
    ));
    let text = scrape(&s.admin);
    assert_eq!(
        sample(&text, "txrelay_channel_requests_total{channel=\"-\"}"),
        2.0
    );
    // A plain-TCP channel on the TLS port is closed, nothing booked.
    let other = msg("G-TLS-CH-PLAIN", 5, "");
    assert_eq!(try_call(&s.relay.addr, &other, TIMEOUT), None);
    assert_eq!(s.db.state("G-TLS-CH-PLAIN"), None);
    // A plain-TCP relay on the same ledger answers the same bytes.
    let mut s = s;
    s.meanwhile(|s| {
        let plain = start_relay(&s.db, &s.core.url(), &[]);
        assert_eq!(call(&plain.addr, &m), reply);
    });
    assert_eq!(s.core.bookings("G-TLS-CH-1"), 1);
}

#[test]
fn mutual_tls_names_the_channel_in_the_log_and_the_metrics() {
    skip_if_unavailable!();
    let s = TlsScene::new(true, &[]);
    let branch = s.pki.client("branch-7");
    let m = msg("G-MTLS-1", 20, "");
    let mut chan = s.chan(Some(&branch)).expect("a TLS session");
    let reply = chan.call(&m).expect("a reply");
    assert_code(&reply, "0000");
    assert_done_with(&s.db, &s.core, &m, &reply);
    assert!(logged(
        &s.relay,
        &[
            "guid=G-MTLS-1 peer=127.0.0.1:",
            " channel=branch-7 code=0000"
        ]
    ));
    let text = scrape(&s.admin);
    assert_eq!(
        sample(
            &text,
            "txrelay_channel_requests_total{channel=\"branch-7\"}"
        ),
        1.0
    );
    assert!(text.contains("txrelay_tls_cert_expiry_seconds "), "{text}");
}

#[test]
fn handshakes_without_a_good_client_certificate_are_refused_logged_and_counted() {
    skip_if_unavailable!();
    let s = TlsScene::new(true, &[]);
    let other = Pki::new("another CA");
    let cases = [
        ("no_certificate", None),
        ("unknown_ca", Some(other.client("branch-7"))),
        ("expired", Some(s.pki.client_expired("branch-7"))),
        ("bad_subject", Some(s.pki.client_with_cns(&[]))),
        ("bad_subject", Some(s.pki.client_with_cns(&["a", "b"]))),
    ];
    for (i, (reason, identity)) in cases.iter().enumerate() {
        let m = msg(&format!("G-REFUSED-{i}"), 5, "");
        // TLS 1.3: the channel finishes its side first and sees the refusal at its read.
        let answered = s
            .chan(identity.as_ref())
            .and_then(|mut c| {
                let port = c.stream().local_addr()?.port();
                let reply = c.call(&m);
                assert!(
                    logged(
                        &s.relay,
                        &[&format!(
                            "TLS handshake from 127.0.0.1:{port} refused ({reason})"
                        )]
                    ),
                    "case {i}: {}",
                    s.relay.stderr()
                );
                reply
            })
            .is_ok();
        assert!(!answered, "case {i} ({reason}) was served");
    }
    assert_eq!(rows_by_guid(&s.db).len(), 0, "nothing reached the ledger");
    assert_eq!(s.core.total_bookings(), 0);
    let text = scrape(&s.admin);
    for (reason, n) in [
        ("no_certificate", 1.0),
        ("unknown_ca", 1.0),
        ("expired", 1.0),
        ("bad_subject", 2.0),
        ("timeout", 0.0),
    ] {
        let key = format!("txrelay_tls_handshakes_refused_total{{reason=\"{reason}\"}}");
        assert_eq!(sample(&text, &key), n, "{key}\n{text}");
    }
}

/// `--client-crl`: a revoked channel certificate is refused in the handshake (`revoked`),
/// another of the same CA still gets through.
#[test]
fn a_revoked_client_certificate_is_refused() {
    skip_if_unavailable!();
    let pki = Pki::new("relay CA");
    let (good, revoked) = (pki.client("branch-good"), pki.client("branch-revoked"));
    let crl = pki.crl(&[&revoked]);
    let s = TlsScene::with_pki(pki, true, &["--client-crl", path(&crl)]);
    let m = msg("G-CRL-GOOD", 5, "");
    assert_code(&s.chan(Some(&good)).unwrap().call(&m).unwrap(), "0000");
    let refused = s
        .chan(Some(&revoked))
        .and_then(|mut c| c.call(&msg("G-CRL-REVOKED", 5, "")));
    assert!(refused.is_err(), "a revoked certificate was served");
    assert!(
        logged(&s.relay, &["refused (revoked)"]),
        "{}",
        s.relay.stderr()
    );
    assert_eq!(
        s.db.state("G-CRL-REVOKED"),
        None,
        "nothing reached the ledger"
    );
    let text = scrape(&s.admin);
    assert_eq!(
        sample(
            &text,
            "txrelay_tls_handshakes_refused_total{reason=\"revoked\"}"
        ),
        1.0
    );
}

#[test]
fn a_stalled_handshake_is_closed_within_the_frame_timeout() {
    skip_if_unavailable!();
    let s = TlsScene::new(false, &["--frame-timeout-ms", "300"]);
    let mut silent = Channel::connect(&s.relay.addr);
    assert!(silent.closed_within(Duration::from_secs(3)));
    assert!(logged(&s.relay, &["refused (timeout)"]));
    let text = scrape(&s.admin);
    assert_eq!(
        sample(
            &text,
            "txrelay_tls_handshakes_refused_total{reason=\"timeout\"}"
        ),
        1.0
    );
    // Another channel is served meanwhile and after.
    let mut chan = s.chan(None).expect("a TLS session");
    assert_code(&chan.call(&msg("G-STALL-OK", 5, "")).unwrap(), "0000");
}

#[test]
fn unusable_tls_files_are_one_line_naming_them_before_listening() {
    skip_if_unavailable!();
    let pki = Pki::new("relay CA");
    let (a, b) = (pki.server(&["127.0.0.1"]), pki.server(&["127.0.0.1"]));
    let missing = pki.dir().join("missing.pem");
    let junk = pki.dir().join("junk.pem");
    std::fs::write(&junk, "no PEM here\n").unwrap();
    let db = temp_ledger();
    let core = dead_url();
    let cases: Vec<(Vec<&str>, Vec<&Path>)> = vec![
        (
            vec!["--tls-cert", path(&missing), "--tls-key", path(&a.key)],
            vec![&missing],
        ),
        (
            vec!["--tls-cert", path(&junk), "--tls-key", path(&a.key)],
            vec![&junk],
        ),
        (
            vec!["--tls-cert", path(&a.cert), "--tls-key", path(&junk)],
            vec![&junk],
        ),
        (
            vec!["--tls-cert", path(&a.cert), "--tls-key", path(&b.key)],
            vec![&a.cert, &b.key],
        ),
        (
            [tls_flags(&a, None), vec!["--client-ca", path(&junk)]].concat(),
            vec![&junk],
        ),
        (
            [tls_flags(&a, None), vec!["--client-ca", path(&missing)]].concat(),
            vec![&missing],
        ),
    ];
    for (flags, named) in cases {
        let args = [
            &["--db", db.arg(), "--listen", "127.0.0.1:0", "--core", &core][..],
            &flags,
        ]
        .concat();
        let r = Run::new("relay", &args);
        r.expect_code(EXIT_FATAL);
        assert_eq!(r.stderr().lines().count(), 1, "{flags:?}: {}", r.stderr());
        for f in named {
            assert!(r.stderr().contains(path(f)), "{flags:?}: {}", r.stderr());
        }
        assert!(!r.stdout().contains("listening on"), "{}", r.stdout());
    }
}

#[test]
fn tls_flags_without_their_partners_are_usage_errors() {
    skip_if_unavailable!();
    let base = ["--db", "x.db", "--listen", "127.0.0.1:0"];
    for (flags, named) in [
        (&["--tls-cert", "c.pem"][..], "--tls-key"),
        (&["--tls-key", "k.pem"][..], "--tls-cert"),
        (&["--client-ca", "ca.pem"][..], "--tls-cert"),
        (
            &[
                "--tls-cert",
                "c.pem",
                "--tls-key",
                "k.pem",
                "--client-crl",
                "x.pem",
            ][..],
            "--client-ca",
        ),
        (
            &["--max-connections-per-channel", "0"][..],
            "--max-connections-per-channel",
        ),
    ] {
        let r = Run::new("relay", &[&base[..], flags].concat());
        r.expect_code(EXIT_USAGE);
        assert!(r.stderr().contains(named), "{flags:?}: {}", r.stderr());
    }
}

#[test]
fn sighup_rotates_the_certificates_without_dropping_connections() {
    skip_if_unavailable!();
    let (pki1, pki2) = (Pki::new("CA 1"), Pki::new("CA 2"));
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    let install = |pair: &Pair| {
        std::fs::copy(&pair.cert, &cert).unwrap();
        std::fs::copy(&pair.key, &key).unwrap();
    };
    install(&pki1.server(&["127.0.0.1"]));
    let db = temp_ledger();
    let core = Core::start(&[]);
    let mut cmd = relay_command(
        &db,
        &core.url(),
        &["--tls-cert", path(&cert), "--tls-key", path(&key)],
    );
    cmd.env("RUST_LOG", "info");
    let mut relay = Server::start(cmd);
    let mut old = tls_chan(&relay, pki1.ca(), None).expect("a session with cert 1");
    assert_code(&old.call(&msg("G-HUP-1", 5, "")).unwrap(), "0000");

    install(&pki2.server(&["127.0.0.1"]));
    relay.signal("-HUP");
    assert!(
        logged(&relay, &["reloaded TLS certificates"]),
        "{}",
        relay.stderr()
    );
    let mut new = tls_chan(&relay, pki2.ca(), None).expect("a session with cert 2");
    assert_code(&new.call(&msg("G-HUP-2", 5, "")).unwrap(), "0000");
    assert!(
        tls_chan(&relay, pki1.ca(), None).is_err(),
        "cert 1 is no longer shown"
    );
    assert_code(&old.call(&msg("G-HUP-3", 5, "")).unwrap(), "0000");

    // A reload that fails keeps the certificates in use.
    std::fs::write(&key, "not a key\n").unwrap();
    relay.signal("-HUP");
    assert!(logged(
        &relay,
        &["cannot reload the TLS certificates", path(&key)]
    ));
    let mut again = tls_chan(&relay, pki2.ca(), None).expect("still cert 2");
    assert_code(&again.call(&msg("G-HUP-4", 5, "")).unwrap(), "0000");
    assert!(relay.alive());
}

#[test]
fn sighup_without_tls_keeps_the_relay_running() {
    skip_if_unavailable!();
    let db = temp_ledger();
    let core = Core::start(&[]);
    let mut cmd = relay_command(&db, &core.url(), &[]);
    cmd.env("RUST_LOG", "info");
    let mut relay = Server::start(cmd);
    relay.signal("-HUP");
    assert!(logged(&relay, &["SIGHUP: nothing to reload"]));
    assert!(relay.alive());
    assert_code(&call(&relay.addr, &msg("G-HUP-PLAIN", 5, "")), "0000");
}

#[test]
fn a_channel_over_its_limit_is_closed_and_the_peer_limit_counts_channels() {
    skip_if_unavailable!();
    let s = TlsScene::new(
        true,
        &[
            "--max-connections-per-channel",
            "1",
            "--max-connections-per-peer",
            "2",
        ],
    );
    let (a, b, c) = (
        s.pki.client("chan-a"),
        s.pki.client("chan-b"),
        s.pki.client("chan-c"),
    );
    let mut a1 = s.chan(Some(&a)).unwrap();
    assert_code(&a1.call(&msg("G-LIM-A1", 5, "")).unwrap(), "0000");
    // A second connection of channel A: closed after its handshake.
    let served = s
        .chan(Some(&a))
        .and_then(|mut a2| a2.call(&msg("G-LIM-A2", 5, "")))
        .is_ok();
    assert!(!served);
    assert!(logged(
        &s.relay,
        &["max_connections_per_channel 1 reached for channel chan-a"]
    ));
    // Three channels from one IP with --max-connections-per-peer 2: each counts under its
    // channel once its handshake is done.
    let mut b1 = s.chan(Some(&b)).unwrap();
    let mut c1 = s.chan(Some(&c)).unwrap();
    assert_code(&b1.call(&msg("G-LIM-B1", 5, "")).unwrap(), "0000");
    assert_code(&c1.call(&msg("G-LIM-C1", 5, "")).unwrap(), "0000");
    assert_code(&a1.call(&msg("G-LIM-A3", 5, "")).unwrap(), "0000");
    assert_eq!(s.db.state("G-LIM-A2"), None);
    let text = scrape(&s.admin);
    assert_eq!(
        sample(
            &text,
            "txrelay_connections_refused_total{limit=\"max_connections_per_channel\"}"
        ),
        1.0
    );
    assert_eq!(
        sample(
            &text,
            "txrelay_connections_refused_total{limit=\"max_connections_per_peer\"}"
        ),
        0.0
    );
}

#[test]
fn a_certificate_about_to_expire_is_a_warning_and_a_gauge() {
    skip_if_unavailable!();
    let pki = Pki::new("relay CA");
    let server = pki.server_expiring_in(&["127.0.0.1"], Duration::from_secs(2 * 86400));
    let db = temp_ledger();
    let core = Core::start(&[]);
    let (relay, admin) = relay_with_admin(&db, &core.url(), &tls_flags(&server, None));
    assert!(logged(&relay, &["expires in", path(&server.cert)]));
    let left = sample(&scrape(&admin), "txrelay_tls_cert_expiry_seconds");
    assert!((86400.0..=2.0 * 86400.0).contains(&left), "{left}");
}
