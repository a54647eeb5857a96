//! A channel's TLS handshake, within a deadline counted from the accept, and why one was
//! refused (the reason label of `txrelay_tls_handshakes_refused_total`).

use std::fmt;
use std::io::{self, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Instant;

use rustls::{CertificateError, ServerConfig, ServerConnection};

use super::identity::{BadSubject, channel_of};

/// A handshake that did not end in a session.
#[derive(Debug)]
pub(super) enum Refused {
    /// Not finished by the deadline.
    Timeout,
    /// The peer closed the connection before the handshake ended.
    Closed,
    Tls(rustls::Error),
    Io(io::Error),
}

impl Refused {
    /// The metric's reason label.
    pub(super) fn reason(&self) -> &'static str {
        use CertificateError as C;
        match self {
            Refused::Timeout => "timeout",
            Refused::Closed => "closed",
            Refused::Io(_) => "other",
            Refused::Tls(e) => match e {
                rustls::Error::NoCertificatesPresented => "no_certificate",
                rustls::Error::InvalidCertificate(c) => match c {
                    C::UnknownIssuer | C::BadSignature => "unknown_ca",
                    C::Expired | C::ExpiredContext { .. } => "expired",
                    C::NotValidYet | C::NotValidYetContext { .. } => "not_yet_valid",
                    C::Revoked => "revoked",
                    C::Other(o) if o.0.downcast_ref::<BadSubject>().is_some() => "bad_subject",
                    _ => "other",
                },
                _ => "other",
            },
        }
    }
}

/// Every reason `reason` gives, so that each series exists from the start.
pub(super) const REASONS: &[&str] = &[
    "no_certificate",
    "unknown_ca",
    "expired",
    "not_yet_valid",
    "revoked",
    "bad_subject",
    "timeout",
    "closed",
    "other",
];

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refused::Timeout => f.write_str("handshake not finished within the frame timeout"),
            Refused::Closed => f.write_str("closed by the peer during the handshake"),
            Refused::Tls(e) => e.fmt(f),
            Refused::Io(e) => e.fmt(f),
        }
    }
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// Runs the server side of a handshake on `sock` until it ends or `deadline` passes; then
/// the session and the channel identity (`None`: no client certificate was asked for). A
/// refusal's alert is sent to the peer, as far as it will take it.
pub(super) fn handshake(
    config: Arc<ServerConfig>,
    mut sock: &TcpStream,
    deadline: Instant,
) -> Result<(ServerConnection, Option<String>), Refused> {
    let mut conn = ServerConnection::new(config).map_err(Refused::Tls)?;
    let until = |sock: &TcpStream| {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Refused::Timeout);
        }
        sock.set_read_timeout(Some(left))
            .and_then(|()| sock.set_write_timeout(Some(left)))
            .map_err(Refused::Io)
    };
    let io_err = |e: io::Error| {
        if is_timeout(&e) {
            Refused::Timeout
        } else {
            Refused::Io(e)
        }
    };
    while conn.is_handshaking() {
        while conn.wants_write() {
            until(sock)?;
            conn.write_tls(&mut sock).map_err(io_err)?;
        }
        if !conn.is_handshaking() {
            break;
        }
        until(sock)?;
        match conn.read_tls(&mut sock) {
            Ok(0) => return Err(Refused::Closed),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io_err(e)),
        }
        if let Err(e) = conn.process_new_packets() {
            // The alert that tells the peer why, best effort.
            while conn.wants_write() && until(sock).is_ok() {
                if conn.write_tls(&mut sock).is_err() {
                    break;
                }
            }
            return Err(Refused::Tls(e));
        }
    }
    while conn.wants_write() {
        until(sock)?;
        conn.write_tls(&mut sock).map_err(io_err)?;
    }
    let _ = sock.flush();
    let channel = match conn.peer_certificates().and_then(|c| c.first()) {
        None => None,
        Some(leaf) => Some(channel_of(leaf).map_err(|bad| Refused::Tls(bad.into()))?),
    };
    Ok((conn, channel))
}
