//! The batch tools (`resolve`, `reprocess`) as an operator's cron would run them: as
//! processes, in a loop, alongside the traffic. Exit codes 0 (settled) and 3 (rows left for
//! a later run) are normal; anything else, or a run that does not end, is a finding.

use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use crate::procs::{self, ToolRun};

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

impl Tally {
    pub fn add(&mut self, name: &str, args: &[String], run: &ToolRun, at: f64) {
        self.runs += 1;
        let exit = match (run.code(), run.timed_out) {
            (_, true) => "timed out".to_string(),
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
        let normal = matches!(run.code(), Some(0 | 3));
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
}

pub fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Runs a tool once, appending its output to `log` and its result to `tally`.
#[allow(clippy::too_many_arguments)]
pub fn run_logged(
    exe: &Path,
    name: &str,
    args: &[String],
    dir: &Path,
    log: &Path,
    tally: &mut Tally,
    start: Instant,
    abort: &AtomicBool,
) {
    let at = start.elapsed().as_secs_f64();
    let run = match procs::run_tool(exe, args, dir, name, TOOL_LIMIT, abort) {
        Ok(run) => run,
        Err(e) => {
            tally.runs += 1;
            tally
                .violations
                .push(format!("{name} could not be run at t={at:.1}s: {e:#}"));
            return;
        }
    };
    if let Ok(mut f) = OpenOptions::new().create(true).append(true).open(log) {
        let _ = writeln!(
            f,
            "=== t={at:.3}s {name} {} -> {:?} in {:.3}s\n{}{}",
            args.join(" "),
            run.code(),
            run.took.as_secs_f64(),
            run.stdout,
            run.stderr
        );
    }
    tally.add(name, args, &run, at);
}

/// A tool run in a loop until `stop`: run, pause, run again.
pub struct Loop {
    pub exe: PathBuf,
    pub name: &'static str,
    pub args: Vec<String>,
    pub dir: PathBuf,
    pub log: PathBuf,
    pub pause: Duration,
}

impl Loop {
    pub fn run(&self, stop: &AtomicBool, abort: &AtomicBool, start: Instant) -> Tally {
        let mut tally = Tally::default();
        while !stop.load(Ordering::Relaxed) {
            run_logged(
                &self.exe, self.name, &self.args, &self.dir, &self.log, &mut tally, start, abort,
            );
            let until = Instant::now() + self.pause;
            while Instant::now() < until && !stop.load(Ordering::Relaxed) {
                thread::sleep(Duration::from_millis(20));
            }
        }
        tally
    }
}
