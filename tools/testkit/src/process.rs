//! Processes the tests start: servers that announce `listening on HOST:PORT` (relay,
//! coresim, a wrapper script), killed when dropped, and commands run to their end within a
//! time limit (`Run`). Whatever a failing test started prints its argv, status and stderr,
//! so that a CI log says what happened.

use std::fs::File;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::{bin, spawn_listening};

/// How long a server may take to announce itself, and a command to finish by default.
const START_LIMIT: Duration = Duration::from_secs(30);
const RUN_LIMIT: Duration = Duration::from_secs(60);

/// A started process that announced `listening on HOST:PORT`. Killed on drop; its stderr
/// (kept in a file) is printed if the test is failing.
pub struct Server {
    pub addr: String,
    argv: Vec<String>,
    child: Child,
    stderr_path: PathBuf,
    _dir: tempfile::TempDir,
}

impl Server {
    /// The workspace binary `name` with `args`.
    pub fn spawn(name: &str, args: &[&str]) -> Server {
        let mut cmd = Command::new(bin(name));
        cmd.args(args);
        Server::start(cmd)
    }

    /// Any command that announces itself (a wrapper script, a relay under `ulimit`).
    pub fn start(mut cmd: Command) -> Server {
        let argv = argv_of(&cmd);
        let dir = tempfile::tempdir().expect("temp dir");
        let stderr_path = dir.path().join("stderr");
        cmd.stderr(File::create(&stderr_path).expect("stderr file"));
        match spawn_listening(&mut cmd, START_LIMIT) {
            Ok((child, addr)) => Server {
                addr,
                argv,
                child,
                stderr_path,
                _dir: dir,
            },
            Err(e) => panic!(
                "{e:#}\nargv: {argv:?}\nstderr:\n{}",
                std::fs::read_to_string(&stderr_path).unwrap_or_default()
            ),
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends `sig` (e.g. `-TERM`) with kill(1).
    pub fn signal(&self, sig: &str) {
        signal(self.pid(), sig);
    }

    /// Kills the process (SIGKILL) and waits for it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Still running (not exited).
    pub fn alive(&mut self) -> bool {
        self.child.try_wait().expect("try_wait").is_none()
    }

    /// The process's thread count (`Threads:` in /proc/PID/status).
    pub fn threads(&self) -> usize {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("the process's /proc status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("Threads:"))
            .and_then(|n| n.trim().parse().ok())
            .expect("a Threads: line")
    }

    /// Waits (up to 10 s) until the thread count is back to at most `base` + 1 (threads
    /// left waiting on something that failed have ended). The count then.
    pub fn threads_back_to(&self, base: usize) -> usize {
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.threads() > base + 1 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        self.threads()
    }

    /// Waits for the process to exit by itself, up to `limit`.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Some(st) = self.child.try_wait().expect("try_wait") {
                return Some(st);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
        if std::thread::panicking() {
            eprintln!("--- {:?}\n--- stderr:\n{}", self.argv, self.stderr());
        }
    }
}

/// Sends `sig` (e.g. `-TERM`, `-INT`) to `pid` with kill(1).
pub fn signal(pid: u32, sig: &str) {
    let st = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(st.success(), "kill {sig} {pid}: {st:?}");
}

/// A command run to its end: its exit code and output. Output goes to files, so that a
/// process that never exits cannot block the test on a pipe; one still running at the
/// limit gets SIGINT (so that it can stop what it started), then SIGKILL 10 s later.
#[derive(Debug)]
pub struct Run {
    pub argv: Vec<String>,
    /// `None`: killed at the limit, or ended by a signal.
    pub code: Option<i32>,
    stdout: String,
    stderr: String,
    took: Duration,
}

impl Run {
    /// The workspace binary `name`, in the test runner's environment.
    pub fn new(name: &str, args: &[&str]) -> Run {
        Run::with_env(name, args, &[])
    }

    /// The workspace binary `name`, with `env` added.
    pub fn with_env(name: &str, args: &[&str], env: &[(&str, &str)]) -> Run {
        let mut cmd = Command::new(bin(name));
        cmd.args(args).envs(env.iter().copied());
        Run::command(cmd, RUN_LIMIT)
    }

    /// Any command, within `limit`.
    pub fn command(mut cmd: Command, limit: Duration) -> Run {
        let argv = argv_of(&cmd);
        let dir = tempfile::tempdir().expect("temp dir");
        let (out, err) = (dir.path().join("stdout"), dir.path().join("stderr"));
        let started = Instant::now();
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(File::create(&out).expect("stdout file"))
            .stderr(File::create(&err).expect("stderr file"))
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {argv:?}: {e}"));
        let mut interrupted = None;
        let code = loop {
            if let Some(st) = child.try_wait().expect("try_wait") {
                break st.code();
            }
            match interrupted {
                None if started.elapsed() >= limit => {
                    let _ = Command::new("kill")
                        .args(["-INT", &child.id().to_string()])
                        .status();
                    interrupted = Some(Instant::now());
                }
                Some(at) if at.elapsed() >= Duration::from_secs(10) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    break None;
                }
                _ => {}
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        Run {
            argv,
            code: if interrupted.is_some() { None } else { code },
            stdout: std::fs::read_to_string(out).unwrap_or_default(),
            stderr: std::fs::read_to_string(err).unwrap_or_default(),
            took: started.elapsed(),
        }
    }

    pub fn stdout(&self) -> &str {
        &self.stdout
    }

    pub fn stderr(&self) -> &str {
        &self.stderr
    }

    /// How long it ran.
    pub fn took(&self) -> Duration {
        self.took
    }

    /// Asserts the exit code, with everything needed to understand a mismatch.
    pub fn expect_code(&self, want: u8) -> &Run {
        assert_eq!(
            self.code,
            Some(i32::from(want)),
            "{:?} exited {:?} after {:?} (None: killed at the limit or by a signal)\n\
             stdout:\n{}\nstderr:\n{}",
            self.argv,
            self.code,
            self.took,
            self.stdout,
            self.stderr
        );
        self
    }

    /// stdout as the one JSON object `--json` prints.
    pub fn json(&self) -> Value {
        let out = self.stdout.trim_end();
        assert_eq!(
            out.lines().count(),
            1,
            "{:?}: one JSON line, got {out:?}",
            self.argv
        );
        serde_json::from_str(out).unwrap_or_else(|e| panic!("{:?}: {e}: {out:?}", self.argv))
    }
}

fn argv_of(cmd: &Command) -> Vec<String> {
    std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|s| s.to_string_lossy().into_owned())
        .collect()
}
