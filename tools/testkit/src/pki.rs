//! Throwaway certificate authorities for TLS tests (feature `pki`, with rcgen): a CA made in
//! the test, and certificates it signs for servers and clients, each written as PEM files
//! into the CA's own temp dir (removed when the `Pki` is dropped).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, SystemTime};

use rcgen::{
    BasicConstraints, CertificateParams, CertificateRevocationListParams, CertifiedIssuer, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyIdMethod, KeyPair, KeyUsagePurpose, RevokedCertParams,
    SerialNumber,
};

/// A CA of its own, in a temp dir.
pub struct Pki {
    dir: tempfile::TempDir,
    issuer: CertifiedIssuer<'static, KeyPair>,
    ca: PathBuf,
    next: AtomicU32,
}

/// A certificate and its key, as PEM files.
#[derive(Debug, Clone)]
pub struct Pair {
    pub cert: PathBuf,
    pub key: PathBuf,
    /// The certificate's serial number (unique within its CA), for a revocation list.
    pub serial: u64,
}

impl Pki {
    /// A new CA called `name`; its certificate is [`Pki::ca`].
    pub fn new(name: &str) -> Pki {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("no names");
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate().expect("a CA key");
        let issuer = CertifiedIssuer::self_signed(params, key).expect("a CA certificate");
        let dir = tempfile::tempdir().expect("temp dir");
        let ca = dir.path().join("ca.pem");
        std::fs::write(&ca, issuer.as_ref().pem()).expect("write the CA");
        Pki {
            dir,
            issuer,
            ca,
            next: AtomicU32::new(0),
        }
    }

    /// The CA's certificate (PEM): what `--core-ca` and `--client-ca` take.
    pub fn ca(&self) -> &Path {
        &self.ca
    }

    /// The temp dir the files are in.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// A server certificate for `names` (host names or IP addresses).
    pub fn server(&self, names: &[&str]) -> Pair {
        self.leaf(
            names,
            &[names[0]],
            ExtendedKeyUsagePurpose::ServerAuth,
            None,
        )
    }

    /// A server certificate for `names` that expires in `left`.
    pub fn server_expiring_in(&self, names: &[&str], left: Duration) -> Pair {
        let now = SystemTime::now();
        let validity = (now - Duration::from_secs(3600), now + left);
        self.leaf(
            names,
            &[names[0]],
            ExtendedKeyUsagePurpose::ServerAuth,
            Some(validity),
        )
    }

    /// A client certificate for `name`.
    pub fn client(&self, name: &str) -> Pair {
        self.client_with_cns(&[name])
    }

    /// A client certificate whose subject has these common names (none, one or several;
    /// without any, the subject is an organization alone).
    pub fn client_with_cns(&self, cns: &[&str]) -> Pair {
        self.leaf(&[], cns, ExtendedKeyUsagePurpose::ClientAuth, None)
    }

    /// A client certificate for `name` that expired a day ago.
    pub fn client_expired(&self, name: &str) -> Pair {
        let now = SystemTime::now();
        let validity = (
            now - Duration::from_secs(30 * 86400),
            now - Duration::from_secs(86400),
        );
        self.leaf(
            &[],
            &[name],
            ExtendedKeyUsagePurpose::ClientAuth,
            Some(validity),
        )
    }

    /// A TLS relay stand-in ([`crate::tls::answering_relay`]) with a certificate of this CA
    /// for localhost and 127.0.0.1; with `mutual`, requiring a client certificate of this CA.
    pub fn answering_relay(
        &self,
        mutual: bool,
    ) -> (std::net::SocketAddr, std::sync::mpsc::Receiver<bool>) {
        use crate::tls::{Versions, answering_relay, server_config};
        let server = self.server(&["localhost", "127.0.0.1"]);
        let client_ca = mutual.then(|| self.ca());
        let config = server_config(&server.cert, &server.key, client_ca, Versions::Both)
            .expect("a server configuration");
        answering_relay(config)
    }

