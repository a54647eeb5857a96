//! The run itself, one phase after another, each in its own module:
//!
//! 1. `start`: the ledger (an SQLite file, or a PostgreSQL cluster of the run's own), the
//!    core and the relays, the channel threads, the `resolve` and `reprocess` loops;
//! 2. `disrupt`: the kill schedule (relays, core, database server), while the traffic goes
//!    on;
//! 3. `quiesce`: stop the traffic and the tools, then settle what is left;
//! 4. `check`: the ledger, the core's books and every answer, held against each other;
//! 5. `report`: the figures, the checks, every violation with its evidence, PASS or FAIL.
//!
//! What the phases share is a [`Run`]; whatever ends it (an error, an interruption, the
//! report), dropping it stops the helper threads, kills the relays and the core, stops the
//! database server, and removes the work directory unless it was kept.

mod check;
mod disrupt;
mod quiesce;
mod report;
mod start;
mod tls;
mod writable;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use ledger::{Access, Db, Ledger, Row};
use testkit::pg;

use crate::channel::Sent;
use crate::plan::{Event, Targets};
use crate::procs::Service;
use crate::tools::{Outages, Tally};

/// The core simulator's think time for SLOW memos.
pub const SLOW_MS: u64 = 500;
/// The relay's core timeouts: reads expire before SLOW answers (→ E901/UNKNOWN).
pub const RELAY_CONNECT_MS: u64 = 200;
pub const RELAY_READ_MS: u64 = 300;
/// The relays' late replies: after the read timeout a call's connection is kept this long
/// for the core's answer, and a booking or rejection that comes settles the row UNKNOWN →
/// DONE. A SLOW answer comes SLOW_MS - RELAY_READ_MS after the timeout, well within it; the
/// window is short so that the relays' final stop, which waits for their waiters, is short
/// too, and every late reply is settled (or not) before the settling and the checks.
pub const LATE_REPLY_MS: u64 = 2000;
/// At most this many calls wait for a late reply at once, per relay (the relay's default).
pub const MAX_LATE_REPLIES: u64 = 256;
const _: () = assert!(RELAY_READ_MS < SLOW_MS && SLOW_MS - RELAY_READ_MS < LATE_REPLY_MS);
/// resolve during the run: `--min-age` above SLOW_MS, `--stale-sent` at resolve's floor.
pub const MIN_AGE_SECS: u64 = 2;
pub const STALE_SENT_SECS: u64 = 60;
/// How many `resolve` loops and `reprocess` loops run at once on a PostgreSQL ledger (one
/// each on SQLite, as an operator's cron would).
pub const PG_TOOL_LOOPS: usize = 2;

/// What holds the ledger.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Backend {
    /// An SQLite file in the work directory.
    Sqlite,
    /// A PostgreSQL cluster the run starts for itself (and restarts now and then).
    Postgres,
}

pub struct Config {
    pub secs: u64,
    pub seed: u64,
    pub channels: usize,
    pub backend: Backend,
    /// A PostgreSQL ledger the run does not own (`--db`): no database restarts by the run.
    pub external_db: Option<String>,
    /// Relays sharing the ledger, each on a port of its own.
    pub relays: usize,
    pub bin_dir: PathBuf,
    /// Where the run's temp dir goes (default: the system's temp dir).
    pub work_dir: Option<PathBuf>,
    /// resolve's `--min-age` during the run.
    pub resolve_min_age: u64,
    pub keep: bool,
    /// Channels over mutual TLS, with two identities (`tls`).
    pub tls: bool,
    /// The relays' HTTP door too, with a share of the sends through it (`http`).
    pub http: bool,
}

impl Config {
    /// What the schedule disrupts.
    pub fn targets(&self) -> Targets {
        Targets {
            relays: self.relays,
            db: self.backend == Backend::Postgres && self.external_db.is_none(),
        }
    }

    /// Whether this is the classic run (one relay, an SQLite ledger), whose output stays
    /// as it always was.
    pub fn classic(&self) -> bool {
        self.targets() == Targets::SINGLE
    }

    /// How many loops of each batch tool run alongside the traffic.
    pub fn tool_loops(&self) -> usize {
        match self.backend {
            Backend::Sqlite => 1,
            Backend::Postgres => PG_TOOL_LOOPS,
        }
    }
}

/// Runs the whole thing; `Ok(true)` when no violation was found.
pub fn run(cfg: &Config, interrupted: &AtomicBool) -> anyhow::Result<bool> {
    let mut run = Run::start(cfg, interrupted)?;
    run.disrupt()?;
    let quiet = run.quiesce()?;
    let verdict = run.check(&quiet)?;
    Ok(run.report(&quiet, &verdict))
}

