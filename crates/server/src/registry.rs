//! What the registry of open connections (`Conns`) holds for each: its socket, so that a
//! shutdown or a reload can wake a thread that waits in `read`; and, under mutual TLS, the
//! client certificate its handshake accepted, so that a reload that brings a new
//! `--client-crl` or `--client-ca` can check it again (CONTRACT §8, v1.3).
//!
//! A connection whose certificate the new files refuse is marked refused and its socket
//! shut for reading: a thread waiting for a request sees the end at once, a thread inside a
//! request answers it, and neither takes another (`Conn::refused`, checked before every
//! request). Without this, a revoked channel's kept-alive connection would go on booking
//! until it closed of itself.

use std::net::{Shutdown, SocketAddr, TcpStream};
use std::ops::Deref;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use log::warn;
use rustls::ServerConnection;
use rustls::pki_types::{CertificateDer, UnixTime};

use super::clock::Clock;
use super::handshake::Refused;
use super::tls::Loaded;
use crate::Shared;
use crate::listener::ListenerState;
use crate::slot::Slot;

/// One open connection, as the registry holds it.
pub(super) struct Entry {
    sock: TcpStream,
    /// The client certificate accepted in the handshake, once there was one.
    client: OnceLock<Client>,
    /// Set when a reload's files refuse that certificate.
    refused: AtomicBool,
}

/// A channel's certificate chain (leaf first), and who showed it, for the log.
struct Client {
    chain: Vec<CertificateDer<'static>>,
    peer: SocketAddr,
    channel: String,
}

impl Entry {
    pub(super) fn new(sock: TcpStream) -> Entry {
        Entry {
            sock,
            client: OnceLock::new(),
            refused: AtomicBool::new(false),
        }
    }

    /// Whether a reload refused this connection's certificate: it takes no further request.
    pub(super) fn refused(&self) -> bool {
        self.refused.load(Ordering::SeqCst)
    }

    /// Marks the connection refused, then wakes its thread if it waits for a request (the
    /// mark first, so that the thread it wakes sees it). Writing stays open for the answer
    /// to a request in flight.
    fn refuse(&self) {
        self.refused.store(true, Ordering::SeqCst);
        let _ = self.sock.shutdown(Shutdown::Read);
    }
}

/// The socket, so that the registry's users (a shutdown, a connection's thread) use an entry
/// as they used the socket.
impl Deref for Entry {
    type Target = TcpStream;

    fn deref(&self) -> &TcpStream {
        &self.sock
    }
}

/// What a connection's request loop needs besides its reader: its registry entry (whose
/// socket names the peer, and which a reload may refuse), the clock that bounds its reads,
/// and its channel identity (`None`: anonymous).
pub(super) struct Conn<'a> {
    pub(super) entry: &'a Entry,
    pub(super) clock: &'a Clock,
    pub(super) channel: Option<&'a str>,
}

impl Conn<'_> {
    /// Whether a reload refused the connection's certificate: no further request is taken.
    pub(super) fn refused(&self) -> bool {
        self.entry.refused()
    }
}

impl Slot {
    /// Keeps the client certificate `session`'s handshake (under `used`) accepted, for the
    /// reloads to come; `peer` and `channel` are for their log. If a reload has replaced
    /// `used` since the handshake began, the certificate is checked against the files now
    /// in use too, as that reload could not see it: the error is why they refuse it.
    pub(super) fn keep_client(
        &self,
        session: &ServerConnection,
        tls: &ListenerState,
        used: &Arc<Loaded>,
        (peer, channel): (SocketAddr, &str),
    ) -> Result<(), rustls::Error> {
        let Some(chain) = session.peer_certificates().filter(|c| !c.is_empty()) else {
            return Ok(());
        };
        {
            // Under the registry's lock, which a reload takes after it has put its files in
            // place: either it sees this certificate, or this sees its files below.
            let _conns = self.shared.conns();
            let _ = self.stream.client.set(Client {
                chain: chain.to_vec(),
                peer,
                channel: channel.to_string(),
            });
        }
        let now = tls.current();
        if Arc::ptr_eq(&now, used) {
            return Ok(());
        }
        match &now.verifier {
            Some(verifier) => verify(verifier.as_ref(), chain),
            None => Ok(()),
        }
    }
}

fn verify(
    verifier: &dyn rustls::server::danger::ClientCertVerifier,
    chain: &[CertificateDer<'static>],
) -> Result<(), rustls::Error> {
    let (leaf, intermediates) = chain.split_first().expect("a chain is never empty here");
    verifier
        .verify_client_cert(leaf, intermediates, UnixTime::now())
        .map(|_| ())
}

/// After a reload to `loaded`: checks the certificate of every open connection against it,
/// and refuses (see `Entry::refuse`) those it no longer accepts, one warning each.
pub(super) fn recheck(shared: &Shared, loaded: &Arc<Loaded>) {
    let Some(verifier) = &loaded.verifier else {
        return;
    };
    // The check (signatures, the lists) runs outside the lock, on a copy of the entries.
    let open: Vec<Arc<Entry>> = shared.conns().open.values().cloned().collect();
    for entry in open {
        let Some(client) = entry.client.get() else {
            continue;
        };
        if entry.refused() {
            continue;
        }
        if let Err(e) = verify(verifier.as_ref(), &client.chain) {
            entry.refuse();
            let reason = Refused::Tls(e.clone()).reason();
            warn!(
                "closing the connection of channel {} from {}: the reloaded TLS files refuse \
                 its certificate ({reason}: {e}); a request in flight is answered first, no \
                 further one is taken",
                client.channel, client.peer
            );
        }
    }
}