    /// A revocation list of this CA (PEM) that revokes `revoked`: what `--client-crl` takes.
    pub fn crl(&self, revoked: &[&Pair]) -> PathBuf {
        let now = SystemTime::now();
        let params = CertificateRevocationListParams {
            this_update: (now - Duration::from_secs(3600)).into(),
            next_update: (now + Duration::from_secs(86400)).into(),
            crl_number: SerialNumber::from(u64::from(self.next.fetch_add(1, Ordering::Relaxed))),
            issuing_distribution_point: None,
            revoked_certs: revoked
                .iter()
                .map(|p| RevokedCertParams {
                    serial_number: SerialNumber::from(p.serial),
                    revocation_time: (now - Duration::from_secs(60)).into(),
                    reason_code: None,
                    invalidity_date: None,
                })
                .collect(),
            key_identifier_method: KeyIdMethod::Sha256,
        };
        let crl = params.signed_by(&self.issuer).expect("a revocation list");
        let path = self.dir().join("revoked.crl.pem");
        std::fs::write(&path, crl.pem().expect("PEM")).expect("write the revocation list");
        path
    }

    fn leaf(
        &self,
        names: &[&str],
        cns: &[&str],
        usage: ExtendedKeyUsagePurpose,
        validity: Option<(SystemTime, SystemTime)>,
    ) -> Pair {
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut params = CertificateParams::new(names).expect("valid names");
        if cns.is_empty() {
            params
                .distinguished_name
                .push(DnType::OrganizationName, "no common name");
        }
        for (i, cn) in cns.iter().enumerate() {
            // rcgen keeps one value per attribute type: a second CN goes in under the CN's
            // OID (2.5.4.3) spelled as a custom type.
            let ty = match i {
                0 => DnType::CommonName,
                _ => DnType::CustomDnType(vec![2, 5, 4, 3]),
            };
            params.distinguished_name.push(ty, *cn);
        }
        if let Some((from, to)) = validity {
            params.not_before = from.into();
            params.not_after = to.into();
        }
        let cn = cns.first().copied().unwrap_or("no-cn");
        params.use_authority_key_identifier_extension = true;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![usage];
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let serial = u64::from(n) + 1;
        params.serial_number = Some(SerialNumber::from(serial));
        let key = KeyPair::generate().expect("a key");
        let cert = params.signed_by(&key, &self.issuer).expect("a certificate");
        let pair = Pair {
            cert: self.dir().join(format!("{n}-{cn}.crt.pem")),
            key: self.dir().join(format!("{n}-{cn}.key.pem")),
            serial,
        };
        std::fs::write(&pair.cert, cert.pem()).expect("write a certificate");
        std::fs::write(&pair.key, key.serialize_pem()).expect("write a key");
        pair
    }
}

/// Writes a certificate set for scripts and chaos runs into `dir` (created if missing): a new
/// CA as `ca.pem`, a server certificate for `relay_names` as `relay.pem` and `relay.key`,
/// and a client certificate with subject CN `cn` as `<cn>.pem` and `<cn>.key` for each of
/// `clients` (names that are file names). Errors name the file.
pub fn write_certs(dir: &Path, relay_names: &[&str], clients: &[&str]) -> Result<(), String> {
    let copy = |from: &Path, name: &str| {
        let to = dir.join(name);
        std::fs::copy(from, &to)
            .map(|_| ())
            .map_err(|e| format!("cannot write {}: {e}", to.display()))
    };
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let pki = Pki::new("txrelay test CA");
    copy(pki.ca(), "ca.pem")?;
    let relay = pki.server(relay_names);
    copy(&relay.cert, "relay.pem")?;
    copy(&relay.key, "relay.key")?;
    for cn in clients {
        let pair = pki.client(cn);
        copy(&pair.cert, &format!("{cn}.pem"))?;
        copy(&pair.key, &format!("{cn}.key"))?;
    }
    Ok(())
}
