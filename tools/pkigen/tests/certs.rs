//! `pkigen DIR` writes certificates a TLS server and its channels accept: the relay's for
//! localhost and 127.0.0.1, each channel's signed by the same CA (checked by a handshake
//! with the testkit's TLS client and server configurations).

use std::process::Command;
use std::time::Duration;

use testkit::tls::{Versions, answering_relay, server_config};
use testkit::tls_client::{ClientTls, Dialer};

#[test]
fn writes_a_ca_a_relay_and_channels_that_shake_hands() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("certs");
    let out = Command::new(env!("CARGO_BIN_EXE_pkigen"))
        .arg(&out_dir)
        .args(["--client", "branch-1", "--client", "atm-2"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let f = |n: &str| out_dir.join(n);
    let config = server_config(
        &f("relay.pem"),
        &f("relay.key"),
        Some(&f("ca.pem")),
        Versions::Both,
    )
    .unwrap();
    let (addr, seen) = answering_relay(config);
    for (cn, name) in [("branch-1", "localhost"), ("atm-2", "127.0.0.1")] {
        let tls = ClientTls::new(&f("ca.pem"), name)
            .with_identity(&f(&format!("{cn}.pem")), &f(&format!("{cn}.key")));
        let dialer = Dialer::new(Some(&tls)).unwrap();
        let t = Duration::from_secs(5);
        let mut chan = dialer.connect(&addr, t, t).unwrap();
        chan.send(b"not a request").unwrap();
        assert!(chan.recv().is_ok());
        assert_eq!(seen.recv_timeout(t), Ok(true));
    }
    assert!(
        !f("channel-a.pem").exists(),
        "the defaults give way to --client"
    );

    let bad = Command::new(env!("CARGO_BIN_EXE_pkigen"))
        .arg(&out_dir)
        .args(["--client", "../x"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
}
