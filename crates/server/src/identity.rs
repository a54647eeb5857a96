//! A channel's identity (CONTRACT §8): the subject CN of its client certificate, checked in
//! the handshake by a verifier that first lets rustls' WebPKI verifier check the chain.

use std::fmt;
use std::sync::Arc;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{CertificateError, DigitallySignedStruct, DistinguishedName, OtherError};

use crate::metrics::ANONYMOUS;

/// Longest channel identity accepted.
pub const MAX_CHANNEL_LEN: usize = 64;

/// Why a certificate's subject is no channel identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadSubject(pub String);

impl fmt::Display for BadSubject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "client certificate subject: {}", self.0)
    }
}

impl std::error::Error for BadSubject {}

/// How rustls carries it: a certificate error of our own, told apart by its type.
impl From<BadSubject> for rustls::Error {
    fn from(bad: BadSubject) -> rustls::Error {
        rustls::Error::InvalidCertificate(CertificateError::Other(OtherError(Arc::new(bad))))
    }
}

/// The channel named by `cert`: its subject's one CN, 1–64 visible ASCII characters (no
/// space), so that it prints as one token in the log and in a metric label; and not `-`,
/// which is how the log, the metrics and `inspect` show an anonymous connection: a channel
/// named so would pass for anonymous wherever its requests are counted or read.
pub fn channel_of(cert: &CertificateDer<'_>) -> Result<String, BadSubject> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref())
        .map_err(|e| BadSubject(format!("not an X.509 certificate: {e}")))?;
    let cns: Vec<_> = parsed.subject().iter_common_name().collect();
    let [cn] = cns.as_slice() else {
        return Err(BadSubject(format!(
            "{} common names (CN), exactly one is required",
            cns.len()
        )));
    };
    let cn = cn
        .as_str()
        .map_err(|_| BadSubject("the common name (CN) is not a text string".into()))?;
    if cn.is_empty() || cn.len() > MAX_CHANNEL_LEN || !cn.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(BadSubject(format!(
            "common name {cn:?}: a channel is 1-{MAX_CHANNEL_LEN} visible ASCII characters"
        )));
    }
    if cn == ANONYMOUS {
        return Err(BadSubject(format!(
            "common name {cn:?}: \"{ANONYMOUS}\" stands for an anonymous channel"
        )));
    }
    Ok(cn.to_string())
}

/// Delegates to the WebPKI verifier, then requires a subject that names a channel.
#[derive(Debug)]
pub(super) struct ChannelVerifier {
    inner: Arc<dyn ClientCertVerifier>,
}

impl ChannelVerifier {
    pub(super) fn new(inner: Arc<dyn ClientCertVerifier>) -> ChannelVerifier {
        ChannelVerifier { inner }
    }
}

impl ClientCertVerifier for ChannelVerifier {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        true
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.inner.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        let verified = self
            .inner
            .verify_client_cert(end_entity, intermediates, now)?;
        channel_of(end_entity)?;
        Ok(verified)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::pki_types::pem::PemObject;
    use testkit::pki::{Pair, Pki};

    fn leaf(pair: &Pair) -> CertificateDer<'static> {
        CertificateDer::from_pem_file(&pair.cert).expect("a PEM certificate")
    }

    #[test]
    fn the_channel_is_the_one_common_name() {
        let pki = Pki::new("test CA");
        assert_eq!(
            channel_of(&leaf(&pki.client("branch-7"))),
            Ok("branch-7".into())
        );
        // A dash inside a name is an ordinary character; only the whole name `-` is taken.
        assert_eq!(channel_of(&leaf(&pki.client("--"))), Ok("--".into()));
        for bad in [
            pki.client_with_cns(&[]),
            pki.client_with_cns(&["a", "b"]),
            pki.client("two words"),
            pki.client(&"x".repeat(MAX_CHANNEL_LEN + 1)),
            pki.client(ANONYMOUS),
            pki.client(""),
            pki.client("tab\there"),
            pki.client("new\nline"),
            pki.client("esc\u{1b}[2K"),
            pki.client("caf\u{e9}"),
        ] {
            let err = channel_of(&leaf(&bad)).expect_err("not a channel");
            // What the handshake's refusal is counted under.
            assert!(matches!(
                rustls::Error::from(err),
                rustls::Error::InvalidCertificate(CertificateError::Other(_))
            ));
        }
    }
}