/// What the phases share. Fields are dropped in this order: the helper threads are stopped
/// first, then the relays and the core are killed, the database server is stopped, and the
/// work directory goes last.
struct Run<'a> {
    cfg: &'a Config,
    /// Set by SIGINT/SIGTERM: every phase stops at its next look.
    interrupted: &'a AtomicBool,
    threads: Threads,
    /// Relay `i` always listens on the port it got at its first start.
    relays: Vec<Service>,
    core: Service,
    ledger: LedgerDb,
    bins: Bins,
    /// The kill schedule.
    events: Vec<Event>,
    /// When the database server was down (empty with SQLite); the tool loops share it.
    outages: Outages,
    /// Relays whose (re)start waits for the database server to come back.
    pending: Vec<bool>,
    /// With `--db`: relays whose start found no writable database, with when it was first
    /// and last tried (`disrupt::supervise` tries again).
    unstarted: Vec<Option<(Duration, Duration)>>,
    /// Relay starts that waited for the database server.
    deferred_starts: usize,
    /// Times the database server was started again after a stop.
    db_restarts: usize,
    /// When the core was first started: every `t=` in the output counts from here.
    start: Instant,
    /// Findings about the processes: exits we did not cause, failed restarts, panics.
    crashes: Vec<String>,
    work: Work,
}

impl Run<'_> {
    fn check_interrupted(&self) -> anyhow::Result<()> {
        if self.interrupted.load(Ordering::Relaxed) {
            bail!("interrupted");
        }
        Ok(())
    }

    fn core_url(&self) -> String {
        format!("http://{}", self.core.addr())
    }

    /// Every log of the run's processes, relays first (`relay.log`, or `relay1.log` …).
    fn logs(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .relays
            .iter()
            .map(|r| format!("{}.log", r.name))
            .collect();
        v.push("coresim.log".into());
        for name in ["resolve", "reprocess"] {
            v.extend((0..self.cfg.tool_loops()).map(|i| format!("{}.log", tool_tag(name, i))));
        }
        v
    }

    /// The arguments every batch tool run gets (`--db`, `--core`, `--json`), then `extra`.
    fn tool_args(&self, extra: &[&str]) -> Vec<String> {
        let mut v = vec![
            "--db".to_string(),
            self.ledger.arg(),
            "--core".into(),
            self.core_url(),
            "--json".into(),
        ];
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    }
}

/// Stops the helper threads however the run ends: channels are told to stop; tool loops are
/// aborted (their running child killed) and joined, so that no tool outlives the run.
struct Threads {
    stop: Arc<AtomicBool>,
    abort: Arc<AtomicBool>,
    channels: Vec<JoinHandle<Vec<Sent>>>,
    tools: Vec<(&'static str, JoinHandle<Tally>)>,
}

impl Drop for Threads {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if !self.tools.is_empty() {
            self.abort.store(true, Ordering::Relaxed);
            for (_, h) in self.tools.drain(..) {
                let _ = h.join();
            }
        }
    }
}

/// The workspace binaries the run starts.
struct Bins {
    coresim: PathBuf,
    relay: PathBuf,
    resolve: PathBuf,
    reprocess: PathBuf,
    reconcile: PathBuf,
}

impl Bins {
    fn find(dir: &Path) -> anyhow::Result<Bins> {
        let find = |name: &str| -> anyhow::Result<PathBuf> {
            let p = dir.join(name);
            if !p.is_file() {
                bail!(
                    "{} not found (build the workspace binaries, or pass --bin-dir)",
                    p.display()
                );
            }
            Ok(p)
        };
        Ok(Bins {
            coresim: find("coresim")?,
            relay: find("relay")?,
            resolve: find("resolve")?,
            reprocess: find("reprocess")?,
            reconcile: find("reconcile")?,
        })
    }
}

/// The run's temp directory and what goes in it: the ledger, the core's journal, the logs,
/// and the batch tools' output (`tools/`).
struct Work {
    tmp: tempfile::TempDir,
    dir: PathBuf,
    db: PathBuf,
    journal: PathBuf,
    tools_dir: PathBuf,
}

impl Work {
    fn new(parent: Option<&Path>) -> anyhow::Result<Work> {
        let mut builder = tempfile::Builder::new();
        builder.prefix("chaos-");
        let tmp = match parent {
            Some(parent) => builder.tempdir_in(parent),
            None => builder.tempdir(),
        }
        .context("cannot create a temp dir")?;
        let dir = tmp.path().to_path_buf();
        let tools_dir = dir.join("tools");
        std::fs::create_dir_all(&tools_dir)?;
        Ok(Work {
            db: dir.join("ledger.db"),
            journal: dir.join("core.journal"),
            tools_dir,
            dir,
            tmp,
        })
    }

