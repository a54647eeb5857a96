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

use super::url::PgUrl;
use crate::error::{LedgerError, Result};
use crate::store::{DURABLE_COMMIT, Durability};

/// A connection as the operations see it: the client and its prepared statements.
pub struct PgConn {
    pub client: Client,
    statements: HashMap<&'static str, Statement>,
    pub durability: Durability,
    /// The session's `txrelay.who`.
    pub who: String,
}

impl PgConn {
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
    url: PgUrl,
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
            url,
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
    /// connection if time is left: safe, because every statement of the ledger is guarded
    /// and can take effect at most once.
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
            let _ = tx.send(f(c));
        });
        if worker.jobs.send(job).is_err() {
            self.forget();
            return Err(LedgerError::Unavailable(format!(
                "{what}: the database connection ended"
            )));
        }
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(Ok(v)) => {
                self.checkin(worker);
                Ok(v)
            }
            Ok(Err(e)) => {
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

    /// Starts a connection's thread and waits (up to `deadline`) until it is connected and
    /// its session is set up.
    fn connect(&self, what: &'static str, deadline: Instant) -> Result<Worker> {
        let started = Instant::now();
        let (jobs_tx, jobs_rx) = mpsc::sync_channel::<Job>(1);
        let (ready_tx, ready_rx) = mpsc::sync_channel::<Result<()>>(1);
        let mut config = self.url.config.clone();
        config
            .connect_timeout(self.settings.op_deadline)
            .keepalives(true)
            .keepalives_idle(Duration::from_secs(30))
            .application_name(&self.settings.application_name);
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
                    .and_then(|client| set_up(client, &settings, plans));
                match conn {
                    Ok(conn) => {
                        if ready_tx.send(Ok(())).is_ok() {
                            serve(conn, &jobs_rx);
                        }
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                    }
                }
            });
        if let Err(e) = spawned {
            self.live.fetch_sub(1, Ordering::SeqCst);
            return Err(LedgerError::Unavailable(format!(
                "{what}: cannot start a database connection thread: {e}"
            )));
        }
        match ready_rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(Ok(())) => Ok(Worker { jobs: jobs_tx }),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(LedgerError::Deadline {
                what: "connecting to the database",
                after: started.elapsed(),
            }),
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

/// A new session: commits durable whatever the role, the database or the server says
/// (`synchronous_commit` set to `on` unless it is one of `DURABLE_COMMIT` already, then read
/// back and checked), server-side timeouts as a backstop to ours, read-only if asked, and
/// its statements planned as `plans` says.
///
/// `Plans::Custom` (`plan_cache_mode = force_custom_plan`): the session's prepared
/// statements are planned for each execution, with its parameters and the table as it is
/// then. PostgreSQL's default may settle, after five executions, on one generic plan for
/// the life of the session, made for the table as it was: on a new ledger (a few rows) that
/// plan finds a result's row by scanning the whole `tx` table, and keeps doing so as the
/// table grows, until autovacuum's next ANALYZE.
///
/// `Plans::GenericByKey` (`force_generic_plan` and `enable_seqscan = off`): planning a batch
/// statement cost more than running it (about 0.1 ms of the server's CPU per statement here,
/// see docs/performance.md), so the batch writers' sessions plan each statement once. Such a
/// plan is made for whatever the table was then, and is safe only because no plan of those
/// statements can read more of `tx` than the rows it names: the claim's insert finds its
/// conflicts through the primary key, the result's update names its rows in
/// `tx.guid = ANY($1)`, which leaves the planner the primary key (or a bitmap of it) as
/// the only way into `tx` once sequential scans are ruled out.
fn set_up(mut client: Client, s: &Settings, plans: Plans) -> Result<PgConn> {
    let mut sql = timeouts(s.op_deadline);
    sql.push_str("SET client_min_messages = warning;");
    sql.push_str(match plans {
        Plans::Custom => "SET plan_cache_mode = force_custom_plan;",
        Plans::GenericByKey => {
            "SET plan_cache_mode = force_generic_plan; SET enable_seqscan = off;"
        }
    });
    if s.read_only {
        sql.push_str("SET default_transaction_read_only = on;");
    }
    client.batch_execute(&sql).map_err(LedgerError::Pg)?;
    client
        .execute("SELECT set_config('txrelay.who', $1, false)", &[&s.who])
        .map_err(LedgerError::Pg)?;
    let show = |c: &mut Client| -> Result<String> {
        c.query_one("SHOW synchronous_commit", &[])
            .and_then(|r| r.try_get::<_, String>(0))
            .map_err(LedgerError::Pg)
    };
    let mut sync = show(&mut client)?;
    if !DURABLE_COMMIT.contains(&sync.as_str()) {
        client
            .batch_execute("SET synchronous_commit = on")
            .map_err(LedgerError::Pg)?;
        sync = show(&mut client)?;
    }
    Ok(PgConn {
        client,
        statements: HashMap::new(),
        durability: durable(sync)?,
        who: s.who.clone(),
    })
}

/// The session's durability as `synchronous_commit` was read back, refused unless durable.
fn durable(synchronous_commit: String) -> Result<Durability> {
    let durability = Durability::Postgres { synchronous_commit };
    if !durability.is_durable() {
        return Err(LedgerError::NotDurable(format!("{durability:?}")));
    }
    Ok(durability)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a session reads back after the SET: `on` and `remote_apply` serve, anything
    /// else (a server that ignored the SET) is refused.
    #[test]
    fn only_on_and_remote_apply_are_durable() {
        for ok in ["on", "remote_apply"] {
            assert!(durable(ok.into()).is_ok(), "{ok}");
        }
        for weak in ["off", "local", "remote_write", "ON", ""] {
            let e = durable(weak.into()).expect_err(weak);
            assert!(matches!(e, LedgerError::NotDurable(_)), "{weak}: {e:?}");
            assert!(e.to_string().contains("would not be durable"), "{e}");
        }
    }
}
