//! The listeners: the accept loop of each door, a thread per connection admitted within the
//! limits (`slot`), and what a connection's thread does first — over TLS, the handshake
//! under its deadline, then the channel's limits — before its door serves it (`tcp` for
//! the frames of §2, `http` for the API of §9).

use std::io::{BufReader, Read, Write};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use log::{info, warn};
use log_limit::conn_warn;
use rustls::StreamOwned;

use crate::Shared;
use crate::clock::{Clock, Clocked};
use crate::frames::ConnEnd;
use crate::handshake::{Refused, handshake};
use crate::registry::Conn;
use crate::slot::Slot;

/// Connection threads only parse frames, run SQLite statements and make one HTTP call.
const CONNECTION_STACK: usize = 256 * 1024;

/// Where a listener's own connection reaches it (an unspecified address: loopback).
pub(crate) fn wake_addr(mut addr: SocketAddr) -> SocketAddr {
    if addr.ip().is_unspecified() {
        addr.set_ip(match addr {
            SocketAddr::V4(_) => Ipv4Addr::LOCALHOST.into(),
            SocketAddr::V6(_) => Ipv6Addr::LOCALHOST.into(),
        });
    }
    addr
}

/// Which listener a connection came through: the frames of §2 or the HTTP API of §9.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Door {
    Tcp,
    Http,
}

impl Door {
    /// The `door` label and log field.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Door::Tcp => "tcp",
            Door::Http => "http",
        }
    }
}

/// Accepts connections on `listener` until a shutdown; both doors share `shared`'s limits.
pub(crate) fn accept_loop(shared: &Arc<Shared>, listener: TcpListener, door: Door) {
    for stream in listener.incoming() {
        if shared.stopping() {
            break;
        }
        match stream {
            Ok(s) => admit(shared, s, door),
            Err(e) => {
                // Out of file descriptors, typically: back off instead of spinning.
                conn_warn!("accept failed: {e}");
                thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

fn admit(shared: &Arc<Shared>, stream: TcpStream, door: Door) {
    let accepted = Instant::now();
    let Ok(peer) = stream.peer_addr() else {
        return; // already gone
    };
    let Some(mut slot) = Slot::take(shared, peer.ip(), stream) else {
        return;
    };
    let spawned = thread::Builder::new()
        .name("conn".into())
        .stack_size(CONNECTION_STACK)
        .spawn(move || {
            // The slot is freed when this closure ends, however it ends (a panic
            // included), or when it is dropped unrun because the thread did not start.
            if let Err(e) = serve_connection(&mut slot, peer, accepted, door) {
                info!("connection {peer} closed: {e}");
            }
        });
    if let Err(e) = spawned {
        conn_warn!("cannot start a connection thread: {e}");
    }
}

/// Pending connections the kernel queues before `accept` (it caps this at somaxconn).
const BACKLOG: i32 = 1024;

/// std listens with a backlog of 128: a burst of channels reconnecting after a restart
/// overflows it, and each overflowing client waits a second for its SYN to be retried.
/// Listening again on a listening socket only changes the backlog; on failure the old one
/// stays.
pub(crate) fn widen_backlog(listener: &TcpListener) {
    if let Err(e) = socket2::SockRef::from(listener).listen(BACKLOG) {
        warn!("cannot widen the listen backlog: {e}");
    }
}

/// Serves one connection: over TLS, the handshake first (within the frame timeout from
/// `accepted`), then the frames in order.
fn serve_connection(
    slot: &mut Slot,
    peer: SocketAddr,
    accepted: Instant,
    door: Door,
) -> Result<(), ConnEnd> {
    let shared = Arc::clone(&slot.shared);
    let entry = Arc::clone(&slot.stream);
    let sock: &TcpStream = &entry;
    let _ = sock.set_nodelay(true);
    let frame_timeout = shared.config.frame_timeout;
    // Every read of the socket, the TLS session's included, ends by this clock's deadline.
    let clock = Clock::new();
    let clocked = Clocked {
        sock,
        clock: &clock,
    };
    let Some(tls) = &shared.tls else {
        sock.set_write_timeout(Some(frame_timeout))
            .map_err(ConnEnd::Io)?;
        let conn = Conn {
            entry: &entry,
            clock: &clock,
            channel: None,
        };
        return serve_door(door, &shared, &conn, &mut BufReader::new(clocked));
    };
    let used = tls.current();
    let deadline = accepted + frame_timeout;
    let (session, channel) = match handshake(Arc::clone(&used.config), sock, deadline) {
        Ok(session) => session,
        Err(refused) => {
            handshake_refused(&shared, peer, &refused);
            return Ok(());
        }
    };
    if let Some(channel) = &channel
        && let Err((limit, max)) = slot.bind_channel(channel)
    {
        shared
            .metrics
            .connections_refused
            .with_label_values(&[limit])
            .inc();
        conn_warn!(
            "{limit} {max} reached for channel {channel}: closed a new connection from {peer}"
        );
        return Ok(());
    }
    if let Some(channel) = &channel
        && let Err(e) = slot.keep_client(&session, tls, &used, (peer, channel))
    {
        // Accepted under files that a reload replaced during the handshake.
        handshake_refused(&shared, peer, &Refused::Tls(e));
        return Ok(());
    }
    sock.set_write_timeout(Some(frame_timeout))
        .map_err(ConnEnd::Io)?;
    let conn = Conn {
        entry: &entry,
        clock: &clock,
        channel: channel.as_deref(),
    };
    let mut reader = BufReader::new(StreamOwned::new(session, clocked));
    let served = serve_door(door, &shared, &conn, &mut reader);
    let session = reader.get_mut();
    session.conn.send_close_notify();
    let _ = session.flush();
    served
}

/// Serves a connection's requests by its door's protocol.
fn serve_door<S: Read + Write>(
    door: Door,
    shared: &Shared,
    conn: &Conn<'_>,
    reader: &mut BufReader<S>,
) -> Result<(), ConnEnd> {
    match door {
        Door::Tcp => crate::tcp::serve_frames(shared, conn, reader),
        Door::Http => crate::http::serve_http(shared, conn, reader),
    }
}

/// One line and one count per refused handshake; none for the connections a shutdown cut.
fn handshake_refused(shared: &Shared, peer: SocketAddr, refused: &Refused) {
    if shared.stopping() {
        return;
    }
    let reason = refused.reason();
    shared
        .metrics
        .tls_refused
        .with_label_values(&[reason])
        .inc();
    conn_warn!("TLS handshake from {peer} refused ({reason}): {refused}");
}
