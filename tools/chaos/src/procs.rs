//! Child processes: the two servers (relay, core simulator), killed and restarted on the
//! port they first got, and the batch tools, run to completion with a deadline.
//!
//! Every child is owned by a guard that SIGKILLs and reaps it when dropped, so that no exit
//! path of the run (error, panic, interruption) leaves one behind. Only the pids spawned
//! here are ever signalled.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use testkit::spawn_listening;

/// How long a server may take to print `listening on …`.
const START_TIMEOUT: Duration = Duration::from_secs(20);
/// How long a restart on a fixed port keeps retrying while the port is still taken.
const REBIND_TIMEOUT: Duration = Duration::from_secs(10);

/// A child that is SIGKILLed and reaped when dropped.
pub struct Guard(Option<Child>);

impl Guard {
    pub fn new(child: Child) -> Guard {
        Guard(Some(child))
    }

    pub fn try_wait(&mut self) -> Option<ExitStatus> {
        let child = self.0.as_mut()?;
        match child.try_wait() {
            Ok(Some(st)) => {
                self.0 = None;
                Some(st)
            }
            _ => None,
        }
    }

    /// The pid, while the child is neither reaped nor killed (so that it is still ours).
    pub fn id(&self) -> Option<u32> {
        self.0.as_ref().map(Child::id)
    }

