//! The relay's TCP side: an accept loop and a thread per channel connection.
//!
//! A connection is served strictly in order (read a frame, answer it, read the next), which
//! is what keeps pipelined replies in request order. Whatever one connection does — garbage,
//! a stall mid-frame, silence — costs only its own thread. Reading a frame under its
//! timeouts is `frames` (the deadlines, enforced on the socket, `clock`); the file descriptor
//! budget `descriptors`; the start's errors `error`.
//!
//! With `--tls-cert` the connection thread first runs a TLS handshake (`handshake`), with a
//! configuration loaded by `tls` (and reloaded, `listener`) and, for mutual TLS, a verifier
//! that takes the channel identity from the client certificate (`identity`); the frames then
//! travel inside the session unchanged. The open connections and their limits are `Slot`s;
//! what the registry keeps of each, for a shutdown and for a reload's re-check, `registry`.

mod allocator;
mod clock;
mod descriptors;
mod error;
mod frames;
mod handshake;
mod http;
pub mod identity;
mod listener;
mod registry;
mod start_log;
#[cfg(test)]
mod tests;
mod tls;

pub use descriptors::descriptors_needed;
pub use error::StartError;
pub use ledger::sqlite::lock::{LedgerLock, LockError};
pub use tls::{ListenerTls, TlsError};

use std::collections::HashMap;
use std::fmt;
use std::io::{self, BufReader, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use log::{info, warn};
use rustls::StreamOwned;

use self::clock::{Clock, Clocked};
use self::descriptors::{ledger_descriptors, raise_descriptor_limit};
use self::frames::{ConnEnd, Timeouts, read_frame};
use self::handshake::{Refused, handshake};
use self::listener::ListenerState;
use self::registry::{Conn, Entry};
use crate::admin::Admin;
use crate::late::LateReplies;
use crate::log_limit::conn_warn;
use crate::metrics::{ANONYMOUS, metrics};
use crate::recovery::{self, RecoveryWatch};
use crate::transfer;
use core_client::CoreClient;
use core_client::tls::TlsFiles;
use ledger::db::{Access, Db};
use ledger::store::Store;

/// Connection threads only parse frames, run SQLite statements and make one HTTP call.
const CONNECTION_STACK: usize = 256 * 1024;

#[derive(Debug, Clone)]
pub struct Config {
    pub listen: String,
    /// `--http-listen`: where the HTTP channel API (CONTRACT §9) is served beside the TCP
    /// listener (`None`: not at all); same ledger, limits, timeouts and TLS.
    pub http_listen: Option<String>,
    pub core_url: String,
    /// `--core-ca`, `--core-cert`, `--core-key` (for an https:// core).
    pub core_tls: TlsFiles,
    pub connect_timeout: Duration,
    pub read_timeout: Duration,
    pub frame_timeout: Duration,
    pub idle_timeout: Duration,
    pub max_connections: usize,
    /// Connections one source IP may hold at once, so that one peer cannot lock out the rest.
    pub max_connections_per_peer: usize,
    /// How long a call given up at the read timeout is still listened to (zero: not at all).
    pub late_reply: Duration,
    /// Most calls listened to that way at once; beyond, a timed-out call is dropped.
    pub max_late_replies: usize,
    /// `--tls-cert`, `--tls-key`, `--client-ca`, `--client-crl`: TLS on the channel
    /// listener (CONTRACT §8); `None`: plain TCP.
    pub tls: Option<ListenerTls>,
    /// Connections one channel identity may hold at once (`None`: no limit of its own).
    pub max_connections_per_channel: Option<usize>,
    /// `--admin`: where `/metrics` and `/healthz` are served (`None`: not at all), apart
    /// from the channel port (its connections count against no channel limit).
    pub admin: Option<String>,
    /// What the admin port's ledger gauges count against (`--max-inquiries`,
    /// `--max-attempts`).
    pub admin_limits: crate::metrics::Thresholds,
}

struct Shared {
    store: Arc<dyn Store>,
    /// Whether the ledger is recovering (CONTRACT §11), followed while the relay runs.
    recovery: RecoveryWatch,
    tls: Option<ListenerState>,
    late: Option<Arc<LateReplies>>,
    core: CoreClient,
    config: Config,
    conns: Mutex<Conns>,
    /// Signalled whenever a connection ends, for the shutdown's wait.
    conn_ended: Condvar,
    refused: AtomicU64,
    refused_peer: AtomicU64,
    /// Set (only) while holding `conns`, so that no connection registers unseen after a
    /// shutdown has begun; read without the lock on the hot path.
    stopping: AtomicBool,
}

/// The open channel connections, kept so that a shutdown can wake the threads that sit in
/// `read`, and counted per peer.
#[derive(Default)]
struct Conns {
    next_id: u64,
    open: HashMap<u64, Arc<Entry>>,
    per_peer: HashMap<PeerKey, usize>,
}

/// What the per-peer limit counts a connection under: its source IP until its TLS
/// handshake names a channel, then that channel (one concentrator's IP may carry several).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum PeerKey {
    Ip(IpAddr),
    Channel(String),
}

