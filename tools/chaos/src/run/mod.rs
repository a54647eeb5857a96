//! The run itself, one phase after another, each in its own module:
//!
//! 1. `start`: the core and the relay, the channel threads, the `resolve` and `reprocess`
//!    loops;
//! 2. `disrupt`: the kill schedule, while the traffic goes on;
//! 3. `quiesce`: stop the traffic and the tools, then settle what is left;
//! 4. `check`: the ledger, the core's books and every answer, held against each other;
//! 5. `report`: the figures, the checks, every violation with its evidence, PASS or FAIL.
//!
//! What the phases share is a [`Run`]; whatever ends it (an error, an interruption, the
//! report), dropping it stops the helper threads, kills the relay and the core, and removes
//! the work directory unless it was kept.

mod check;
mod disrupt;
mod quiesce;
mod report;
mod start;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Instant;

use anyhow::{Context, bail};

use crate::channel::Sent;
use crate::plan::Event;
use crate::procs::Service;
use crate::tools::Tally;

/// The core simulator's think time for SLOW memos.
pub const SLOW_MS: u64 = 500;
/// The relay's core timeouts: reads expire before SLOW answers (→ E901/UNKNOWN).
pub const RELAY_CONNECT_MS: u64 = 200;
pub const RELAY_READ_MS: u64 = 300;
/// resolve during the run: `--min-age` above SLOW_MS, `--stale-sent` at resolve's floor.
pub const MIN_AGE_SECS: u64 = 2;
pub const STALE_SENT_SECS: u64 = 60;

pub struct Config {
    pub secs: u64,
    pub seed: u64,
    pub channels: usize,
    pub bin_dir: PathBuf,
    /// Where the run's temp dir goes (default: the system's temp dir).
    pub work_dir: Option<PathBuf>,
    /// resolve's `--min-age` during the run.
    pub resolve_min_age: u64,
    pub keep: bool,
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
/// first, then the relay and the core are killed, and the work directory goes last.
struct Run<'a> {
    cfg: &'a Config,
    /// Set by SIGINT/SIGTERM: every phase stops at its next look.
    interrupted: &'a AtomicBool,
    threads: Threads,
    relay: Service,
    core: Service,
    bins: Bins,
    /// The kill schedule.
    events: Vec<Event>,
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

    /// The arguments every batch tool run gets (`--db`, `--core`, `--json`), then `extra`.
    fn tool_args(&self, extra: &[&str]) -> Vec<String> {
        let mut v = vec![
            "--db".to_string(),
            path_arg(&self.work.db),
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
