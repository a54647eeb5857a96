//! The lossyfs process of a round: started on the backing folder (with the cut at the k-th
//! mutating operation, or none), asked over its control socket, dropped or stopped.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, bail};

/// How the unsynced writes are dropped at a cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    All,
    Subset,
    Torn,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::All => "all",
            Mode::Subset => "subset",
            Mode::Torn => "torn",
        }
    }
}

/// A mounted lossyfs.
pub struct Lossyfs {
    child: Child,
    control: PathBuf,
}

/// What a drop reverted: `dropped blocks X of Y entries X of Y torn_bytes Z`.
#[derive(Debug, Default, Clone, Copy)]
pub struct Dropped {
    pub blocks: u64,
    pub blocks_dirty: u64,
    pub entries: u64,
    pub entries_dirty: u64,
    pub torn_bytes: u64,
}

impl Dropped {
    fn parse(line: &str) -> anyhow::Result<Dropped> {
        let n: Vec<u64> = line
            .split_whitespace()
            .filter_map(|w| w.parse().ok())
            .collect();
        let [blocks, blocks_dirty, entries, entries_dirty, torn_bytes] = n[..] else {
            bail!("lossyfs's drop said {line:?}");
        };
        Ok(Dropped {
            blocks,
            blocks_dirty,
            entries,
            entries_dirty,
            torn_bytes,
        })
    }

    pub fn add(&mut self, o: &Dropped) {
        self.blocks += o.blocks;
        self.blocks_dirty += o.blocks_dirty;
        self.entries += o.entries;
        self.entries_dirty += o.entries_dirty;
        self.torn_bytes += o.torn_bytes;
    }
}

impl std::fmt::Display for Dropped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "dropped {} of {} unsynced blocks, {} of {} directory operations, {} torn bytes",
            self.blocks, self.blocks_dirty, self.entries, self.entries_dirty, self.torn_bytes
        )
    }
}

/// `stats`, as lossyfs counts.
#[derive(Debug, Default, Clone, Copy)]
pub struct Stats {
    pub ops: u64,
    pub frozen: bool,
}

impl Lossyfs {
    /// Mounts `backing` at `mount`; with `crash_after`, the power goes at that operation.
    pub fn start(
        bin: &Path,
        backing: &Path,
        mount: &Path,
        control: &Path,
        crash_after: Option<u64>,
    ) -> anyhow::Result<Lossyfs> {
        let _ = std::fs::remove_file(control);
        let mut cmd = Command::new(bin);
        cmd.arg("--backing")
            .arg(backing)
            .arg("--mount")
            .arg(mount)
            .arg("--control")
            .arg(control);
        if let Some(k) = crash_after {
            cmd.arg("--crash-after").arg(k.to_string());
        }
        cmd.stderr(Stdio::inherit());
        let (child, _) =
            testkit::spawn::spawn_announced(&mut cmd, Duration::from_secs(10), "mounted ")
                .with_context(|| format!("lossyfs did not mount {}", mount.display()))?;
        Ok(Lossyfs {
            child,
            control: control.to_path_buf(),
        })
    }

    fn ask(&self, command: &str) -> anyhow::Result<String> {
        let mut s = UnixStream::connect(&self.control)
            .with_context(|| format!("lossyfs's control socket {}", self.control.display()))?;
        s.write_all(format!("{command}\n").as_bytes())?;
        let mut reply = String::new();
        s.read_to_string(&mut reply)?;
        let reply = reply.trim().to_string();
        if reply.starts_with("error") {
            bail!("lossyfs: {command}: {reply}");
        }
        Ok(reply)
    }

    pub fn stats(&self) -> anyhow::Result<Stats> {
        let reply = self.ask("stats")?;
        let words: Vec<&str> = reply.split_whitespace().collect();
        let value = |key: &str| -> u64 {
            words
                .iter()
                .position(|w| *w == key)
                .and_then(|i| words.get(i + 1))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        };
        Ok(Stats {
            ops: value("ops"),
            frozen: value("frozen") == 1,
        })
    }

    /// The power goes: every operation fails from now on.
    pub fn freeze(&self) -> anyhow::Result<()> {
        self.ask("freeze").map(drop)
    }

    /// Drops what was not synced, as `mode` says; lossyfs then unmounts and exits.
    pub fn drop_unsynced(mut self, mode: Mode, seed: u64) -> anyhow::Result<Dropped> {
        let reply = self.ask(&format!("drop {} {seed}", mode.as_str()))?;
        self.wait()?;
        Dropped::parse(&reply)
    }

    /// Unmounts, keeping everything (a clean shutdown).
    pub fn stop(mut self) -> anyhow::Result<()> {
        testkit::process::signal(self.child.id(), "-TERM");
        self.wait()
    }

    fn wait(&mut self) -> anyhow::Result<()> {
        for _ in 0..500 {
            if let Some(status) = self.child.try_wait()? {
                if !status.success() {
                    bail!("lossyfs exited with {status}");
                }
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        bail!("lossyfs did not exit within 10 s")
    }
}

impl Drop for Lossyfs {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