impl fmt::Display for PeerKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PeerKey::Ip(ip) => ip.fmt(f),
            PeerKey::Channel(c) => write!(f, "channel:{c}"),
        }
    }
}

impl Shared {
    fn conns(&self) -> std::sync::MutexGuard<'_, Conns> {
        self.conns.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }
}

fn admin_err(addr: &str, source: io::Error) -> StartError {
    StartError::Admin {
        addr: addr.to_string(),
        source,
    }
}

pub struct Relay {
    listener: TcpListener,
    /// The HTTP channel API's listener, if `Config::http_listen` was given.
    http_listener: Option<TcpListener>,
    shared: Arc<Shared>,
    /// The admin port, if `Config::admin` was given; stopped when `serve` returns.
    admin: Option<Admin>,
    /// An SQLite ledger's one-relay lock, held for the relay's life.
    _lock: Option<LedgerLock>,
}

/// Stops a running relay from another thread (a signal handler's thread, a test).
#[derive(Clone)]
pub struct ShutdownHandle {
    wake_addr: SocketAddr,
    http_wake_addr: Option<SocketAddr>,
    shared: Arc<Shared>,
}

impl ShutdownHandle {
    /// Stops accepting and lets every request in flight finish: threads waiting for a next
    /// frame see end-of-file at once; a thread inside a request answers it, then ends.
    pub fn shutdown(&self) {
        {
            let conns = self.shared.conns();
            if self.shared.stopping.swap(true, Ordering::SeqCst) {
                return;
            }
            for s in conns.open.values() {
                let _ = s.shutdown(Shutdown::Read);
            }
        }
        // `accept` has no timeout: wake it with a connection of our own.
        for addr in std::iter::once(self.wake_addr).chain(self.http_wake_addr) {
            let _ = TcpStream::connect_timeout(&addr, Duration::from_secs(1));
        }
    }
}

