//! A relay with TLS on its channel listener, for the tests of TLS channels (`tls_channel`)
//! and of the GUIDs that belong to their channel (`tls_ownership`): its flags, a TLS channel
//! to it, and the scene (CA, ledger, core, relay, admin port) they start from.

use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use testkit::Chan;
use testkit::pki::{Pair, Pki};
use testkit::tls_client::{ClientTls, connect};

use super::metrics::relay_with_admin;
use crate::util::*;

/// A UTF-8 path as a flag's value.
pub(crate) fn path(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}

pub(super) const TIMEOUT: Duration = Duration::from_secs(10);

/// `--tls-cert`, `--tls-key` of `server`, and `--client-ca CA` if given.
pub(super) fn tls_flags<'a>(server: &'a Pair, client_ca: Option<&'a Path>) -> Vec<&'a str> {
    let mut flags = vec![
        "--tls-cert",
        path(&server.cert),
        "--tls-key",
        path(&server.key),
    ];
    if let Some(ca) = client_ca {
        flags.extend(["--client-ca", path(ca)]);
    }
    flags
}

/// A TLS channel to `relay`, trusting `ca`, showing `identity` if given.
pub(super) fn tls_chan(relay: &Server, ca: &Path, identity: Option<&Pair>) -> io::Result<Chan> {
    let mut tls = ClientTls::new(ca, "127.0.0.1");
    if let Some(id) = identity {
        tls = tls.with_identity(&id.cert, &id.key);
    }
    let config = tls.config().expect("a client configuration");
    let addr: SocketAddr = relay.addr.parse().expect("an address");
    connect(&addr, &config, "127.0.0.1", TIMEOUT)
}

/// One relay with TLS, the core, the ledger, and the CA of the relay's certificate.
pub(super) struct TlsScene {
    pub(super) pki: Pki,
    pub(super) db: TempLedger,
    pub(super) core: Core,
    pub(super) relay: Server,
    pub(super) admin: String,
    /// The relay's flags, to start it again.
    args: Vec<String>,
}

impl TlsScene {
    pub(super) fn new(mutual: bool, extra: &[&str]) -> TlsScene {
        TlsScene::with_pki(Pki::new("relay CA"), mutual, extra)
    }

    /// The same with a CA made beforehand (for files `extra` names, a revocation list).
    pub(super) fn with_pki(pki: Pki, mutual: bool, extra: &[&str]) -> TlsScene {
        let server = pki.server(&["localhost", "127.0.0.1"]);
        let db = temp_ledger();
        let core = Core::start(&[]);
        let client_ca = mutual.then(|| pki.ca().to_path_buf());
        let mut args = tls_flags(&server, client_ca.as_deref());
        args.extend(extra);
        let (relay, admin) = relay_with_admin(&db, &core.url(), &args);
        let args = args.into_iter().map(str::to_string).collect();
        TlsScene {
            pki,
            db,
            core,
            relay,
            admin,
            args,
        }
    }

    /// Runs `f` while the TLS relay is stopped (one relay per SQLite ledger: a plain-TCP
    /// relay on the same ledger runs in between), then starts it again with its flags.
    pub(super) fn meanwhile<T>(&mut self, f: impl FnOnce(&TlsScene) -> T) -> T {
        self.relay.kill();
        let out = f(self);
        let args: Vec<&str> = self.args.iter().map(String::as_str).collect();
        (self.relay, self.admin) = relay_with_admin(&self.db, &self.core.url(), &args);
        out
    }

    pub(super) fn chan(&self, identity: Option<&Pair>) -> io::Result<Chan> {
        tls_chan(&self.relay, self.pki.ca(), identity)
    }
}