    pub fn kill(&mut self) {
        if let Some(mut child) = self.0.take() {
            // Child::kill is SIGKILL on Unix, to this pid only.
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A server that announces `listening on HOST:PORT`: started on port 0 the first time and
/// on that same address after every kill.
pub struct Service {
    /// Also its log's name (`relay.log`).
    pub name: String,
    exe: PathBuf,
    args: Vec<String>,
    dir: PathBuf,
    /// `127.0.0.1:0` until the first start, then the address it got.
    listen: String,
    child: Option<Guard>,
    pub starts: usize,
    pub kills: usize,
    /// Exits we did not cause (a crash): each one is a finding.
    pub crashes: Vec<String>,
}

impl Service {
    pub fn new(name: &str, exe: PathBuf, args: Vec<String>, dir: &Path) -> Service {
        Service {
            name: name.to_string(),
            exe,
            args,
            dir: dir.to_path_buf(),
            listen: "127.0.0.1:0".into(),
            child: None,
            starts: 0,
            kills: 0,
            crashes: Vec::new(),
        }
    }

    /// The address it listens on (known after the first start).
    pub fn addr(&self) -> &str {
        &self.listen
    }

    pub fn log_path(&self) -> PathBuf {
        self.dir.join(format!("{}.log", self.name))
    }

    /// Starts the server and waits for its `listening on` line. On a fixed port, retries
    /// for a while if the port is still taken.
    pub fn start(&mut self, at: Duration) -> anyhow::Result<()> {
        if self.child.is_some() {
            return Ok(());
        }
        let deadline = Instant::now() + REBIND_TIMEOUT;
        let mut tries = 0;
        loop {
            tries += 1;
            match self.start_once(at) {
                Ok(()) => return Ok(()),
                Err(e) if self.listen.ends_with(":0") || Instant::now() >= deadline => {
                    return Err(e.context(format!(
                        "{} did not start on {} ({tries} tries)",
                        self.name, self.listen
                    )));
                }
                Err(_) => thread::sleep(Duration::from_millis(100)),
            }
        }
    }

    fn start_once(&mut self, at: Duration) -> anyhow::Result<()> {
        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .context("cannot open a log file")?;
        writeln!(
            log,
            "=== chaos: starting {} on {} at t={:.3}s",
            self.name,
            self.listen,
            at.as_secs_f64()
        )?;
        let mut cmd = Command::new(&self.exe);
        cmd.args(&self.args)
            .args(["--listen", &self.listen])
            .env("RUST_LOG", "info")
            .stderr(log);
        let (child, addr) = spawn_listening(&mut cmd, START_TIMEOUT)
            .with_context(|| format!("{}: see {}", self.name, self.log_path().display()))?;
        let guard = Guard::new(child);
        if !self.listen.ends_with(":0") && addr != self.listen {
            bail!("{} listens on {addr}, not on {}", self.name, self.listen);
        }
        self.listen = addr;
        self.child = Some(guard);
        self.starts += 1;
        Ok(())
    }

    /// SIGKILL, then reap.
    pub fn kill(&mut self) {
        if let Some(mut g) = self.child.take() {
            g.kill();
            self.kills += 1;
        }
    }

    /// The final stop, as a supervisor makes it: SIGTERM, then up to `grace` for the server
    /// to finish what it is doing (a relay: its requests in flight, then its late-reply
    /// waiters) and exit; SIGKILL after that. `None`: it was not running.
    pub fn stop(&mut self, grace: Duration) -> Option<Stopped> {
        let mut guard = self.child.take()?;
        // Not reaped yet, so the pid cannot have gone to another process.
        let pid = guard.id()?.to_string();
        let began = Instant::now();
        let sent = Command::new("kill")
            .args(["-s", "TERM", &pid])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        if !sent.as_ref().is_ok_and(ExitStatus::success) {
            guard.kill();
            self.kills += 1;
            return Some(Stopped::Killed(format!(
                "`kill -s TERM {pid}` failed ({sent:?}), so it was SIGKILLed"
            )));
        }
        loop {
            if let Some(st) = guard.try_wait() {
                return Some(Stopped::Exited(st, began.elapsed()));
            }
            if began.elapsed() >= grace {
                guard.kill();
                self.kills += 1;
                return Some(Stopped::Killed(format!(
                    "still running {:.1} s after SIGTERM, so it was SIGKILLed",
                    grace.as_secs_f64()
                )));
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// Notices an exit we did not cause; returns its description.
    pub fn check_crash(&mut self, at: Duration) -> Option<String> {
        let st = self.child.as_mut()?.try_wait()?;
        self.child = None;
        let what = format!(
            "{} (pid was running since start #{}) exited by itself with {st} at t={:.1}s; see {}",
            self.name,
            self.starts,
            at.as_secs_f64(),
            self.log_path().display()
        );
        self.crashes.push(what.clone());
        Some(what)
    }
}

/// How a server's final stop went.
#[derive(Debug)]
pub enum Stopped {
    /// It exited after SIGTERM, with this status, this long after it.
    Exited(ExitStatus, Duration),
    /// It had to be SIGKILLed: why.
    Killed(String),
}

/// One finished run of a batch tool.
pub struct ToolRun {
    pub status: Option<ExitStatus>,
    pub stdout: String,
    pub stderr: String,
    pub timed_out: bool,
    pub took: Duration,
}

impl ToolRun {
    pub fn code(&self) -> Option<i32> {
        self.status.and_then(|s| s.code())
    }
}

/// Runs a batch tool to its end, with its output in files under `dir` (no pipe can fill up
/// and block it), killing it after `limit` or as soon as `abort` is set.
pub fn run_tool(
    exe: &Path,
    args: &[String],
    dir: &Path,
    tag: &str,
    limit: Duration,
    abort: &AtomicBool,
) -> anyhow::Result<ToolRun> {
    let out_path = dir.join(format!("{tag}.out"));
    let err_path = dir.join(format!("{tag}.err"));
    let child = Command::new(exe)
        .args(args)
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(File::create(&out_path)?)
        .stderr(File::create(&err_path)?)
        .spawn()
        .with_context(|| format!("cannot run {}", exe.display()))?;
    let mut guard = Guard::new(child);
    let began = Instant::now();
    let deadline = began + limit;
    let mut timed_out = false;
    let status = loop {
        if let Some(st) = guard.try_wait() {
            break Some(st);
        }
        if abort.load(Ordering::Relaxed) {
            guard.kill();
            break None;
        }
        if Instant::now() >= deadline {
            timed_out = true;
            guard.kill();
            break None;
        }
        thread::sleep(Duration::from_millis(10));
    };
    Ok(ToolRun {
        status,
        stdout: fs::read_to_string(&out_path).unwrap_or_default(),
        stderr: fs::read_to_string(&err_path).unwrap_or_default(),
        timed_out,
        took: began.elapsed(),
    })
}