impl Relay {
    /// Binds the channel and admin ports, takes an SQLite ledger's one-relay lock, opens the
    /// ledger and proves it can write it (`Store::health_round_trip`); the core URL is checked
    /// before the ledger is touched. Every configuration error shows before the `listening
    /// on` line, and one that can be found without the ledger leaves it untouched.
    pub fn start(db: &Db, config: Config) -> Result<Relay, StartError> {
        crate::observers::install();
        allocator::keep_freed_memory();
        let late_sockets = if config.late_reply.is_zero() {
            0
        } else {
            config.max_late_replies as u64
        };
        raise_descriptor_limit(
            config.max_connections,
            ledger_descriptors(db) + late_sockets,
        )?;
        let tls = config
            .tls
            .clone()
            .map(ListenerState::load)
            .transpose()
            .map_err(StartError::Tls)?;
        if config.max_connections_per_channel.is_some() {
            metrics()
                .connections_refused
                .with_label_values(&["max_connections_per_channel"]);
        }
        // Both ports before the ledger: a relay that cannot listen leaves no ledger file behind.
        let listener = TcpListener::bind(&config.listen).map_err(|source| StartError::Bind {
            addr: config.listen.clone(),
            source,
        })?;
        widen_backlog(&listener);
        let http_listener = config
            .http_listen
            .as_deref()
            .map(|addr| {
                TcpListener::bind(addr).map_err(|source| StartError::Bind {
                    addr: addr.to_string(),
                    source,
                })
            })
            .transpose()?;
        if let Some(l) = &http_listener {
            widen_backlog(l);
        }
        let admin_listener = config
            .admin
            .as_deref()
            .map(|addr| Admin::bind(addr).map_err(|source| admin_err(addr, source)))
            .transpose()?;
        // The core's URL and TLS files too: a bad `--core` leaves no ledger file behind.
        let core = CoreClient::with_tls(
            &config.core_url,
            config.connect_timeout,
            config.read_timeout,
            &config.core_tls,
        )
        .map_err(StartError::Core)?;
        // Before the ledger is opened (and perhaps upgraded): one relay per SQLite file, under
        // whatever name it was given (`ledger::sqlite::lock`).
        let lock = match db {
            Db::Sqlite(path) => {
                ledger::sqlite::check_path(path).map_err(StartError::Ledger)?;
                Some(LedgerLock::relay(path).map_err(StartError::Lock)?)
            }
            Db::Postgres(_) => None,
        };
        let store = db
            .open(Access::Relay, "relay")
            .map_err(StartError::Ledger)?;
        // A real write through the claim path (rolled back) and the health row, read back:
        // a ledger the relay cannot write would otherwise answer every transfer E905.
        store.health_round_trip().map_err(StartError::Unwritable)?;
        // Read before `listening on`: no request is handled without knowing the mark.
        let recovery =
            RecoveryWatch::start(Arc::clone(&store), recovery::POLL).map_err(StartError::Ledger)?;
        let admin = match (admin_listener, config.admin.as_deref()) {
            (Some(listener), Some(addr)) => Some(
                Admin::start(listener, Arc::clone(&store), config.admin_limits)
                    .map_err(|e| admin_err(addr, e))?,
            ),
            _ => None,
        };
        Ok(Relay {
            listener,
            http_listener,
            admin,
            _lock: lock,
            shared: Arc::new(Shared {
                late: (!config.late_reply.is_zero()).then(|| {
                    Arc::new(LateReplies::new(
                        Arc::clone(&store),
                        config.late_reply,
                        config.max_late_replies,
                    ))
                }),
                store,
                recovery,
                tls,
                core,
                config,
                conns: Mutex::default(),
                conn_ended: Condvar::new(),
                refused: AtomicU64::new(0),
                refused_peer: AtomicU64::new(0),
                stopping: AtomicBool::new(false),
            }),
        })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// The HTTP channel API's address, if `Config::http_listen` was given.
    pub fn http_addr(&self) -> Option<SocketAddr> {
        self.http_listener
            .as_ref()
            .and_then(|l| l.local_addr().ok())
    }

    /// The admin port's address, if `Config::admin` was given.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin.as_ref().map(Admin::local_addr)
    }

    pub fn shutdown_handle(&self) -> io::Result<ShutdownHandle> {
        let http_wake_addr = match &self.http_listener {
            Some(l) => Some(wake_addr(l.local_addr()?)),
            None => None,
        };
        Ok(ShutdownHandle {
            wake_addr: wake_addr(self.local_addr()?),
            http_wake_addr,
            shared: Arc::clone(&self.shared),
        })
    }

    /// Accepts connections (on both doors) until a shutdown, then waits for every connection
    /// to finish.
    pub fn serve(self) {
        let http = self.http_listener.map(|listener| {
            let shared = Arc::clone(&self.shared);
            thread::Builder::new()
                .name("http-accept".into())
                .spawn(move || accept_loop(&shared, listener, Door::Http))
        });
        accept_loop(&self.shared, self.listener, Door::Tcp);
        match http {
            Some(Ok(accepting)) => {
                let _ = accepting.join();
            }
            Some(Err(e)) => warn!("cannot start the HTTP accept thread: {e}"),
            None => {}
        }
        let mut conns = self.shared.conns();
        while !conns.open.is_empty() {
            info!("waiting for {} connection(s) to finish", conns.open.len());
            conns = self
                .shared
                .conn_ended
                .wait(conns)
                .unwrap_or_else(|e| e.into_inner());
        }
        drop(conns);
        // Calls still listened to for a late reply end by their own deadline.
        if let Some(late) = &self.shared.late {
            late.wait_all();
        }
        drop(self.admin);
    }

    /// What re-reads the TLS files (on SIGHUP); `None` when the listener is plain TCP.
    pub fn tls_reloader(&self) -> Option<TlsReloader> {
        self.shared.tls.as_ref()?;
        Some(TlsReloader(Arc::clone(&self.shared)))
    }

    /// The background waiters for late replies, if `--late-reply-ms` is not zero.
    pub fn late_replies(&self) -> Option<Arc<LateReplies>> {
        self.shared.late.clone()
    }
}

