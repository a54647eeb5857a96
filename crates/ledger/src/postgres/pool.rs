//! Connections to the PostgreSQL ledger, each operation bounded by a client-side deadline.
//!
//! A server that stops answering without closing anything (a hung host, a storage freeze:
//! the kernel still accepts and acknowledges, nothing replies) must cost a request seconds,
//! never a hang. The blocking client has no per-call timeout, so each connection lives on a
//! thread of its own that runs the operations handed to it; the caller waits for the answer
//! up to the deadline. A connection that missed a deadline, or failed other than by a
//! database error, is never used again: its thread ends when its call finally returns (the
//! server came back, or the connection broke). The threads left waiting that way are
//! counted and capped, so a long hang cannot pile them up.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use postgres::{Client, Statement};
use tokio_postgres_rustls::MakeRustlsConnect;

use super::hosts::Hosts;
use super::session::set_up;
use super::sync_wait::{self, Watch};
use super::url::PgUrl;
use crate::error::{LedgerError, Result};
use crate::store::Durability;

/// A connection as the operations see it: the client and its prepared statements.
pub struct PgConn {
    pub client: Client,
    statements: HashMap<&'static str, Statement>,
    pub durability: Durability,
    /// The session's `txrelay.who`.
    pub who: String,
    /// Raised when a COMMIT's wait for the synchronous standby was cut short (`sync_wait`).
    pub watch: Watch,
}

impl PgConn {
    pub(super) fn new(client: Client, durability: Durability, who: String, watch: Watch) -> PgConn {
        PgConn {
            client,
            statements: HashMap::new(),
            durability,
            who,
            watch,
        }
    }

    /// `sql` prepared once per connection.
    pub fn prepared(
        &mut self,
        sql: &'static str,
    ) -> std::result::Result<Statement, postgres::Error> {
        if let Some(st) = self.statements.get(sql) {
            return Ok(st.clone());
        }
        let st = self.client.prepare(sql)?;
        self.statements.insert(sql, st.clone());
        Ok(st)
    }
}

type Job = Box<dyn FnOnce(&mut PgConn) + Send>;

/// An operation on a connection; it may run twice (see `run_by`), so it is `Fn`.
type Op<T> = dyn Fn(&mut PgConn) -> std::result::Result<T, postgres::Error> + Send + Sync;

/// A connection's thread, seen from the pool.
struct Worker {
    jobs: SyncSender<Job>,
}

/// How the pool's sessions are set up.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Most connections in use or idle at once (`PgStore::open` gives four of them to its
    /// batch writers, on a pool of their own).
    pub max: usize,
    /// Each operation, connecting included, must answer within this.
    pub op_deadline: Duration,
    /// `default_transaction_read_only` for every session (`inspect`).
    pub read_only: bool,
    /// Shown in `pg_stat_activity`.
    pub application_name: String,
    /// Who the history names for this pool's changes (`txrelay.who`).
    pub who: String,
}

/// How a pool's sessions plan their prepared statements (see `set_up`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plans {
    /// Each execution planned for its parameters and the table as it is then: every
    /// statement a tool may run, scans and listings included.
    Custom,
    /// One plan per statement and session, made once, with sequential scans ruled out: only
    /// for the batch writes, whose every row is found through `tx`'s primary key.
    GenericByKey,
}

pub struct Pool {
    /// The URL's hosts, each connected to on its own (`hosts`).
    hosts: Hosts,
    tls: MakeRustlsConnect,
    settings: Settings,
    plans: Plans,
    slots: Mutex<Slots>,
    returned: Condvar,
    /// Connection threads alive, abandoned ones included.
    live: Arc<AtomicUsize>,
}

struct Slots {
    idle: Vec<Worker>,
    /// Connections counted against `max`: idle, lent, or being made.
    open: usize,
}

