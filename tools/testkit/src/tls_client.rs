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
        if roots.is_empty() {
            return Err(file_err(&self.ca, &"no PEM certificate in it"));
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
                if chain.is_empty() {
                    return Err(file_err(cert, &"no PEM certificate in it"));
                }
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
    connect_within(addr, config, server_name, timeout, timeout)
}

/// The same, giving up on the TCP connection after `connect`.
fn connect_within(
    addr: &SocketAddr,
    config: &Arc<ClientConfig>,
    server_name: &str,
    connect: Duration,
    timeout: Duration,
) -> io::Result<Chan> {
    let name = ServerName::try_from(server_name.to_string())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let conn = ClientConnection::new(Arc::clone(config), name).map_err(io::Error::other)?;
    let stream = TcpStream::connect_timeout(addr, connect)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    let mut tls = StreamOwned::new(conn, stream.try_clone()?);
    while tls.conn.is_handshaking() {
        tls.conn.complete_io(&mut tls.sock)?;
    }
    Chan::over(stream, Box::new(tls), timeout)
}

/// How a tool's channel connections reach the relay: plain TCP, or TLS with one
/// configuration built once and shared by every connection.
#[derive(Clone, Default)]
pub enum Dialer {
    #[default]
    Plain,
    Tls {
        config: Arc<ClientConfig>,
        server_name: String,
    },
}

impl Dialer {
    /// The dialer `tls` asks for (`None`: plain TCP); errors name the file.
    pub fn new(tls: Option<&ClientTls>) -> Result<Dialer, String> {
        Ok(match tls {
            None => Dialer::Plain,
            Some(t) => Dialer::Tls {
                config: t.config()?,
                server_name: t.server_name.clone(),
            },
        })
    }

    /// A channel connection to `addr`, the TCP connection made within `connect` and (with
    /// TLS) the handshake finished within `timeout`; every later read and write waits at
    /// most `timeout`.
    pub fn connect(
        &self,
        addr: &SocketAddr,
        connect: Duration,
        timeout: Duration,
    ) -> io::Result<Chan> {
        match self {
            Dialer::Plain => Chan::connect_timeout(addr, connect, timeout),
            Dialer::Tls {
                config,
                server_name,
            } => connect_within(addr, config, server_name, connect, timeout),
        }
    }
}

impl ClientTls {
    /// What a tool's `--tls-ca`, `--tls-cert`/`--tls-key` and `--tls-server-name` ask for,
    /// for a relay at `relay` (`host:port`): `None` without a CA (plain TCP); the server
    /// name defaults to the host part of `relay`.
    pub fn from_flags(
        ca: Option<&Path>,
        identity: Option<(&Path, &Path)>,
        server_name: Option<&str>,
        relay: &str,
    ) -> Option<ClientTls> {
        let tls = ClientTls::new(ca?, server_name.unwrap_or_else(|| host_of(relay)));
        Some(match identity {
            Some((cert, key)) => tls.with_identity(cert, key),
            None => tls,
        })
    }
}

/// The host part of `host:port` (`[::1]:9200` is `::1`); the whole of it without a port.
pub fn host_of(addr: &str) -> &str {
    let host = match addr.rsplit_once(':') {
        Some((h, port)) if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => h,
        _ => addr,
    };
    host.strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host)
}

/// Declares, in the calling module, `TlsFlags`: the clap flags of a channel's TLS client,
/// their environment twins named with `env` (`"CHAN_"`: `CHAN_TLS_CA`, …):
///
/// - `--tls-ca PATH`: speak TLS to the relay, trusting that CA;
/// - `--tls-cert PATH` and `--tls-key PATH` (each requires the other, and `--tls-ca`): the
///   channel's client certificate, for mutual TLS;
/// - `--tls-server-name NAME` (requires `--tls-ca`): the name the relay's certificate must
///   carry, by default the host part of the relay address.
///
/// `TlsFlags::client(&self, relay)` gives the [`ClientTls`] they ask for (`None`: plain TCP).
///
/// ```ignore
/// testkit::tls_client_flags! { env = "CHAN_"; }
/// ```
#[macro_export]
macro_rules! tls_client_flags {
    (env = $prefix:literal;) => {
        /// How the channel connections speak TLS to the relay (CONTRACT §8).
        #[derive(clap::Args, Debug, Clone)]
        pub struct TlsFlags {
            /// Speak TLS to the relay, trusting the CA certificates in this PEM file
            /// (without it: plain TCP).
            #[arg(long, env = concat!($prefix, "TLS_CA"))]
            pub tls_ca: Option<std::path::PathBuf>,
            /// Show this client certificate (PEM, chain leaf first) for mutual TLS: its
            /// subject CN is the channel's identity. With --tls-key and --tls-ca.
            #[arg(long, env = concat!($prefix, "TLS_CERT"), requires_all = ["tls_key", "tls_ca"])]
            pub tls_cert: Option<std::path::PathBuf>,
            /// The private key (PEM) of --tls-cert.
            #[arg(long, env = concat!($prefix, "TLS_KEY"), requires = "tls_cert")]
            pub tls_key: Option<std::path::PathBuf>,
            /// The name the relay's certificate must carry (a host name or an IP address);
            /// default: the host part of the relay address. With --tls-ca.
            #[arg(long, env = concat!($prefix, "TLS_SERVER_NAME"), requires = "tls_ca")]
            pub tls_server_name: Option<String>,
        }

        impl TlsFlags {
            /// The TLS client these flags ask for, for a relay at `relay` (`host:port`);
            /// `None`: plain TCP.
            pub fn client(&self, relay: &str) -> Option<$crate::tls_client::ClientTls> {
                let identity = self.tls_cert.as_deref().zip(self.tls_key.as_deref());
                $crate::tls_client::ClientTls::from_flags(
                    self.tls_ca.as_deref(),
                    identity,
                    self.tls_server_name.as_deref(),
                    relay,
                )
            }
        }
    };
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
    fn the_default_server_name_is_the_host_of_the_relay_address() {
        assert_eq!(host_of("127.0.0.1:9200"), "127.0.0.1");
        assert_eq!(host_of("localhost:9200"), "localhost");
        assert_eq!(host_of("[::1]:9200"), "::1");
        assert_eq!(host_of("relay.bank.example"), "relay.bank.example");
        let ca = Path::new("ca.pem");
        assert!(ClientTls::from_flags(None, None, None, "localhost:1").is_none());
        let t = ClientTls::from_flags(Some(ca), None, None, "localhost:1").unwrap();
        assert_eq!((t.server_name.as_str(), t.identity), ("localhost", None));
        let t = ClientTls::from_flags(Some(ca), None, Some("relay"), "127.0.0.1:1").unwrap();
        assert_eq!(t.server_name, "relay");
    }

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