/// Where a listener's own connection reaches it (an unspecified address: loopback).
fn wake_addr(mut addr: SocketAddr) -> SocketAddr {
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
enum Door {
    Tcp,
    Http,
}

impl Door {
    /// The `door` label and log field.
    fn as_str(self) -> &'static str {
        match self {
            Door::Tcp => "tcp",
            Door::Http => "http",
        }
    }
}

/// Accepts connections on `listener` until a shutdown; both doors share `shared`'s limits.
fn accept_loop(shared: &Arc<Shared>, listener: TcpListener, door: Door) {
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

/// Re-reads the channel listener's TLS files: new handshakes use them, and open
/// connections keep their sessions unless the new `--client-ca`/`--client-crl` refuse their
/// certificate (`registry::recheck`).
#[derive(Clone)]
pub struct TlsReloader(Arc<Shared>);

impl TlsReloader {
    /// On an error (one line naming the file) the configuration in use stays.
    pub fn reload(&self) -> Result<(), TlsError> {
        if let Some(tls) = &self.0.tls {
            registry::recheck(&self.0, &tls.reload()?);
        }
        Ok(())
    }
}

/// A connection's place among the open ones; gives it back when dropped.
struct Slot {
    shared: Arc<Shared>,
    id: u64,
    peer: PeerKey,
    stream: Arc<Entry>,
}

impl Slot {
    /// Registers `stream`, or refuses it (it is then closed) when the relay is stopping or a
    /// limit is reached; refusals are counted in the log.
    fn take(shared: &Arc<Shared>, peer: IpAddr, stream: TcpStream) -> Option<Slot> {
        let mut conns = shared.conns();
        if shared.stopping() {
            return None;
        }
        let max = shared.config.max_connections;
        if conns.open.len() >= max {
            drop(conns);
            metrics()
                .connections_refused
                .with_label_values(&["max_connections"])
                .inc();
            let n = shared.refused.fetch_add(1, Ordering::Relaxed) + 1;
            conn_warn!("connection limit {max} reached: closed a new connection ({n} so far)");
            return None;
        }
        let peer = PeerKey::Ip(peer);
        let per_peer = conns.per_peer.get(&peer).copied().unwrap_or(0);
        let max_peer = shared.config.max_connections_per_peer;
        if per_peer >= max_peer {
            drop(conns);
            metrics()
                .connections_refused
                .with_label_values(&["max_connections_per_peer"])
                .inc();
            let n = shared.refused_peer.fetch_add(1, Ordering::Relaxed) + 1;
            conn_warn!(
                "per-peer connection limit {max_peer} reached for {peer}: closed a new \
                 connection ({n} so far)"
            );
            return None;
        }
        let stream = Arc::new(Entry::new(stream));
        conns.next_id += 1;
        let id = conns.next_id;
        conns.open.insert(id, Arc::clone(&stream));
        *conns.per_peer.entry(peer.clone()).or_default() += 1;
        metrics().connections_open.inc();
        Some(Slot {
            shared: Arc::clone(shared),
            id,
            peer,
            stream,
        })
    }

    /// Counts this connection, from now on, under `channel` instead of its source IP; or
    /// the limit (a `connections_refused` label) that `channel` has reached.
    fn bind_channel(&mut self, channel: &str) -> Result<(), (&'static str, usize)> {
        let key = PeerKey::Channel(channel.to_string());
        let config = &self.shared.config;
        let mut conns = self.shared.conns();
        let n = conns.per_peer.get(&key).copied().unwrap_or(0);
        if let Some(max) = config.max_connections_per_channel
            && n >= max
        {
            return Err(("max_connections_per_channel", max));
        }
        if n >= config.max_connections_per_peer {
            return Err(("max_connections_per_peer", config.max_connections_per_peer));
        }
        release(&mut conns.per_peer, &self.peer);
        *conns.per_peer.entry(key.clone()).or_default() += 1;
        self.peer = key;
        Ok(())
    }
}

/// One connection fewer under `key`.
fn release(per_peer: &mut HashMap<PeerKey, usize>, key: &PeerKey) {
    if let Some(n) = per_peer.get_mut(key) {
        *n -= 1;
        if *n == 0 {
            per_peer.remove(key);
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut conns = self.shared.conns();
        conns.open.remove(&self.id);
        release(&mut conns.per_peer, &self.peer);
        drop(conns);
        metrics().connections_open.dec();
        self.shared.conn_ended.notify_all();
    }
}

/// Pending connections the kernel queues before `accept` (it caps this at somaxconn).
const BACKLOG: i32 = 1024;

/// std listens with a backlog of 128: a burst of channels reconnecting after a restart
/// overflows it, and each overflowing client waits a second for its SYN to be retried.
#[cfg(unix)]
fn widen_backlog(listener: &TcpListener) {
    use std::os::fd::AsRawFd;
    // SAFETY: listen(2) on a socket this listener owns; calling it again on a listening
    // socket only changes the backlog, and on failure the old one stays.
    let rc = unsafe { libc::listen(listener.as_raw_fd(), BACKLOG) };
    if rc != 0 {
        warn!(
            "cannot widen the listen backlog: {}",
            io::Error::last_os_error()
        );
    }
}

#[cfg(not(unix))]
fn widen_backlog(_: &TcpListener) {}

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
        metrics()
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
        Door::Tcp => serve_frames(shared, conn, reader),
        Door::Http => http::serve_http(shared, conn, reader),
    }
}

