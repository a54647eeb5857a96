//! TLS on the channel listener (CONTRACT §8): the files (`--tls-cert`, `--tls-key`,
//! `--client-ca`, `--client-crl`), read and checked into a rustls server configuration at
//! start and again on each reload, and the server certificate's expiry.
//!
//! Everything rustls would find wrong at the first handshake is found here instead — each
//! file readable and PEM, the key fitting the certificate, every CA usable as a trust
//! anchor — so that a bad file is one line naming it before `listening on`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, CertificateRevocationListDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::ClientCertVerifier;
use rustls::sign::{CertifiedKey, SingleCertAndKey};
use rustls::{RootCertStore, ServerConfig};

use super::identity::ChannelVerifier;

/// The channel listener's TLS files, as given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerTls {
    /// `--tls-cert`: the relay's certificate chain, leaf first (PEM).
    pub cert: PathBuf,
    /// `--tls-key`: its private key (PEM: PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// `--client-ca`: the CAs a channel's client certificate must chain to (mutual TLS).
    pub client_ca: Option<PathBuf>,
    /// `--client-crl`: revocation lists for the client certificates (PEM).
    pub client_crl: Option<PathBuf>,
}

/// A file that cannot be used: one line for the operator.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TlsError {
    /// `flag`'s file `path` is missing, unreadable, not PEM or not usable.
    #[error("{flag} {}: {why}", .path.display())]
    File {
        flag: &'static str,
        path: PathBuf,
        why: String,
    },
    /// The key does not belong to the certificate.
    #[error(
        "--tls-key {} does not match the certificate --tls-cert {} (its public key is \
         another's)",
        .key.display(),
        .cert.display()
    )]
    Mismatch { cert: PathBuf, key: PathBuf },
    /// A configuration rustls refuses for another reason.
    #[error("TLS: {0}")]
    Config(String),
}

/// A configuration as loaded: what new handshakes use, and when the leaf expires.
pub(crate) struct Loaded {
    pub config: Arc<ServerConfig>,
    /// The server certificate's notAfter, Unix seconds.
    pub not_after: i64,
    /// With `--client-ca`: the verifier `config` checks client certificates with, for
    /// checking again, after a reload, those of the connections already open.
    pub verifier: Option<Arc<dyn ClientCertVerifier>>,
    /// With `--client-crl`: when its lists are due to be replaced.
    pub crl: Option<CrlDue>,
}

/// When the revocation lists of `--client-crl` are due to be replaced: the earliest
/// nextUpdate among them, Unix seconds (`None`: none has one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CrlDue {
    pub next_update: Option<i64>,
}

/// The one TLS stack of the workspace: rustls with ring.
fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Reads and checks every file of `files` into a server configuration (TLS 1.2 and 1.3).
pub(crate) fn load(files: &ListenerTls) -> Result<Loaded, TlsError> {
    let provider = provider();
    let chain = certificates("--tls-cert", &files.cert)?;
    let not_after = not_after(&chain[0]).map_err(|why| file_err("--tls-cert", &files.cert, why))?;
    let key = PrivateKeyDer::from_pem_file(&files.key).map_err(|e| {
        file_err(
            "--tls-key",
            &files.key,
            format!("no usable PEM private key (PKCS#8, PKCS#1 or SEC1): {e}"),
        )
    })?;
    let signing = provider
        .key_provider
        .load_private_key(key)
        .map_err(|e| file_err("--tls-key", &files.key, e.to_string()))?;
    let certified = CertifiedKey::new(chain, signing);
    if certified.keys_match().is_err() {
        return Err(TlsError::Mismatch {
            cert: files.cert.clone(),
            key: files.key.clone(),
        });
    }
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(rustls::ALL_VERSIONS)
        .map_err(|e| TlsError::Config(e.to_string()))?;
    let (builder, verifier, crl) = match &files.client_ca {
        None => (builder.with_no_client_auth(), None, None),
        Some(ca) => {
            let (webpki, crl) = client_verifier(ca, files.client_crl.as_deref(), provider)?;
            let verifier: Arc<dyn ClientCertVerifier> = Arc::new(ChannelVerifier::new(webpki));
            let builder = builder.with_client_cert_verifier(Arc::clone(&verifier));
            (builder, Some(verifier), crl)
        }
    };
    let config = builder.with_cert_resolver(Arc::new(SingleCertAndKey::from(certified)));
    Ok(Loaded {
        config: Arc::new(config),
        not_after,
        verifier,
        crl,
    })
}

/// `--client-ca` (and `--client-crl`): rustls' WebPKI verifier over those CAs, and when the
/// lists are due to be replaced. A list past its nextUpdate is still used (rustls ignores
/// the date unless told otherwise, and we keep it so): the relay warns instead.
fn client_verifier(
    ca: &Path,
    crl: Option<&Path>,
    provider: Arc<CryptoProvider>,
) -> Result<(Arc<dyn ClientCertVerifier>, Option<CrlDue>), TlsError> {
    let certs = certificates("--client-ca", ca)?;
    let mut roots = RootCertStore::empty();
    for (i, cert) in certs.iter().enumerate() {
        roots.add(cert.clone()).map_err(|e| {
            file_err(
                "--client-ca",
                ca,
                format!("certificate {} of {}: {e}", i + 1, certs.len()),
            )
        })?;
    }
    let mut builder = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
    let mut due = None;
    if let Some(crl) = crl {
        let lists = CertificateRevocationListDer::pem_file_iter(crl)
            .and_then(|l| l.collect::<Result<Vec<_>, _>>())
            .map_err(|e| file_err("--client-crl", crl, e.to_string()))?;
        if lists.is_empty() {
            return Err(file_err(
                "--client-crl",
                crl,
                "no PEM revocation list (-----BEGIN X509 CRL-----) in the file".into(),
            ));
        }
        due = Some((crl, crl_due(&lists)));
        builder = builder.with_crls(lists);
    }
    let verifier = builder.build().map_err(|e| {
        let (flag, path) = match crl {
            Some(crl) => ("--client-crl", crl),
            None => ("--client-ca", ca),
        };
        file_err(flag, path, e.to_string())
    })?;
    // After rustls' own reading of the lists, so that a bad one is told as before.
    let due = due
        .map(|(crl, due)| due.map_err(|why| file_err("--client-crl", crl, why)))
        .transpose()?;
    Ok((verifier, due))
}

