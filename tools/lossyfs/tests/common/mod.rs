//! The harness of the mount tests: a `lossyfs` process on temp folders, its control socket,
//! and the skip when FUSE cannot be had (a failure instead when REQUIRE_FUSE is set).

#![allow(dead_code)] // each test binary uses a part

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{OnceLock, mpsc};
use std::thread;
use std::time::{Duration, Instant};

/// Whether the mount tests can run here: /dev/fuse, root, and a probe mount that works. If
/// not, prints why (one line) and the test returns; with REQUIRE_FUSE set it fails instead.
pub fn fuse_or_skip(test: &str) -> bool {
    static PROBE: OnceLock<Result<(), String>> = OnceLock::new();
    match PROBE.get_or_init(probe) {
        Ok(()) => true,
        Err(why) if std::env::var_os("REQUIRE_FUSE").is_some() => {
            panic!("{test}: REQUIRE_FUSE is set but FUSE cannot be used: {why}")
        }
        Err(why) => {
            println!("{test}: skipped, {why}");
            false
        }
    }
}

fn probe() -> Result<(), String> {
    if !Path::new("/dev/fuse").exists() {
        return Err("no /dev/fuse".to_string());
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err("not root (mount(2) needs it)".to_string());
    }
    let mut lossy = Lossy::spawn(&[]).map_err(|e| format!("a probe mount failed: {e}"))?;
    let status = lossy.terminate();
    if status.success() {
        Ok(())
    } else {
        Err(format!("the probe mount ended with {status}"))
    }
}

/// A running `lossyfs` on a temp backing folder and mount point.
pub struct Lossy {
    child: Child,
    /// stdout after the `mounted` line (there must be none).
    rest: mpsc::Receiver<String>,
    _dir: tempfile::TempDir,
    pub backing: PathBuf,
    pub mnt: PathBuf,
    pub sock: PathBuf,
}

impl Lossy {
    /// Starts `lossyfs` with `extra` arguments and waits for its `mounted MNT` line.
    pub fn start(extra: &[&str]) -> Self {
        Self::spawn(extra).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Starts `lossyfs`; an error if it does not print `mounted MNT` (with its stderr).
    pub fn spawn(extra: &[&str]) -> Result<Self, String> {
        let dir = tempfile::tempdir().expect("temp dir");
        let backing = dir.path().join("backing");
        let mnt = dir.path().join("mnt");
        let sock = dir.path().join("control.sock");
        std::fs::create_dir(&backing).expect("backing dir");
        std::fs::create_dir(&mnt).expect("mount dir");
        let mut child = Command::new(env!("CARGO_BIN_EXE_lossyfs"))
            .arg("--backing")
            .arg(&backing)
            .arg("--mount")
            .arg(&mnt)
            .arg("--control")
            .arg(&sock)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn lossyfs");
        let (stdout, stderr) = (child.stdout.take().expect("stdout"), child.stderr.take());
        let (tx, rx) = mpsc::channel();
        let (rest_tx, rest) = mpsc::channel();
        thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            let _ = tx.send(lines.next());
            for line in lines.map_while(Result::ok) {
                let _ = rest_tx.send(line);
            }
        });
        // Its stderr goes on to the test's (RUST_LOG, errors).
        thread::spawn(move || {
            for line in BufReader::new(stderr.expect("stderr"))
                .lines()
                .map_while(Result::ok)
            {
                eprintln!("{line}");
            }
        });
        let mut lossy = Self {
            child,
            rest,
            _dir: dir,
            backing,
            mnt,
            sock,
        };
        match rx.recv_timeout(Duration::from_secs(20)) {
            Ok(Some(Ok(line))) if line == format!("mounted {}", lossy.mnt.display()) => Ok(lossy),
            Ok(Some(Ok(line))) => Err(format!("lossyfs printed {line:?} instead of mounted")),
            Ok(_) => {
                let status = lossy.wait(Duration::from_secs(10));
                Err(format!(
                    "lossyfs exited with {status} before mounting (its stderr is above)"
                ))
            }
            Err(_) => Err("lossyfs did not mount in 20 s".to_string()),
        }
    }

    /// One control command, its one-line reply.
    pub fn command(&self, line: &str) -> String {
        let mut stream = UnixStream::connect(&self.sock).expect("connect to the control socket");
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .expect("timeout");
        writeln!(stream, "{line}").expect("send command");
        let mut reply = String::new();
        BufReader::new(&stream)
            .read_line(&mut reply)
            .expect("read reply");
        reply.trim_end().to_string()
    }

    /// `drop MODE SEED`: its reply, once lossyfs has exited 0.
    pub fn drop_and_exit(&mut self, mode: &str, seed: u64) -> String {
        let reply = self.command(&format!("drop {mode} {seed}"));
        assert!(reply.starts_with("dropped "), "drop replied {reply:?}");
        let status = self.wait(Duration::from_secs(30));
        assert!(
            status.success(),
            "lossyfs exited with {status} after the drop"
        );
        reply
    }

    /// Waits for the process to exit; it must have printed nothing after `mounted`.
    pub fn wait(&mut self, limit: Duration) -> ExitStatus {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                let rest: Vec<String> = self.rest.try_iter().collect();
                assert!(
                    rest.is_empty(),
                    "lossyfs printed more than one line: {rest:?}"
                );
                return status;
            }
            assert!(
                start.elapsed() < limit,
                "lossyfs still running after {limit:?}"
            );
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILL (a crash of lossyfs itself), then waits for the exit.
    pub fn kill(&mut self) -> ExitStatus {
        self.child.kill().expect("kill");
        self.wait(Duration::from_secs(30))
    }

    /// SIGTERM, then waits for the exit.
    pub fn terminate(&mut self) -> ExitStatus {
        let pid = libc::pid_t::try_from(self.child.id()).expect("pid");
        // SAFETY: signalling our own child.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        self.wait(Duration::from_secs(30))
    }
}

impl Drop for Lossy {
    /// A test that failed half-way leaves no process and no mount behind.
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        if let Ok(path) = std::ffi::CString::new(self.mnt.as_os_str().as_encoded_bytes()) {
            // SAFETY: a valid NUL-terminated path; EINVAL if it is not mounted, ignored.
            unsafe { libc::umount2(path.as_ptr(), libc::MNT_DETACH) };
        }
    }
}

/// The numbers of a `dropped blocks X of Y entries X of Y torn_bytes Z` reply.
pub fn numbers(reply: &str) -> Vec<u64> {
    reply
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect()
}