    /// A tool's log (`resolve.log`, …).
    fn log(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.log"))
    }
}

fn path_arg(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// The name of relay `i` of `n`, which is also its log's: `relay` when it is the only one.
fn relay_name(i: usize, n: usize) -> String {
    if n == 1 {
        "relay".into()
    } else {
        format!("relay{}", i + 1)
    }
}

/// The tag (output files, log) of loop `i` of a tool: `resolve`, `resolve-2`, …
fn tool_tag(name: &str, i: usize) -> String {
    if i == 0 {
        name.into()
    } else {
        format!("{name}-{}", i + 1)
    }
}

/// The ledger the relays and the tools share.
enum LedgerDb {
    /// An SQLite file in the work directory.
    Sqlite(PathBuf),
    /// A schema of its own on a PostgreSQL cluster the run started (stopped when dropped),
    /// or (`server` none) a ledger the run was given (`--db`).
    Postgres {
        server: Option<pg::Server>,
        url: String,
    },
}

impl LedgerDb {
    /// A PostgreSQL cluster of the run's own, and a schema on it. Refuses in one line when
    /// PostgreSQL is not installed.
    fn postgres() -> anyhow::Result<LedgerDb> {
        let server = pg::Server::own()
            .context("--backend postgres starts a PostgreSQL cluster of its own")?;
        // After an immediate stop the server fsyncs every file of its data directory before
        // it even begins recovery: seconds, most of each restart. One syncfs(2) of the file
        // system does the same work (PostgreSQL 14 and later; older ones keep the default),
        // so that the database is down a moment, as the schedule says, not for seconds.
        let _ = server.exec("ALTER SYSTEM SET recovery_init_sync_method = 'syncfs'");
        let url = server.fresh_db();
        Ok(LedgerDb::Postgres {
            server: Some(server),
            url,
        })
    }

    /// What `--db` says.
    fn arg(&self) -> String {
        match self {
            LedgerDb::Sqlite(path) => path_arg(path),
            LedgerDb::Postgres { url, .. } => url.clone(),
        }
    }

    fn cluster(&self) -> Option<&pg::Cluster> {
        match self {
            LedgerDb::Sqlite(_) => None,
            LedgerDb::Postgres { server, .. } => server.as_ref().and_then(pg::Server::cluster),
        }
    }

    /// Every row, read as a batch tool reads the ledger (either backend, one code path).
    fn all_rows(&self) -> anyhow::Result<Vec<Row>> {
        let db: Db = self.arg().parse().context("the ledger's --db")?;
        let store = db
            .open(Access::Tool, "chaos")
            .with_context(|| format!("cannot open the ledger {db}"))?;
        store.all_rows().context("cannot read the ledger")
    }

    /// Makes every SENT row look `secs` old (for quiescing only: see the caller).
    fn age_sent_rows(&self, secs: u64) -> anyhow::Result<()> {
        self.by_hand(
            &format!("UPDATE tx SET updated_at = datetime('now', '-{secs} seconds') WHERE state = 'SENT'"),
            &format!("UPDATE tx SET updated_at = now() - make_interval(secs => {secs}) WHERE state = 'SENT'"),
        )
        .context("cannot age SENT rows")
    }

    /// Makes every failed GUID's next inquiry due now (for quiescing only: see the caller).
    fn make_inquiries_due(&self) -> anyhow::Result<()> {
        self.by_hand(
            "UPDATE tx_inquiry SET next_at = datetime('now', '-1 seconds')",
            "UPDATE tx_inquiry SET next_at = now() - interval '1 second'",
        )
        .context("cannot make inquiries due")
    }

    /// The writes the run makes by hand, in each backend's SQL.
    fn by_hand(&self, sqlite: &str, pg: &str) -> anyhow::Result<()> {
        match self {
            LedgerDb::Sqlite(path) => {
                let l = Ledger::open(path)
                    .with_context(|| format!("cannot open {}", path.display()))?;
                l.connection().execute_batch(sqlite)?;
            }
            LedgerDb::Postgres { url, .. } => {
                let mut c = postgres::Client::connect(url, postgres::NoTls).with_context(|| {
                    format!("cannot connect to {}", ledger::postgres::url::mask(url))
                })?;
                c.batch_execute(pg)?;
            }
        }
        Ok(())
    }
}
