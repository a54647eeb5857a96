//! TLS to the core (an `https://` core URL): the certificates trusted for it, and the client
//! certificate shown to it for mutual TLS.
//!
//! Everything is read and checked when a tool starts — the files, each certificate as a
//! trust anchor, the client key against its certificate, as rustls will take them at the
//! first handshake — so that a bad file is one line and exit 1 at start, never an error at
//! the first transfer (ureq builds its rustls configuration lazily, and would panic on a key
//! that does not fit its certificate).
//!
//! The handshake runs inside the relay's connector: ureq's rustls connector completes it
//! before it returns the connection, so a handshake that fails is marked "not sent", like a
//! refused connection (`pre_send`). What that covers exactly, and the one case it cannot
//! (TLS 1.3 tells a client that the server refused its certificate only after the client
//! has finished its side of the handshake and sent the request), is in the README's *TLS to
//! the core*.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use log::{info, warn};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use ureq::tls::{Certificate, ClientCert, PrivateKey, RootCerts, TlsConfig};

/// The TLS settings as given (`--core-ca`, `--core-cert`, `--core-key`): file paths, read by
/// [`load`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsFiles {
    /// PEM certificates to trust for the core, instead of the system's roots.
    pub ca: Option<PathBuf>,
    /// PEM certificate chain (the client's certificate first) for mutual TLS.
    pub cert: Option<PathBuf>,
    /// The PEM private key of `cert`.
    pub key: Option<PathBuf>,
}

impl TlsFiles {
    /// No TLS setting given.
    pub fn is_empty(&self) -> bool {
        self.ca.is_none() && self.cert.is_none() && self.key.is_none()
    }
}

/// The one TLS stack of the workspace: rustls with ring (as for PostgreSQL).
fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// ureq's TLS settings for an `https://` core at `host`, from `files`: read and checked now.
pub fn load(files: &TlsFiles, host: &str) -> Result<TlsConfig, String> {
    ServerName::try_from(host.trim_start_matches('[').trim_end_matches(']'))
        .map_err(|e| format!("host {host:?} cannot be checked against a certificate: {e}"))?;
    let provider = provider();
    let (roots, store) = match &files.ca {
        Some(file) => ca_file(file)?,
        None => system_roots()?,
    };
    let client = match (&files.cert, &files.key) {
        (None, None) => None,
        (Some(cert), Some(key)) => Some(client_cert(cert, key, &provider, store)?),
        _ => return Err("--core-cert and --core-key go together: give both or neither".into()),
    };
    info!(
        "TLS to the core at {host}: trusting {} certificate(s) from {}{}",
        roots.len(),
        files
            .ca
            .as_ref()
            .map_or("the system's trust store".to_string(), |f| format!(
                "--core-ca {}",
                f.display()
            )),
        files.cert.as_ref().map_or(String::new(), |f| format!(
            "; client certificate --core-cert {}",
            f.display()
        )),
    );
    let roots: Vec<Certificate<'static>> = roots
        .iter()
        .map(|c| Certificate::from_der(c.as_ref()).to_owned())
        .collect();
    Ok(TlsConfig::builder()
        .root_certs(RootCerts::new_with_certs(&roots))
        .client_cert(client)
        .unversioned_rustls_crypto_provider(provider)
        .build())
}

fn read(what: &str, file: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(file).map_err(|e| format!("{what} {}: {e}", file.display()))
}

/// The PEM certificates in `bytes`; at least one.
fn certificates(
    what: &str,
    file: &Path,
    bytes: &[u8],
) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_slice_iter(bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{what} {}: {e}", file.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "{what} {}: no PEM certificate (-----BEGIN CERTIFICATE-----) in the file",
            file.display()
        ));
    }
    Ok(certs)
}

/// `--core-ca`: every certificate in the file must be usable as a trust anchor.
fn ca_file(file: &Path) -> Result<(Vec<CertificateDer<'static>>, RootCertStore), String> {
    let certs = certificates("--core-ca", file, &read("--core-ca", file)?)?;
    let mut store = RootCertStore::empty();
    for (i, cert) in certs.iter().enumerate() {
        store.add(cert.clone()).map_err(|e| {
            format!(
                "--core-ca {}: certificate {} of {}: {e}",
                file.display(),
                i + 1,
                certs.len()
            )
        })?;
    }
    Ok((certs, store))
}

/// The system's trust store (on Linux the distribution's CA bundle, or `SSL_CERT_FILE` /
/// `SSL_CERT_DIR`), read once at start. Certificates in it that cannot be trust anchors are
/// passed over, as every TLS client does; none at all is an error.
fn system_roots() -> Result<(Vec<CertificateDer<'static>>, RootCertStore), String> {
    let found = rustls_native_certs::load_native_certs();
    for e in &found.errors {
        warn!("system root certificates: {e}");
    }
    let mut store = RootCertStore::empty();
    let usable: Vec<_> = found
        .certs
        .into_iter()
        .filter(|c| store.add(c.clone()).is_ok())
        .collect();
    if usable.is_empty() {
        return Err(
            "no usable root certificate in the system's trust store (nor in SSL_CERT_FILE / \
             SSL_CERT_DIR): give the core's CA with --core-ca FILE"
                .into(),
        );
    }
    Ok((usable, store))
}

/// `--core-cert` and `--core-key`: a chain and its key, checked by building the client
/// configuration rustls will use (the key must load and fit the certificate).
fn client_cert(
    cert: &Path,
    key: &Path,
    provider: &Arc<CryptoProvider>,
    roots: RootCertStore,
) -> Result<ClientCert, String> {
    let chain = certificates("--core-cert", cert, &read("--core-cert", cert)?)?;
    let key_pem = read("--core-key", key)?;
    let key_der = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| {
        format!(
            "--core-key {}: no usable PEM private key (PKCS#8, PKCS#1 or SEC1): {e}",
            key.display()
        )
    })?;
    ClientConfig::builder_with_provider(Arc::clone(provider))
        .with_protocol_versions(rustls::ALL_VERSIONS)
        .map_err(|e| format!("TLS: {e}"))?
        .with_root_certificates(roots)
        .with_client_auth_cert(chain.clone(), key_der)
        .map_err(|e| {
            format!(
                "--core-cert {} with --core-key {}: {e}",
                cert.display(),
                key.display()
            )
        })?;
    // ureq parses the key file itself, taking its first private key: the one checked above.
    let key_ureq =
        PrivateKey::from_pem(&key_pem).map_err(|e| format!("--core-key {}: {e}", key.display()))?;
    let chain: Vec<Certificate<'static>> = chain
        .iter()
        .map(|c| Certificate::from_der(c.as_ref()).to_owned())
        .collect();
    Ok(ClientCert::new_with_certs(&chain, key_ureq))
}
