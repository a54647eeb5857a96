//! The relay process: what `relay` runs around the engine's decisions. Its start is the
//! composition root ([`Relay::start`]: the ledger's lock, the ledger, the core client, the
//! metrics, the late-reply waiters, the recovery watch, the listeners and the admin port);
//! then an accept loop per door and a thread per channel connection (`accept`).
//!
//! A connection is served strictly in order (read a request, answer it, read the next), which
//! is what keeps pipelined replies in request order. Whatever one connection does — garbage,
//! a stall mid-frame, silence — costs only its own thread. The two doors are `tcp` (the frames
//! of contract §2, read under their timeouts by `frames`, the deadlines enforced on the socket
//! by `clock`) and `http` (the channel API of §9: its head, answer and mapping); each request
//! is logged by `access_log`. The open connections and their limits are `slot`s; what the
//! registry keeps of each, for a shutdown and for a reload's re-check, `registry`.
//!
//! With `--tls-cert` the connection thread first runs a TLS handshake (`handshake`), with a
//! configuration loaded by `tls` (and reloaded, `listener`) and, for mutual TLS, a verifier
//! that takes the channel identity from the client certificate (`identity`); the frames then
//! travel inside the session unchanged.
//!
//! Also the process's own: its metrics (`metrics`, fed by the engine through `events` and by
//! the lower layers through `observers`) and the admin port that serves them (`admin`); the
//! late-reply waiters (`late`); the recovery mark's watch (`recovery_watch`); the core probed
//! once at start (`core_probe`, `start_log`); process tuning (`allocator`, `descriptors`); the
//! start's errors (`error`).

mod accept;
mod access_log;
pub mod admin;
mod allocator;
mod clock;
pub mod core_probe;
mod descriptors;
mod error;
pub mod events;
mod every;
mod frames;
mod handshake;
mod http;
pub mod identity;
pub mod late;
mod listener;
pub mod metrics;
mod observers;
pub mod recovery_watch;
mod registry;
mod slot;
mod start_log;
mod tcp;
#[cfg(test)]
mod tests;
mod tls;

pub use descriptors::descriptors_needed;
pub use error::StartError;
pub use ledger::sqlite::lock::{LedgerLock, LockError};
pub use tls::{ListenerTls, TlsError};

use std::io;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::Duration;

use log::{info, warn};

use self::accept::{Door, accept_loop, wake_addr, widen_backlog};
use self::admin::Admin;
use self::descriptors::{ledger_descriptors, raise_descriptor_limit};
use self::events::RelayEvents;
use self::late::LateReplies;
use self::listener::ListenerState;
use self::metrics::Metrics;
use self::recovery_watch::RecoveryWatch;
use self::slot::Conns;
use core_client::CoreClient;
use core_client::tls::TlsFiles;
use engine::recovery;
use ledger::db::{Access, Db};
use ledger::store::Store;

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
    /// The commit the relay was built from, for `txrelay_build_info` (`cli::COMMIT`).
    pub commit: &'static str,
}

struct Shared {
    store: Arc<dyn Store>,
    /// Whether the ledger is recovering (CONTRACT §11), followed while the relay runs.
    recovery: RecoveryWatch,
    tls: Option<ListenerState>,
    /// This relay's metrics (also in `events`).
    metrics: Arc<Metrics>,
    /// What the engine reports to: the metrics, and the late-reply waiters if any.
    events: RelayEvents,
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
        let metrics = Arc::new(Metrics::new(config.commit));
        observers::install(&metrics);
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
            .map(|files| ListenerState::load(files, Arc::clone(&metrics)))
            .transpose()
            .map_err(StartError::Tls)?;
        if config.max_connections_per_channel.is_some() {
            metrics
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
            RecoveryWatch::start(Arc::clone(&store), Arc::clone(&metrics), recovery::POLL)
                .map_err(StartError::Ledger)?;
        let admin = match (admin_listener, config.admin.as_deref()) {
            (Some(listener), Some(addr)) => Some(
                Admin::start(
                    listener,
                    Arc::clone(&store),
                    Arc::clone(&metrics),
                    config.admin_limits,
                )
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
                events: RelayEvents {
                    metrics: Arc::clone(&metrics),
                    late: (!config.late_reply.is_zero()).then(|| {
                        Arc::new(LateReplies::new(
                            Arc::clone(&store),
                            Arc::clone(&metrics),
                            config.late_reply,
                            config.max_late_replies,
                        ))
                    }),
                },
                metrics,
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
        if let Some(late) = &self.shared.events.late {
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
        self.shared.events.late.clone()
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
