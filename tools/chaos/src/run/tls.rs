//! `--tls`: the channels speak mutual TLS to the relays. The run makes a CA of its own, the
//! relays' certificate (localhost, 127.0.0.1) and two channel identities, in its work
//! directory; even channels are `channel-a`, odd ones `channel-b`, so that every GUID is
//! claimed by the identity that sends it again (its resends and in-flight twins included).

use std::path::Path;

use testkit::tls_client::{ClientTls, Dialer};

/// The channel identities (client certificates' CNs), channel `i` is `IDENTITIES[i % 2]`.
pub const IDENTITIES: [&str; 2] = ["channel-a", "channel-b"];

/// Writes the certificates into `dir`; the relays' TLS flags and one dialer per identity.
pub fn setup(dir: &Path) -> anyhow::Result<(Vec<String>, Vec<Dialer>)> {
    testkit::pki::write_certs(dir, &["localhost", "127.0.0.1"], &IDENTITIES)
        .map_err(anyhow::Error::msg)?;
    let file = |name: &str| dir.join(name).to_string_lossy().into_owned();
    let relay_args = vec![
        "--tls-cert".into(),
        file("relay.pem"),
        "--tls-key".into(),
        file("relay.key"),
        "--client-ca".into(),
        file("ca.pem"),
    ];
    let mut dialers = Vec::new();
    for cn in IDENTITIES {
        let tls = ClientTls::new(&dir.join("ca.pem"), "localhost").with_identity(
            &dir.join(format!("{cn}.pem")),
            &dir.join(format!("{cn}.key")),
        );
        dialers.push(Dialer::new(Some(&tls)).map_err(anyhow::Error::msg)?);
    }
    Ok((relay_args, dialers))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use testkit::tls::{Versions, answering_relay, server_config};

    use super::*;

    #[test]
    fn both_identities_shake_hands_with_a_relay_started_with_the_flags() {
        let dir = tempfile::tempdir().unwrap();
        let (args, dialers) = setup(dir.path()).unwrap();
        let flag = |name: &str| {
            let i = args.iter().position(|a| a == name).expect(name);
            std::path::PathBuf::from(&args[i + 1])
        };
        let config = server_config(
            &flag("--tls-cert"),
            &flag("--tls-key"),
            Some(&flag("--client-ca")),
            Versions::Both,
        )
        .unwrap();
        let (addr, seen) = answering_relay(config);
        let t = Duration::from_secs(5);
        assert_eq!(dialers.len(), IDENTITIES.len());
        for d in &dialers {
            let mut chan = d.connect(&addr, t, t).unwrap();
            chan.send(b"Q").unwrap();
            chan.recv().unwrap();
            assert_eq!(
                seen.recv_timeout(t),
                Ok(true),
                "a client certificate was shown"
            );
        }
    }
}
