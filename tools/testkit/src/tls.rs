//! The server side of TLS for the test tools (feature `tls`): a rustls server configuration
//! from PEM files, as the core simulator serves `https://` and as the unit tests' in-process
//! TLS servers do.

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};

/// Which TLS versions a test server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Versions {
    /// TLS 1.3 and 1.2, 1.3 preferred (what a client gets unless it pins one).
    #[default]
    Both,
    /// TLS 1.2 only: a refused client certificate is then told within the handshake.
    Tls12,
}

const TLS12_ONLY: &[&rustls::SupportedProtocolVersion] = &[&rustls::version::TLS12];

/// A server configuration: `cert` (chain, leaf first) and `key`; with `client_ca`, a client
/// certificate signed by one of its certificates is required.
pub fn server_config(
    cert: &Path,
    key: &Path,
    client_ca: Option<&Path>,
    versions: Versions,
) -> Result<Arc<ServerConfig>, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("{}: {e}", cert.display()))?;
    let key_der =
        PrivateKeyDer::from_pem_file(key).map_err(|e| format!("{}: {e}", key.display()))?;
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(match versions {
            Versions::Both => rustls::ALL_VERSIONS,
            Versions::Tls12 => TLS12_ONLY,
        })
        .map_err(|e| format!("TLS versions: {e}"))?;
    let builder = match client_ca {
        None => builder.with_no_client_auth(),
        Some(file) => {
            let mut roots = RootCertStore::empty();
            for c in CertificateDer::pem_file_iter(file)
                .map_err(|e| format!("{}: {e}", file.display()))?
            {
                let c = c.map_err(|e| format!("{}: {e}", file.display()))?;
                roots
                    .add(c)
                    .map_err(|e| format!("{}: {e}", file.display()))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| format!("{}: {e}", file.display()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    builder
        .with_single_cert(chain, key_der)
        .map(Arc::new)
        .map_err(|e| format!("{} with {}: {e}", cert.display(), key.display()))
}

/// A stand-in for a relay's TLS listener, for the tools' TLS tests: every connection on its
/// own thread, each request frame answered `0000` with a booking of the request's amount.
/// For each connection whose handshake finished, the receiver gets whether the client showed
/// a certificate; a failed handshake is closed, nothing sent on it.
pub fn answering_relay(
    config: Arc<ServerConfig>,
) -> (std::net::SocketAddr, std::sync::mpsc::Receiver<bool>) {
    use std::io::Write;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("local addr");
    let (seen, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for s in listener.incoming().flatten() {
            let (config, seen) = (Arc::clone(&config), seen.clone());
            std::thread::spawn(move || {
                let conn = rustls::ServerConnection::new(config).expect("server connection");
                let mut tls = rustls::StreamOwned::new(conn, s);
                while tls.conn.is_handshaking() {
                    if tls.conn.complete_io(&mut tls.sock).is_err() {
                        return;
                    }
                }
                let _ = seen.send(tls.conn.peer_certificates().is_some());
                while let Ok(msg) = wire::read_frame(&mut tls) {
                    let amount = wire::parse_request(&msg).map_or(0, |t| t.amount);
                    let body = wire::booking_body("TLS-1", amount, "2026-01-01T00:00:00Z")
                        .expect("a booking");
                    let reply = wire::reply_to(&msg, &wire::OK, Some(&body));
                    if tls.write_all(&wire::frame(&reply)).is_err() || tls.flush().is_err() {
                        return;
                    }
                }
            });
        }
    });
    (addr, rx)
}