impl Pool {
    pub fn new(url: PgUrl, tls: MakeRustlsConnect, settings: Settings, plans: Plans) -> Pool {
        Pool {
            hosts: Hosts::of(&url.config),
            tls,
            settings,
            plans,
            slots: Mutex::new(Slots {
                idle: Vec::new(),
                open: 0,
            }),
            returned: Condvar::new(),
            live: Arc::new(AtomicUsize::new(0)),
        }
    }

    fn slots(&self) -> std::sync::MutexGuard<'_, Slots> {
        self.slots.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` on a connection, within the operation deadline.
    pub fn run<T: Send + 'static>(
        &self,
        what: &'static str,
        f: impl Fn(&mut PgConn) -> std::result::Result<T, postgres::Error> + Send + Sync + 'static,
    ) -> Result<T> {
        self.run_by(what, Instant::now() + self.settings.op_deadline, f)
    }

    /// Runs `f` on a connection, answering by `deadline` whatever the server does. A
    /// connection found broken (the server restarted, the network cut) is dropped with every
    /// idle one (they are most likely broken too), and `f` runs once more on a new
    /// connection if time is left: safe for every change of a row, each guarded and taking
    /// effect at most once. A write that adds a row (a settlement request, evidence, a ledger
    /// event, a failed inquiry's count) may then add it twice: a duplicate in the record,
    /// never a loss, and never a second booking (a second request's approval finds its row
    /// changed).
    pub fn run_by<T: Send + 'static>(
        &self,
        what: &'static str,
        deadline: Instant,
        f: impl Fn(&mut PgConn) -> std::result::Result<T, postgres::Error> + Send + Sync + 'static,
    ) -> Result<T> {
        self.run_noting_rerun(what, deadline, f).map(|(v, _)| v)
    }

    /// `run_by`, saying whether `f` had to run a second time: a claim that loses on its
    /// second run may have been won by its first, whose commit outcome is unknown.
    pub fn run_noting_rerun<T: Send + 'static>(
        &self,
        what: &'static str,
        deadline: Instant,
        f: impl Fn(&mut PgConn) -> std::result::Result<T, postgres::Error> + Send + Sync + 'static,
    ) -> Result<(T, bool)> {
        let f: Arc<Op<T>> = Arc::new(f);
        match self.try_serializable(what, deadline, &f) {
            Err(LedgerError::Pg(e)) if e.as_db_error().is_none() && Instant::now() < deadline => {
                self.drop_idle();
                self.try_serializable(what, deadline, &f).map(|v| (v, true))
            }
            other => other.map(|v| (v, false)),
        }
    }

    /// `try_once`, run again while the server aborts it as a serialization failure or a
    /// deadlock and time is left: the server rolled the whole transaction back, so nothing
    /// of it took effect (unlike a broken connection, this is no doubt about a commit), and
    /// the next run, on a new snapshot, decides. Only SERIALIZABLE (or REPEATABLE READ)
    /// sessions, and deadlocks, meet such aborts; the ledger's own sessions are READ
    /// COMMITTED unless the database says otherwise.
    fn try_serializable<T: Send + 'static>(
        &self,
        what: &'static str,
        deadline: Instant,
        f: &Arc<Op<T>>,
    ) -> Result<T> {
        let mut pause = Duration::from_millis(1);
        loop {
            match self.try_once(what, deadline, Arc::clone(f)) {
                Err(LedgerError::Pg(e))
                    if is_aborted_for_concurrency(&e) && Instant::now() + pause < deadline =>
                {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(50));
                }
                other => return other,
            }
        }
    }

    /// Each operation's deadline (`Settings::op_deadline`).
    pub fn op_deadline(&self) -> Duration {
        self.settings.op_deadline
    }

    /// The operation deadline from now.
    pub fn deadline(&self) -> Instant {
        Instant::now() + self.settings.op_deadline
    }

    fn try_once<T: Send + 'static>(
        &self,
        what: &'static str,
        deadline: Instant,
        f: Arc<Op<T>>,
    ) -> Result<T> {
        let started = Instant::now();
        let worker = self.checkout(what, deadline)?;
        let (tx, rx) = mpsc::sync_channel(1);
        let job: Job = Box::new(move |c| {
            let _ = tx.send((f(c), c.watch.take()));
        });
        if worker.jobs.send(job).is_err() {
            self.forget();
            return Err(LedgerError::Unavailable(format!(
                "{what}: the database connection ended"
            )));
        }
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            // Whatever it returned: the session's commits are in doubt, so it is closed.
            Ok((_, true)) => {
                self.forget();
                Err(sync_wait::not_replicated(what))
            }
            Ok((Ok(v), false)) => {
                self.checkin(worker);
                Ok(v)
            }
            Ok((Err(e), false)) => {
                // A database error (a constraint, a cancelled statement) leaves the session
                // usable; anything else (I/O, a closed connection) does not.
                if e.as_db_error().is_some() && !e.is_closed() {
                    self.checkin(worker);
                } else {
                    self.forget();
                }
                Err(LedgerError::Pg(e))
            }
            Err(_) => {
                self.forget(); // dropping `worker` lets its thread end once the call returns
                Err(LedgerError::Deadline {
                    what,
                    after: started.elapsed(),
                })
            }
        }
    }

    /// Drops every idle connection (their threads end at once).
    fn drop_idle(&self) {
        let mut slots = self.slots();
        let n = slots.idle.len();
        slots.idle.clear();
        slots.open -= n;
        drop(slots);
        self.returned.notify_all();
    }

    /// Holds every connection the pool may have at once and reads each one's durability.
    pub fn durability_of_all(&self) -> Result<Vec<Durability>> {
        let deadline = Instant::now() + self.settings.op_deadline;
        let mut held = Vec::new();
        let mut out = Vec::new();
        let mut failed = None;
        for _ in 0..self.settings.max {
            match self.checkout("reading settings", deadline) {
                Ok(w) => held.push(w),
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        for w in held {
            let (tx, rx) = mpsc::sync_channel(1);
            let job: Job = Box::new(move |c| {
                let _ = tx.send(c.durability.clone());
            });
            let sent = w.jobs.send(job).is_ok();
            match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(d) if sent => {
                    out.push(d);
                    self.checkin(w);
                }
                _ => self.forget(),
            }
        }
        match failed {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }

    fn checkin(&self, worker: Worker) {
        self.slots().idle.push(worker);
        self.returned.notify_one();
    }

    /// A lent connection is gone for good.
    fn forget(&self) {
        self.slots().open -= 1;
        self.returned.notify_one();
    }

    fn checkout(&self, what: &'static str, deadline: Instant) -> Result<Worker> {
        let mut slots = self.slots();
        loop {
            if let Some(w) = slots.idle.pop() {
                return Ok(w);
            }
            if slots.open < self.settings.max {
                if self.live.load(Ordering::SeqCst) >= 2 * self.settings.max {
                    return Err(LedgerError::Unavailable(format!(
                        "{what}: {} database connections are stuck waiting for the server",
                        self.live.load(Ordering::SeqCst)
                    )));
                }
                slots.open += 1;
                drop(slots);
                return self.connect(what, deadline).inspect_err(|_| self.forget());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(LedgerError::PoolExhausted);
            }
            slots = self
                .returned
                .wait_timeout(slots, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// A connection, set up, within `deadline`: each host on a thread of its own, in the
    /// order `Hosts::order` gives, the next one started when one fails or has not answered
    /// within its share of the deadline (`Hosts::stagger`); the first set up wins, and the
    /// others, if they ever connect, close at once.
    fn connect(&self, what: &'static str, deadline: Instant) -> Result<Worker> {
        let started = Instant::now();
        let (ready_tx, ready_rx) = mpsc::channel::<(usize, Result<()>)>();
        let order = self.hosts.order();
        let stagger = self.hosts.stagger(self.settings.op_deadline);
        let mut attempts: HashMap<usize, Worker> = HashMap::new();
        let mut failures: Vec<(usize, LedgerError)> = Vec::new();
        let (mut tried, mut next_at) = (0, started);
        loop {
            let now = Instant::now();
            if tried < order.len() && (now >= next_at || attempts.len() == failures.len()) {
                let i = order[tried];
                tried += 1;
                attempts.insert(i, self.attempt(what, i, ready_tx.clone())?);
                next_at = now + stagger;
            }
            let until = if tried < order.len() {
                next_at.min(deadline)
            } else {
                deadline
            };
            match ready_rx.recv_timeout(until.saturating_duration_since(Instant::now())) {
                Ok((i, Ok(()))) => {
                    self.hosts.worked(i);
                    return Ok(attempts.remove(&i).expect("an attempt of ours"));
                }
                Ok((i, Err(e))) => {
                    failures.push((i, e));
                    if failures.len() == order.len() {
                        return Err(self.hosts.none_connected(failures));
                    }
                }
                Err(_) if Instant::now() >= deadline => {
                    return Err(LedgerError::Deadline {
                        what: "connecting to the database",
                        after: started.elapsed(),
                    });
                }
                Err(_) => {}
            }
        }
    }

    /// Starts a thread that connects to host `i` and sets its session up, then says so on
    /// `ready` (with `i`) and serves the jobs of the worker returned, if that is still
    /// wanted; else it closes the connection.
    fn attempt(
        &self,
        what: &'static str,
        i: usize,
        ready: mpsc::Sender<(usize, Result<()>)>,
    ) -> Result<Worker> {
        let (jobs_tx, jobs_rx) = mpsc::sync_channel::<Job>(1);
        let mut config = self.hosts.config(i).clone();
        config
            .connect_timeout(self.settings.op_deadline)
            .keepalives(true)
            .keepalives_idle(Duration::from_secs(30))
            .application_name(&self.settings.application_name);
        let watch = sync_wait::watch(&mut config);
        let tls = self.tls.clone();
        let (settings, plans) = (self.settings.clone(), self.plans);
        let live = Arc::clone(&self.live);
        live.fetch_add(1, Ordering::SeqCst);
        let spawned = std::thread::Builder::new()
            .name("ledger-pg".into())
            .stack_size(256 * 1024)
            .spawn(move || {
                let _alive = LiveGuard(live);
                let conn = config
                    .connect(tls)
                    .map_err(LedgerError::Pg)
                    .and_then(|client| set_up(client, &settings, plans, watch));
                match conn {
                    Ok(conn) => {
                        if ready.send((i, Ok(()))).is_ok() {
                            serve(conn, &jobs_rx);
                        }
                    }
                    Err(e) => {
                        let _ = ready.send((i, Err(e)));
                    }
                }
            });
        match spawned {
            Ok(_) => Ok(Worker { jobs: jobs_tx }),
            Err(e) => {
                self.live.fetch_sub(1, Ordering::SeqCst);
                Err(LedgerError::Unavailable(format!(
                    "{what}: cannot start a database connection thread: {e}"
                )))
            }
        }
    }
}

/// Whether the server aborted the transaction of `e` because of a concurrent one (SQLSTATE
/// 40001 serialization failure, 40P01 deadlock): rolled back, nothing of it committed.
fn is_aborted_for_concurrency(e: &postgres::Error) -> bool {
    use postgres::error::SqlState;
    matches!(
        e.code(),
        Some(c) if *c == SqlState::T_R_SERIALIZATION_FAILURE || *c == SqlState::T_R_DEADLOCK_DETECTED
    )
}

/// Counts a connection thread as alive until it ends.
struct LiveGuard(Arc<AtomicUsize>);

impl Drop for LiveGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

fn serve(mut conn: PgConn, jobs: &Receiver<Job>) {
    while let Ok(job) = jobs.recv() {
        job(&mut conn);
        if conn.client.is_closed() {
            return;
        }
    }
}

/// The session's server-side timeouts, both `limit`: `statement_timeout` and `lock_timeout`.
pub(super) fn timeouts(limit: Duration) -> String {
    let ms = limit.as_millis();
    format!("SET statement_timeout = {ms}; SET lock_timeout = {ms};")
}
