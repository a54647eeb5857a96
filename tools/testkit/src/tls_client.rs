//! A channel's side of TLS (feature `tls`): connect to a relay's `--tls-cert` listener,
//! trusting a CA file, optionally showing a client certificate (mutual TLS, CONTRACT §8).
//! Used by `chan`, `loadgen`, `chaos` and the end-to-end tests.

use std::io;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};

use crate::channel::Chan;

/// How a channel speaks TLS to the relay.
#[derive(Debug, Clone)]
pub struct ClientTls {
    /// The CA the relay's certificate chains to (PEM).
    pub ca: PathBuf,
    /// The channel's own certificate (chain, leaf first) and key, for mutual TLS.
    pub identity: Option<(PathBuf, PathBuf)>,
    /// The name checked against the relay's certificate (a host name or an IP address).
    pub server_name: String,
}

impl ClientTls {
    /// Trusting `ca`, checking the name `server_name`, anonymous.
    pub fn new(ca: &Path, server_name: &str) -> ClientTls {
        ClientTls {
            ca: ca.to_path_buf(),
            identity: None,
            server_name: server_name.to_string(),
        }
    }

    /// The same, showing `cert` and `key` as the channel's identity.
    pub fn with_identity(mut self, cert: &Path, key: &Path) -> ClientTls {
        self.identity = Some((cert.to_path_buf(), key.to_path_buf()));
        self
    }

    /// The rustls configuration; errors name the file.
    pub fn config(&self) -> Result<Arc<ClientConfig>, String> {
        let file_err = |f: &Path, e: &dyn std::fmt::Display| format!("{}: {e}", f.display());
        let mut roots = RootCertStore::empty();
        for c in CertificateDer::pem_file_iter(&self.ca).map_err(|e| file_err(&self.ca, &e))? {
            let c = c.map_err(|e| file_err(&self.ca, &e))?;
            roots.add(c).map_err(|e| file_err(&self.ca, &e))?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS versions: {e}"))?
            .with_root_certificates(roots);
        let config = match &self.identity {
            None => builder.with_no_client_auth(),
            Some((cert, key)) => {
                let chain = CertificateDer::pem_file_iter(cert)
                    .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
                    .map_err(|e| file_err(cert, &e))?;
                let key_der = PrivateKeyDer::from_pem_file(key).map_err(|e| file_err(key, &e))?;
                builder
                    .with_client_auth_cert(chain, key_der)
                    .map_err(|e| format!("{} with {}: {e}", cert.display(), key.display()))?
            }
        };
        Ok(Arc::new(config))
    }
}

/// A TLS session to `addr` with `config`, its handshake finished (or failed) within
/// `timeout`; every later read and write waits at most `timeout`.
pub fn connect(
    addr: &SocketAddr,
    config: &Arc<ClientConfig>,
    server_name: &str,
    timeout: Duration,
) -> io::Result<Chan> {
    let name = ServerName::try_from(server_name.to_string())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let conn = ClientConnection::new(Arc::clone(config), name).map_err(io::Error::other)?;
    let stream = TcpStream::connect_timeout(addr, timeout)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    let mut tls = StreamOwned::new(conn, stream.try_clone()?);
    while tls.conn.is_handshaking() {
        tls.conn.complete_io(&mut tls.sock)?;
    }
    Chan::over(stream, Box::new(tls), timeout)
}

#[cfg(all(test, feature = "pki"))]
mod tests {
    use std::io::{Read, Write};
    use std::net::TcpListener;
    use std::thread;

    use super::*;
    use crate::pki::Pki;
    use crate::tls::{Versions, server_config};

    #[test]
    fn frames_travel_inside_mutual_tls() {
        let pki = Pki::new("test CA");
        let server = pki.server(&["localhost"]);
        let client = pki.client("branch-7");
        let config = server_config(&server.cert, &server.key, Some(pki.ca()), Versions::Both)
            .expect("server config");
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let echo = thread::spawn(move || {
            let (s, _) = listener.accept().unwrap();
            let conn = rustls::ServerConnection::new(config).unwrap();
            let mut tls = StreamOwned::new(conn, s);
            let msg = wire::read_frame(&mut tls).unwrap();
            tls.write_all(&wire::frame(&msg)).unwrap();
            tls.flush().unwrap();
            let mut rest = Vec::new();
            let _ = tls.read_to_end(&mut rest);
        });
        let tls = ClientTls::new(pki.ca(), "localhost").with_identity(&client.cert, &client.key);
        let config = tls.config().expect("client config");
        let mut chan = connect(&addr, &config, "localhost", Duration::from_secs(5)).unwrap();
        assert_eq!(chan.call(b"Q-HELLO").unwrap(), b"Q-HELLO");
        drop(chan);
        echo.join().unwrap();
    }
}
