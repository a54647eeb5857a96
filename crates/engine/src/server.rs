//! The relay's TCP side: an accept loop and a thread per channel connection.
//!
//! A connection is served strictly in order (read a frame, answer it, read the next), which
//! is what keeps pipelined replies in request order. Whatever one connection does — garbage,
//! a stall mid-frame, silence — costs only its own thread. Reading a frame under its
//! timeouts is `frames`; the file descriptor budget `descriptors`; the start's errors `error`.

mod descriptors;
mod error;
mod frames;
#[cfg(test)]
mod tests;

pub use descriptors::descriptors_needed;
pub use error::StartError;

use std::collections::HashMap;
use std::io::{self, BufReader, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use log::{info, warn};

use self::descriptors::{ledger_descriptors, raise_descriptor_limit};
use self::frames::{ConnEnd, read_frame};
use crate::admin::Admin;
use crate::late::LateReplies;
use crate::metrics::metrics;
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
}

struct Shared {
    store: Arc<dyn Store>,
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
/// `read`, and counted per source IP.
#[derive(Default)]
struct Conns {
    next_id: u64,
    open: HashMap<u64, Arc<TcpStream>>,
    per_peer: HashMap<IpAddr, usize>,
}

impl Shared {
    fn conns(&self) -> std::sync::MutexGuard<'_, Conns> {
        self.conns.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }
}

pub struct Relay {
    listener: TcpListener,
    shared: Arc<Shared>,
    /// The admin port, if `start_admin` was called; stopped when `serve` returns.
    admin: Option<Admin>,
}

/// Stops a running relay from another thread (a signal handler's thread, a test).
#[derive(Clone)]
pub struct ShutdownHandle {
    wake_addr: SocketAddr,
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
        let _ = TcpStream::connect_timeout(&self.wake_addr, Duration::from_secs(1));
    }
}

