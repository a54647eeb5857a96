//! The batch tools (`resolve`, `reprocess`) as an operator's cron would run them: as
//! processes, in a loop, alongside the traffic. Exit codes 0 (settled) and 3 (rows left for
//! a later run) are normal; anything else, or a run that does not end, is a finding. One
//! exception: exit 1 (the ledger cannot be used) from a run during which the run's own
//! database server was down is what a tool is meant to do then; it is counted apart.

use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::procs::{self, ToolRun};

/// How long a run that exited 1 waits before it is judged: three looks of the writability
/// watch (`run::writable`), so that a gap it began in is already recorded.
const JUDGE_AFTER: Duration = Duration::from_millis(300);

/// A tool run longer than this is stuck (each inquiry or POST is bounded by seconds).
pub const TOOL_LIMIT: Duration = Duration::from_secs(120);

/// What the runs of one tool added up to.
#[derive(Default, Debug)]
pub struct Tally {
    pub runs: usize,
    /// Runs by exit code (`killed` for a run killed at its deadline or on abort).
    pub by_exit: BTreeMap<String, usize>,
    /// The numeric fields of the `--json` summaries, summed.
    pub totals: BTreeMap<String, u64>,
    /// Abnormal runs: exit code, stdout and the end of stderr.
    pub violations: Vec<String>,
}

/// The exit of a run that could not use the ledger while the database server was down.
pub const EXIT_DB_DOWN: &str = "1 (database down)";

impl Tally {
    /// Adds one run; `db_down`: the database server was down at some time during it.
    pub fn add(&mut self, name: &str, args: &[String], run: &ToolRun, at: f64, db_down: bool) {
        self.runs += 1;
        let excused = db_down && run.code() == Some(1) && !run.timed_out;
        let exit = match (run.code(), run.timed_out) {
            (_, true) => "timed out".to_string(),
            _ if excused => EXIT_DB_DOWN.to_string(),
            (Some(c), _) => c.to_string(),
            (None, _) => "killed".to_string(),
        };
        *self.by_exit.entry(exit.clone()).or_default() += 1;
        for line in run.stdout.lines() {
            if let Ok(serde_json::Value::Object(obj)) = serde_json::from_str(line) {
                for (k, v) in obj {
                    if k != "exit_code"
                        && let Some(n) = v.as_u64()
                    {
                        *self.totals.entry(k).or_default() += n;
                    }
                }
            }
        }
        let normal = matches!(run.code(), Some(0 | 3)) || excused;
        // A run killed on abort is ours, not the tool's fault.
        if !normal && (run.timed_out || run.code().is_some()) {
            self.violations.push(format!(
                "{name} {} at t={at:.1}s ended with {exit}\n  stdout: {}\n  stderr (end): {}",
                args.join(" "),
                run.stdout.trim(),
                tail(&run.stderr, 15).replace('\n', "\n    ")
            ));
        }
    }

    /// Adds another tally of the same tool (several loops of it).
    pub fn merge(&mut self, other: Tally) {
        self.runs += other.runs;
        for (k, n) in other.by_exit {
            *self.by_exit.entry(k).or_default() += n;
        }
        for (k, n) in other.totals {
            *self.totals.entry(k).or_default() += n;
        }
        self.violations.extend(other.violations);
    }
}

/// When the run's database server was down: (stopped, started again), `None` while it still
/// is. Empty with an embedded ledger.
#[derive(Clone, Default)]
pub struct Outages(Arc<Mutex<Vec<Window>>>);

/// One outage: (stopped, started again).
type Window = (Instant, Option<Instant>);

impl Outages {
    pub fn down(&self, at: Instant) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((at, None));
    }

    pub fn up(&self, at: Instant) {
        let mut v = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(last) = v.last_mut().filter(|o| o.1.is_none()) {
            last.1 = Some(at);
        }
    }

    /// Whether the server is down now (as far as the run knows: it stopped it).
    pub fn is_down(&self) -> bool {
        let v = self.0.lock().unwrap_or_else(|e| e.into_inner());
        v.last().is_some_and(|o| o.1.is_none())
    }

    /// Whether the server was down at some time between `from` and `to`.
    pub fn overlaps(&self, from: Instant, to: Instant) -> bool {
        let v = self.0.lock().unwrap_or_else(|e| e.into_inner());
        v.iter()
            .any(|&(down, up)| down <= to && up.is_none_or(|up| up >= from))
    }

    /// How many outages, and how long they lasted in all (an open one until now).
    pub fn summary(&self) -> (usize, Duration) {
        let v = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let total = v
            .iter()
            .map(|&(down, up)| up.unwrap_or_else(Instant::now) - down)
            .sum();
        (v.len(), total)
    }
}

