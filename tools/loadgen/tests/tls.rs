//! `loadgen` over mutual TLS against an in-process TLS relay stand-in: every kept-alive
//! connection does one handshake with the client certificate, every reply is validated;
//! and the TLS flags' usage errors.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::Value;
use testkit::pki::Pki;

fn loadgen(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .args(args)
        .env_clear()
        .output()
        .expect("run loadgen")
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn kept_alive_connections_over_mutual_tls() {
    let pki = Pki::new("loadgen test CA");
    let client = pki.client("channel-a");
    let (addr, seen) = pki.answering_relay(true);
    let out = loadgen(&[
        "--relay",
        &addr.to_string(),
        "--connections",
        "4",
        "--requests",
        "200",
        "--resend-ratio",
        "0.3",
        "--seed",
        "7",
        "--tls-ca",
        s(pki.ca()),
        "--tls-cert",
        s(&client.cert),
        "--tls-key",
        s(&client.key),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let v: Value = serde_json::from_slice(&out.stdout).expect("one JSON line");
    assert_eq!(v["tls"], true, "{v}");
    assert_eq!(v["tls_client_cert"], true, "{v}");
    assert_eq!(v["requests"], 200, "{v}");
    assert_eq!(v["replies_by_code"]["0000"], 200, "{v}");
    assert!(v["resends"].as_u64().unwrap() > 0, "{v}");
    for k in ["resend_mismatches", "malformed_replies", "errors"] {
        assert_eq!(v[k], 0, "{k}: {v}");
    }
    // Kept alive: one connection, so one handshake with a certificate, per loadgen connection.
    assert_eq!(v["connects"], 4, "{v}");
    for _ in 0..4 {
        assert_eq!(seen.recv_timeout(Duration::from_secs(5)), Ok(true));
    }
    assert!(seen.try_recv().is_err(), "more handshakes than connections");
}

#[test]
fn a_missing_ca_file_is_one_line_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("ca.pem");
    let out = loadgen(&[
        "--relay",
        "127.0.0.1:1",
        "--requests",
        "1",
        "--tls-ca",
        s(&missing),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains(s(&missing)), "{stderr}");
}

#[test]
fn tls_flags_without_their_partners_or_with_direct_or_idle_are_usage_errors() {
    for args in [
        &["--tls-cert", "c.pem", "--tls-key", "k.pem"][..],
        &["--tls-ca", "ca.pem", "--tls-cert", "c.pem"],
        &["--tls-ca", "ca.pem", "--tls-key", "k.pem"],
        &["--tls-server-name", "localhost"],
        &["--tls-ca", "ca.pem", "--direct"],
        &["--tls-ca", "ca.pem", "--idle", "5"],
    ] {
        let out = loadgen(args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
