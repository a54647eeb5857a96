//! Telling "the request never left" apart from everything else, exactly.
//!
//! ureq runs a call in phases: resolve the name, connect (TCP, and later TLS), then send and
//! receive. Only a failure in the first two proves that no byte of the request left this
//! process. ureq's errors do not say which phase they came from (a name that does not
//! resolve is an uncategorised I/O error; a socket that cannot be created for lack of file
//! descriptors is another), so the relay wraps the resolver and the connector it gives ureq:
//! every error they return is marked [`PreSend`], and the classification looks for the mark.
//! A connection taken from ureq's keep-alive pool never passes through them, so a failure on
//! it is never marked.
//!
//! For `https://` the connector chain is TCP, then ureq's rustls connector, which runs the
//! whole TLS handshake (`complete_io`) before it returns the connection: a certificate the
//! relay does not trust, a name it does not match, a handshake the server aborts or that
//! times out are all connector errors, marked, and the request was never written. What the
//! server decides after the client's side of the handshake is over comes on the first read,
//! after the request was written, and is not marked: under TLS 1.3 that is where a server
//! that refuses (or requires and did not get) the relay's client certificate says so.

use std::fmt;
use std::io;
use std::net::{IpAddr, SocketAddr};

use ureq::Error;

use crate::capture::Capturing;
use ureq::config::Config;
use ureq::http::Uri;
use ureq::unversioned::resolver::{DefaultResolver, ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::{
    ConnectionDetails, Connector, DefaultConnector, NextTimeout, Transport,
};

/// The mark: this error happened before any request byte was written.
#[derive(Debug)]
pub struct PreSend(pub String);

impl fmt::Display for PreSend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PreSend {}

fn mark(phase: &str, e: Error) -> Error {
    Error::Io(io::Error::other(PreSend(format!("{phase}: {e}"))))
}

/// The text of the mark, if `e` carries it.
pub fn pre_send(e: &Error) -> Option<&str> {
    match e {
        Error::Io(io) => io
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<PreSend>())
            .map(|p| p.0.as_str()),
        _ => None,
    }
}

/// ureq's resolver (a lookup thread bounded by the call's deadline), with errors marked, and
/// without that thread for a literal IP address.
#[derive(Debug, Default)]
pub struct MarkingResolver(DefaultResolver);

impl Resolver for MarkingResolver {
    fn resolve(
        &self,
        uri: &Uri,
        config: &Config,
        timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, Error> {
        if let Some(addr) = literal(uri) {
            let mut out = self.empty();
            out.push(addr);
            return Ok(out);
        }
        self.0
            .resolve(uri, config, timeout)
            .map_err(|e| mark("name lookup", e))
    }
}

/// `host:port` of `uri` when the host is an IP address (brackets allowed for IPv6).
fn literal(uri: &Uri) -> Option<SocketAddr> {
    let host = uri.host()?;
    let ip: IpAddr = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .ok()?;
    let port = uri.port_u16().or_else(|| match uri.scheme_str()? {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    })?;
    Some(SocketAddr::new(ip, port))
}

/// ureq's connector chain (TCP, then TLS for https), with errors marked: a socket that
/// cannot be created, a refused or timed-out connect, a failed TLS handshake (from the
/// client's side: see the module's note on TLS 1.3 client certificates).
#[derive(Debug)]
pub struct MarkingConnector<C = DefaultConnector>(pub C);

impl Default for MarkingConnector {
    fn default() -> Self {
        MarkingConnector(DefaultConnector::new())
    }
}

impl<C: Connector<(), Out = Box<dyn Transport>>> Connector<()> for MarkingConnector<C> {
    type Out = Box<dyn Transport>;

    fn connect(
        &self,
        details: &ConnectionDetails,
        chained: Option<()>,
    ) -> Result<Option<Self::Out>, Error> {
        match self.0.connect(details, chained) {
            // Watched for a read timeout, so that a late reply can be caught (`late`).
            Ok(Some(t)) => Ok(Some(Box::new(Capturing::new(t)))),
            Ok(None) => Err(mark("connect", Error::ConnectionFailed)),
            Err(e) => Err(mark("connect", e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_survive_and_are_found() {
        let e = mark("connect", Error::Io(io::Error::from_raw_os_error(24)));
        assert!(pre_send(&e).unwrap().contains("connect"), "{e}");
        assert!(pre_send(&Error::Io(io::ErrorKind::ConnectionRefused.into())).is_none());
        assert!(pre_send(&Error::ConnectionFailed).is_none());
    }

    #[test]
    fn literal_addresses_need_no_lookup() {
        let u = |s: &str| s.parse::<Uri>().unwrap();
        assert_eq!(
            literal(&u("http://127.0.0.1:9201/v1")),
            Some("127.0.0.1:9201".parse().unwrap())
        );
        assert_eq!(
            literal(&u("https://[::1]/x")),
            Some("[::1]:443".parse().unwrap())
        );
        assert_eq!(literal(&u("http://core.bank:9201")), None);
    }
}
