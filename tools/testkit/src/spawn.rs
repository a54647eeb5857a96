//! Finding the workspace's binaries and starting the servers among them (relay, coresim),
//! which announce `listening on HOST:PORT` as their first line on stdout.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{Context, bail};

/// The path of the workspace binary `name`, next to the running executable (a test binary
/// lives one level deeper, in `deps/`). Under `cargo test` the workspace's binaries are
/// built first, once per process, so that a test never runs stale ones (`cargo test` alone
/// does not build the binaries of other packages).
pub fn bin(name: &str) -> PathBuf {
    let path = bin_dir().join(name);
    assert!(path.exists(), "{} was not built", path.display());
    path
}

/// The directory holding the workspace's binaries (`target/<profile>`).
pub fn bin_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let exe = std::env::current_exe().expect("current exe");
        let mut dir = exe.parent().expect("exe dir").to_path_buf();
        if dir.file_name().is_some_and(|n| n == "deps") {
            dir.pop();
            build_workspace(&dir);
        }
        dir
    })
}

fn build_workspace(profile_dir: &Path) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "--workspace", "--bins", "--quiet"])
        .current_dir(root);
    // Without the variables `cargo test` set for this test process (which package it is
    // of): ring's build script declares some of them inputs, so with them the binaries'
    // build and the tests' build would each find ring, and all above it, out of date after
    // the other, and rebuild it on every run.
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy();
        let per_package = [
            "CARGO_MANIFEST_",
            "CARGO_PKG_",
            "CARGO_BIN_",
            "CARGO_CRATE_",
        ];
        if per_package.iter().any(|p| key.starts_with(p))
            || key == "CARGO_PRIMARY_PACKAGE"
            || key == "CARGO_TARGET_TMPDIR"
        {
            cmd.env_remove(&*key);
        }
    }
    if profile_dir.file_name().is_some_and(|n| n == "release") {
        cmd.arg("--release");
    }
    let out = cmd.output().expect("cannot run cargo build");
    assert!(
        out.status.success(),
        "cargo build --workspace --bins failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Starts `cmd` (its stdout is taken here; set its stderr as you like) and waits up to
/// `timeout` for its first line, `listening on HOST:PORT`. Returns the child and the
/// address; the rest of its stdout is drained in the background.
pub fn spawn_listening(cmd: &mut Command, timeout: Duration) -> anyhow::Result<(Child, String)> {
    spawn_announced(cmd, timeout, "listening on ")
}

/// Starts `cmd` as [`spawn_listening`] does, waiting for a first line that begins with
/// `prefix` (`mounted ` for lossyfs); the rest of that line.
pub fn spawn_announced(
    cmd: &mut Command,
    timeout: Duration,
    prefix: &str,
) -> anyhow::Result<(Child, String)> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot spawn {:?}", cmd.get_program()))?;
    let stdout = child.stdout.take().expect("piped stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(stdout).lines();
        let _ = tx.send(lines.next());
        for _ in lines {} // keep draining
    });
    let first = rx.recv_timeout(timeout);
    match first {
        Ok(Some(Ok(line))) if line.starts_with(prefix) => {
            Ok((child, line[prefix.len()..].to_string()))
        }
        other => {
            let _ = child.kill();
            let status = child.wait().ok();
            bail!(
                "{:?} did not announce itself (first line {other:?}, status {status:?})",
                cmd.get_program()
            )
        }
    }
}