impl Relay {
    /// Opens the ledger, checks the core URL and binds, so that every configuration error
    /// shows before the `listening on` line.
    pub fn start(db: &Db, config: Config) -> Result<Relay, StartError> {
        crate::observers::install();
        let late_sockets = if config.late_reply.is_zero() {
            0
        } else {
            config.max_late_replies as u64
        };
        raise_descriptor_limit(
            config.max_connections,
            ledger_descriptors(db) + late_sockets,
        )?;
        let store = db
            .open(Access::Relay, "relay")
            .map_err(StartError::Ledger)?;
        let core = CoreClient::with_tls(
            &config.core_url,
            config.connect_timeout,
            config.read_timeout,
            &config.core_tls,
        )
        .map_err(StartError::Core)?;
        let listener = TcpListener::bind(&config.listen).map_err(|source| StartError::Bind {
            addr: config.listen.clone(),
            source,
        })?;
        widen_backlog(&listener);
        Ok(Relay {
            listener,
            admin: None,
            shared: Arc::new(Shared {
                late: (!config.late_reply.is_zero()).then(|| {
                    Arc::new(LateReplies::new(
                        Arc::clone(&store),
                        config.late_reply,
                        config.max_late_replies,
                    ))
                }),
                store,
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

    /// Serves `/metrics` and `/healthz` on `addr` (`--admin`) and starts sampling the
    /// ledger for the metrics; returns the bound address. Apart from the channel port: its
    /// connections count against no channel limit.
    pub fn start_admin(&mut self, addr: &str) -> Result<SocketAddr, StartError> {
        let admin_err = |source| StartError::Admin {
            addr: addr.to_string(),
            source,
        };
        let listener = Admin::bind(addr).map_err(admin_err)?;
        let admin = Admin::start(listener, Arc::clone(&self.shared.store)).map_err(admin_err)?;
        let bound = admin.local_addr();
        self.admin = Some(admin);
        Ok(bound)
    }

    pub fn shutdown_handle(&self) -> io::Result<ShutdownHandle> {
        let mut wake_addr = self.local_addr()?;
        if wake_addr.ip().is_unspecified() {
            wake_addr.set_ip(match wake_addr {
                SocketAddr::V4(_) => Ipv4Addr::LOCALHOST.into(),
                SocketAddr::V6(_) => Ipv6Addr::LOCALHOST.into(),
            });
        }
        Ok(ShutdownHandle {
            wake_addr,
            shared: Arc::clone(&self.shared),
        })
    }

    /// Accepts connections until a shutdown, then waits for every connection to finish.
    pub fn serve(self) {
        for stream in self.listener.incoming() {
            if self.shared.stopping() {
                break;
            }
            match stream {
                Ok(s) => self.admit(s),
                Err(e) => {
                    // Out of file descriptors, typically: back off instead of spinning.
                    warn!("accept failed: {e}");
                    thread::sleep(Duration::from_millis(50));
                }
            }
        }
        drop(self.listener);
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

    /// The background waiters for late replies, if `--late-reply-ms` is not zero.
    pub fn late_replies(&self) -> Option<Arc<LateReplies>> {
        self.shared.late.clone()
    }

    fn admit(&self, stream: TcpStream) {
        let Ok(peer) = stream.peer_addr() else {
            return; // already gone
        };
        let Some(slot) = Slot::take(&self.shared, peer.ip(), stream) else {
            return;
        };
        let spawned = thread::Builder::new()
            .name("conn".into())
            .stack_size(CONNECTION_STACK)
            .spawn(move || {
                // The slot is freed when this closure ends, however it ends (a panic
                // included), or when it is dropped unrun because the thread did not start.
                if let Err(e) = serve_connection(&slot.shared, &slot.stream) {
                    info!("connection {peer} closed: {e}");
                }
            });
        if let Err(e) = spawned {
            warn!("cannot start a connection thread: {e}");
        }
    }
}

/// A connection's place among the open ones; gives it back when dropped.
struct Slot {
    shared: Arc<Shared>,
    id: u64,
    peer: IpAddr,
    stream: Arc<TcpStream>,
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
            warn!("connection limit {max} reached: closed a new connection ({n} so far)");
            return None;
        }
        let per_peer = conns.per_peer.get(&peer).copied().unwrap_or(0);
        let max_peer = shared.config.max_connections_per_peer;
        if per_peer >= max_peer {
            drop(conns);
            metrics()
                .connections_refused
                .with_label_values(&["max_connections_per_peer"])
                .inc();
            let n = shared.refused_peer.fetch_add(1, Ordering::Relaxed) + 1;
            warn!(
                "per-peer connection limit {max_peer} reached for {peer}: closed a new \
                 connection ({n} so far)"
            );
            return None;
        }
        let stream = Arc::new(stream);
        conns.next_id += 1;
        let id = conns.next_id;
        conns.open.insert(id, Arc::clone(&stream));
        *conns.per_peer.entry(peer).or_default() += 1;
        metrics().connections_open.inc();
        Some(Slot {
            shared: Arc::clone(shared),
            id,
            peer,
            stream,
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut conns = self.shared.conns();
        conns.open.remove(&self.id);
        if let Some(n) = conns.per_peer.get_mut(&self.peer) {
            *n -= 1;
            if *n == 0 {
                conns.per_peer.remove(&self.peer);
            }
        }
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

fn serve_connection(shared: &Shared, stream: &TcpStream) -> Result<(), ConnEnd> {
    let cfg = &shared.config;
    let _ = stream.set_nodelay(true);
    stream
        .set_write_timeout(Some(cfg.frame_timeout))
        .map_err(ConnEnd::Io)?;
    let mut writer = stream;
    let mut reader = BufReader::new(stream);
    while let Some(msg) = read_frame(&mut reader, cfg.idle_timeout, cfg.frame_timeout)? {
        let started = Instant::now();
        let handled = transfer::handle(
            shared.store.as_ref(),
            &shared.core,
            shared.late.as_ref(),
            None,
            &msg,
        );
        metrics().request(&handled.code);
        // One line per request; the fields are key-values, so that `--log-format json`
        // carries them as keys and the text format prints `guid=… code=… state=… ms=…`.
        info!(
            guid = handled.guid.as_str(),
            code = String::from_utf8_lossy(&handled.code).as_ref(),
            state = handled.state.map_or("-", |s| s.as_str()),
            ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
            ""
        );
        writer
            .write_all(&wire::frame(&handled.reply))
            .map_err(ConnEnd::Io)?;
        if shared.stopping() {
            break;
        }
    }
    Ok(())
}