/// One line and one count per refused handshake; none for the connections a shutdown cut.
fn handshake_refused(shared: &Shared, peer: SocketAddr, refused: &Refused) {
    if shared.stopping() {
        return;
    }
    let reason = refused.reason();
    metrics().tls_refused.with_label_values(&[reason]).inc();
    conn_warn!("TLS handshake from {peer} refused ({reason}): {refused}");
}

/// One line per request; the fields are key-values, so that `--log-format json` carries them
/// as keys and the text format prints `guid=… peer=… channel=… code=… state=… ms=…`, and for
/// an `E900` `detail=…`, the field and the rule it broke; then `door=tcp` or `door=http`.
fn log_request(
    handled: &transfer::Handled,
    peer: &str,
    channel: Option<&str>,
    took: Duration,
    door: Door,
) {
    log_answer(
        &handled.guid,
        &handled.code,
        handled.state.map_or("-", |s| s.as_str()),
        handled.detail,
        (peer, channel, took, door),
    );
}

/// The line of `log_request` from its parts (the HTTP door's E900 has no `Handled`).
fn log_answer(
    guid: &str,
    code: &[u8],
    state: &str,
    detail: Option<&str>,
    (peer, channel, took, door): (&str, Option<&str>, Duration, Door),
) {
    let channel = channel.unwrap_or(ANONYMOUS);
    let code = String::from_utf8_lossy(code);
    let ms = u64::try_from(took.as_millis()).unwrap_or(u64::MAX);
    let door = door.as_str();
    match detail {
        None => info!(guid, peer, channel, code:% = code, state, ms, door; ""),
        Some(detail) => info!(guid, peer, channel, code:% = code, state, ms, detail, door; ""),
    }
}

/// The channel's address as the request lines name it (`peer=`); `-` if unknown.
fn peer_label(sock: &TcpStream) -> String {
    sock.peer_addr()
        .map_or_else(|_| "-".to_string(), |a| a.to_string())
}

/// Reads frames from `reader` (over `conn`'s socket) and answers each in turn, until the
/// channel closes, a frame is bad or late, the relay stops, or a reload refuses the
/// channel's certificate.
fn serve_frames<S: Read + Write>(
    shared: &Shared,
    conn: &Conn<'_>,
    reader: &mut BufReader<S>,
) -> Result<(), ConnEnd> {
    let cfg = &shared.config;
    let peer = peer_label(conn.entry);
    let channel = conn.channel;
    let timeouts = Timeouts {
        idle: cfg.idle_timeout,
        frame: cfg.frame_timeout,
    };
    while let Some(msg) = read_frame(reader, conn.clock, &timeouts)? {
        if conn.refused() {
            break;
        }
        let started = Instant::now();
        let handled = transfer::handle_in(
            shared.store.as_ref(),
            &shared.core,
            shared.late.as_ref(),
            shared.recovery.mode(),
            channel,
            &msg,
        );
        metrics().request(&handled.code, channel, Door::Tcp.as_str());
        log_request(&handled, &peer, channel, started.elapsed(), Door::Tcp);
        let out = reader.get_mut();
        out.write_all(&wire::frame(&handled.reply))
            .and_then(|()| out.flush())
            .map_err(ConnEnd::Io)?;
        if shared.stopping() || conn.refused() {
            break;
        }
    }
    Ok(())
}
