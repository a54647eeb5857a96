//! `chan` over TLS against an in-process TLS relay stand-in: mutual TLS with a certificate
//! from a throwaway CA, a relay it must not trust, a missing file, and flags that need
//! their partners.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use testkit::pki::Pki;

fn chan(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_chan"))
        .args([
            "--guid",
            "TLS-G1",
            "--amount",
            "1500",
            "--timeout-ms",
            "5000",
        ])
        .args(args)
        .env_clear()
        .output()
        .expect("run chan")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn a_named_channel_gets_its_reply_over_mutual_tls() {
    let pki = Pki::new("chan test CA");
    let client = pki.client("channel-a");
    let (addr, seen) = pki.answering_relay(true);
    // The default server name is the relay address's host: 127.0.0.1, in the certificate.
    let out = chan(&[
        "--relay",
        &addr.to_string(),
        "--tls-ca",
        s(pki.ca()),
        "--tls-cert",
        s(&client.cert),
        "--tls-key",
        s(&client.key),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).starts_with("TLS-G1 0000 core_ref=TLS-1 amount=1500 "),
        "{}",
        text(&out.stdout)
    );
    assert_eq!(seen.recv_timeout(Duration::from_secs(5)), Ok(true));

    // Anonymous TLS, the name given, through the environment twins.
    let (addr, seen) = pki.answering_relay(false);
    let out = Command::new(env!("CARGO_BIN_EXE_chan"))
        .args(["--guid", "TLS-G2", "--amount", "7"])
        .env_clear()
        .env("CHAN_RELAY", format!("127.0.0.1:{}", addr.port()))
        .env("CHAN_TLS_CA", pki.ca())
        .env("CHAN_TLS_SERVER_NAME", "localhost")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).starts_with("TLS-G2 0000 "));
    assert_eq!(seen.recv_timeout(Duration::from_secs(5)), Ok(false));
}

#[test]
fn a_relay_from_another_ca_or_a_missing_file_is_one_line_exit_1() {
    let pki = Pki::new("relay CA");
    let other = Pki::new("another CA");
    let (addr, _seen) = pki.answering_relay(false);
    let relay = addr.to_string();
    let out = chan(&[
        "--relay",
        &relay,
        "--tls-ca",
        s(other.ca()),
        "--tls-server-name",
        "localhost",
    ]);
    let err = one_line_exit_1(&out);
    assert!(
        err.contains("cannot connect to the relay") && err.contains("certificate"),
        "{err}"
    );

    let missing = pki.dir().join("nope.pem");
    let out = chan(&["--relay", &relay, "--tls-ca", s(&missing)]);
    assert!(one_line_exit_1(&out).contains(s(&missing)));

    let not_pem = pki.dir().join("not.pem");
    std::fs::write(&not_pem, "hello\n").unwrap();
    let out = chan(&["--relay", &relay, "--tls-ca", s(&not_pem)]);
    assert!(one_line_exit_1(&out).contains(s(&not_pem)));

    let client = pki.client("channel-a");
    let out = chan(&[
        "--relay",
        &relay,
        "--tls-ca",
        s(pki.ca()),
        "--tls-cert",
        s(&client.cert),
        "--tls-key",
        s(&missing),
    ]);
    assert!(one_line_exit_1(&out).contains(s(&missing)));
}

/// The one line on stderr of a run that exited 1.
fn one_line_exit_1(out: &Output) -> String {
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    err
}

#[test]
fn tls_flags_without_their_partners_are_usage_errors() {
    for args in [
        &["--tls-cert", "c.pem", "--tls-key", "k.pem"][..],
        &["--tls-ca", "ca.pem", "--tls-cert", "c.pem"],
        &["--tls-ca", "ca.pem", "--tls-key", "k.pem"],
        &["--tls-server-name", "localhost"],
    ] {
        let out = chan(args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
}