pub fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Where the tools run: their output files, the run's clock, the database's outages.
#[derive(Clone)]
pub struct Bench {
    /// Each tool's stdout and stderr files (`{tag}.out`, `{tag}.err`).
    pub dir: PathBuf,
    /// `t=0` of the run.
    pub start: Instant,
    pub outages: Outages,
}

/// One tool as the run starts it.
#[derive(Clone)]
pub struct Tool {
    pub exe: PathBuf,
    /// `resolve`, `reprocess`: what its tally is filed under.
    pub name: &'static str,
    /// Its output files and its log (`{tag}.log`): unique among the tools running at once.
    pub tag: String,
    pub args: Vec<String>,
    pub log: PathBuf,
}

impl Tool {
    /// Runs the tool once, appending its output to its log and its result to `tally`.
    pub fn run_logged(&self, bench: &Bench, tally: &mut Tally, abort: &AtomicBool) {
        let name = self.name;
        let at = bench.start.elapsed().as_secs_f64();
        let began = Instant::now();
        let run = match procs::run_tool(
            &self.exe, &self.args, &bench.dir, &self.tag, TOOL_LIMIT, abort,
        ) {
            Ok(run) => run,
            Err(e) => {
                tally.runs += 1;
                tally
                    .violations
                    .push(format!("{name} could not be run at t={at:.1}s: {e:#}"));
                return;
            }
        };
        let ended = Instant::now();
        // A database the run does not own is watched from outside (`run::writable`): a run
        // that could not use it is judged once the watch has had time to see the gap.
        if run.code() == Some(1) {
            thread::sleep(JUDGE_AFTER);
        }
        let db_down = bench.outages.overlaps(began, ended);
        if let Ok(mut f) = OpenOptions::new().create(true).append(true).open(&self.log) {
            let _ = writeln!(
                f,
                "=== t={at:.3}s {name} {} -> {:?} in {:.3}s{}\n{}{}",
                self.args.join(" "),
                run.code(),
                run.took.as_secs_f64(),
                if db_down {
                    " (the database was down)"
                } else {
                    ""
                },
                run.stdout,
                run.stderr
            );
        }
        tally.add(name, &self.args, &run, at, db_down);
    }
}

/// A tool run in a loop until `stop`: run, pause, run again.
pub struct Loop {
    pub tool: Tool,
    pub bench: Bench,
    pub pause: Duration,
}

impl Loop {
    pub fn run(&self, stop: &AtomicBool, abort: &AtomicBool) -> Tally {
        let mut tally = Tally::default();
        while !stop.load(Ordering::Relaxed) {
            self.tool.run_logged(&self.bench, &mut tally, abort);
            let until = Instant::now() + self.pause;
            while Instant::now() < until && !stop.load(Ordering::Relaxed) {
                thread::sleep(Duration::from_millis(20));
            }
        }
        tally
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outages_overlap_runs_that_saw_them() {
        let o = Outages::default();
        let t0 = Instant::now();
        let s = |ms| t0 + Duration::from_millis(ms);
        assert!(!o.overlaps(s(0), s(1000)));
        o.down(s(100));
        assert!(o.overlaps(s(0), s(150)), "still down");
        assert!(o.overlaps(s(5000), s(6000)), "still down");
        o.up(s(300));
        assert!(o.overlaps(s(0), s(150)));
        assert!(o.overlaps(s(200), s(250)));
        assert!(o.overlaps(s(250), s(400)));
        assert!(!o.overlaps(s(0), s(99)));
        assert!(!o.overlaps(s(301), s(400)));
        assert_eq!(o.summary(), (1, Duration::from_millis(200)));
    }
}