/// The earliest nextUpdate of `lists`.
fn crl_due(lists: &[CertificateRevocationListDer<'_>]) -> Result<CrlDue, String> {
    let mut next_update: Option<i64> = None;
    for (i, list) in lists.iter().enumerate() {
        let (_, parsed) = x509_parser::parse_x509_crl(list.as_ref()).map_err(|e| {
            format!(
                "revocation list {} of {}: not an X.509 CRL: {e}",
                i + 1,
                lists.len()
            )
        })?;
        if let Some(t) = parsed.next_update() {
            let t = t.timestamp();
            next_update = Some(next_update.map_or(t, |n| n.min(t)));
        }
    }
    Ok(CrlDue { next_update })
}

fn file_err(flag: &'static str, path: &Path, why: String) -> TlsError {
    TlsError::File {
        flag,
        path: path.to_path_buf(),
        why,
    }
}

/// The PEM certificates in `path`; at least one.
fn certificates(flag: &'static str, path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|c| c.collect::<Result<Vec<_>, _>>())
        .map_err(|e| file_err(flag, path, e.to_string()))?;
    if certs.is_empty() {
        return Err(file_err(
            flag,
            path,
            "no PEM certificate (-----BEGIN CERTIFICATE-----) in the file".into(),
        ));
    }
    Ok(certs)
}

/// A certificate's notAfter, Unix seconds.
fn not_after(cert: &CertificateDer<'_>) -> Result<i64, String> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref())
        .map_err(|e| format!("not an X.509 certificate: {e}"))?;
    Ok(parsed.validity().not_after.timestamp())
}

#[cfg(test)]
mod tests {
    use super::*;
    use testkit::pki::Pki;

    fn files(cert: &Path, key: &Path) -> ListenerTls {
        ListenerTls {
            cert: cert.to_path_buf(),
            key: key.to_path_buf(),
            client_ca: None,
            client_crl: None,
        }
    }

    #[test]
    fn a_good_pair_loads_and_its_expiry_is_read() {
        let pki = Pki::new("test CA");
        let s = pki.server(&["localhost"]);
        let loaded = load(&files(&s.cert, &s.key)).expect("loads");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        assert!(loaded.not_after > now, "{} vs {now}", loaded.not_after);
    }

    /// What a reload checks the open connections with, and when the list is due.
    #[test]
    fn with_a_client_ca_and_a_list_the_verifier_and_the_next_update_are_kept() {
        let pki = Pki::new("test CA");
        let s = pki.server(&["localhost"]);
        let mut with_ca = files(&s.cert, &s.key);
        with_ca.client_ca = Some(pki.ca().to_path_buf());
        let loaded = load(&with_ca).expect("loads");
        assert!(loaded.verifier.is_some());
        assert_eq!(loaded.crl, None);
        with_ca.client_crl = Some(pki.crl(&[]));
        let loaded = load(&with_ca).expect("loads");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        // testkit's lists are due a day after they are made.
        let next = loaded
            .crl
            .and_then(|c| c.next_update)
            .expect("a nextUpdate");
        assert!(
            (now + 86000..=now + 86400).contains(&next),
            "{next} vs {now}"
        );
        assert!(load(&files(&s.cert, &s.key)).unwrap().verifier.is_none());
    }

    #[test]
    fn a_key_of_another_certificate_is_a_mismatch_naming_both_files() {
        let pki = Pki::new("test CA");
        let (a, b) = (pki.server(&["localhost"]), pki.server(&["localhost"]));
        let err = load(&files(&a.cert, &b.key)).err().expect("a mismatch");
        assert_eq!(
            err,
            TlsError::Mismatch {
                cert: a.cert.clone(),
                key: b.key.clone()
            }
        );
        let line = err.to_string();
        assert!(line.contains(&a.cert.display().to_string()), "{line}");
        assert!(line.contains(&b.key.display().to_string()), "{line}");
    }

    #[test]
    fn missing_and_non_pem_files_name_the_file() {
        let pki = Pki::new("test CA");
        let s = pki.server(&["localhost"]);
        let missing = pki.dir().join("missing.pem");
        let junk = pki.dir().join("junk.pem");
        std::fs::write(&junk, "not a certificate\n").unwrap();
        for (f, flag) in [(&missing, "--tls-cert"), (&junk, "--tls-cert")] {
            let line = load(&files(f, &s.key)).err().unwrap().to_string();
            assert!(
                line.starts_with(&format!("{flag} {}: ", f.display())),
                "{line}"
            );
        }
        let line = load(&files(&s.cert, &junk)).err().unwrap().to_string();
        assert!(
            line.starts_with(&format!("--tls-key {}: ", junk.display())),
            "{line}"
        );
        let mut with_ca = files(&s.cert, &s.key);
        with_ca.client_ca = Some(junk.clone());
        let line = load(&with_ca).err().unwrap().to_string();
        assert!(
            line.starts_with(&format!("--client-ca {}: ", junk.display())),
            "{line}"
        );
        assert!(!line.contains('\n'), "{line}");
    }
}
