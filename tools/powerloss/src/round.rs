//! One round: lossyfs mounted with the power cut at the k-th mutating operation, the relay on
//! it, channels sending and resending, a backup, resolve and reprocess alongside; the cut
//! (every process killed, the unsynced writes dropped); the checks on what is left; then the
//! relay restarted on it, every GUID of the round resent, resolve and reprocess, and the
//! checks again.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;

use crate::checks;
use crate::mount::{Dropped, Lossyfs, Mode};
use crate::traffic::{self, Shared, lock};

/// What every round shares.
pub struct Ctx {
    pub backing: PathBuf,
    pub mount: PathBuf,
    pub control: PathBuf,
    pub journal: PathBuf,
    pub scratch: PathBuf,
    pub core_url: String,
    pub lossyfs: PathBuf,
    pub book: Shared,
    pub channels: u64,
    pub round_time: Duration,
    /// The negative control: the ledger at `synchronous=NORMAL` (a debug build's test switch).
    pub unsafe_normal: bool,
}

/// What a round did.
pub struct Report {
    pub ops: u64,
    pub sent: u64,
    pub relay_started: bool,
    pub backup_done: bool,
    /// The backup that finished before the cut was there and restored.
    pub backup_restored: bool,
    /// resolve ended before the cut, so its --metrics-file was written.
    pub metrics_written: bool,
    /// A process checkpointed the ledger (its WAL truncated) again and again until the cut.
    pub checkpoints: bool,
    pub dropped: Dropped,
    pub violations: Vec<String>,
}

impl Ctx {
    fn ledger(&self, root: &Path) -> PathBuf {
        root.join("ledger.db")
    }

    fn command(&self, name: &str) -> Command {
        let mut cmd = Command::new(testkit::bin(name));
        if self.unsafe_normal {
            cmd.env("TXRELAY_TEST_UNSAFE_SYNCHRONOUS_NORMAL", "1");
        }
        cmd.env("RUST_LOG", "error");
        cmd
    }

    /// The relay on the mounted ledger, or why it did not start (the cut may come first).
    fn relay(&self) -> anyhow::Result<(Child, String)> {
        let mut cmd = self.command("relay");
        cmd.arg("--db")
            .arg(self.ledger(&self.mount))
            .args(["--core", &self.core_url, "--listen", "127.0.0.1:0"])
            .args(["--read-timeout-ms", "3000"])
            .stderr(Stdio::null());
        testkit::spawn_listening(&mut cmd, Duration::from_secs(10))
    }

    /// A batch tool on the mounted ledger, in the background.
    fn tool(&self, name: &str, args: &[&str]) -> anyhow::Result<Child> {
        let mut cmd = self.command(name);
        cmd.arg("--db")
            .arg(self.ledger(&self.mount))
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        cmd.spawn().with_context(|| format!("cannot run {name}"))
    }

    /// Runs a batch tool on the mounted ledger to its end; its exit code.
    fn run_tool(&self, name: &str, args: &[&str]) -> anyhow::Result<Option<i32>> {
        Ok(self.tool(name, args)?.wait()?.code())
    }

    /// Round `r`: the power cut at operation `crash_after`, dropped as `mode` says.
    pub fn round(&self, r: u64, crash_after: u64, mode: Mode, seed: u64) -> anyhow::Result<Report> {
        // Each round's metrics file is its own (one left by an earlier round would hide a
        // lost rename).
        let _ = std::fs::remove_file(self.backing.join("metrics/resolve.prom"));
        let fs = Lossyfs::start(
            &self.lossyfs,
            &self.backing,
            &self.mount,
            &self.control,
            Some(crash_after),
        )?;
        let mut report = Report {
            ops: 0,
            sent: 0,
            relay_started: false,
            backup_done: false,
            backup_restored: false,
            metrics_written: false,
            checkpoints: false,
            dropped: Dropped::default(),
            violations: Vec::new(),
        };
        let backup_file = format!("backups/round-{r}.db");
        let mut relay = None;
        let mut tools: Vec<(&str, Child)> = Vec::new();
        if let Ok((child, addr)) = self.relay() {
            report.relay_started = true;
            relay = Some(child);
            let stop = Arc::new(AtomicBool::new(false));
            let threads: Vec<_> = (0..self.channels)
                .map(|c| {
                    let (addr, book, stop) = (addr.clone(), self.book.clone(), stop.clone());
                    let seed = seed ^ (c + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                    std::thread::spawn(move || traffic::channel(addr, book, r, c, seed, stop))
                })
                .collect();
            let started = Instant::now();
            let mut side_started = false;
            loop {
                // resolve seen ended, then the power seen still on: it ended before the cut
                // (freezing is for good), its metrics file written.
                let resolve_ended = match tools.iter_mut().find(|(n, _)| *n == "resolve") {
                    Some((_, t)) => t.try_wait()?.is_some(),
                    None => false,
                };
                let frozen = fs.stats()?.frozen;
                report.metrics_written |= resolve_ended && !frozen;
                if frozen || started.elapsed() >= self.round_time {
                    break;
                }
                if !side_started {
                    side_started = true;
                    let to = self.mount.join(&backup_file);
                    let to = to.to_str().context("a UTF-8 path")?;
                    tools.push((
                        "backup",
                        self.tool("backup", &["--to", to, "--min-free", "0"])?,
                    ));
                    let core = self.core_url.as_str();
                    let metrics = self.mount.join("metrics/resolve.prom");
                    let metrics = metrics.to_str().context("a UTF-8 path")?;
                    tools.push((
                        "resolve",
                        self.tool(
                            "resolve",
                            &["--core", core, "--min-age", "1", "--metrics-file", metrics],
                        )?,
                    ));
                    // Every other round, checkpoints with the WAL truncated as fast as they come
                    // (what SQLite's auto-checkpoint does every 1,000 pages), in a process of
                    // their own, so that cuts land in them too.
                    if r % 2 == 1 {
                        let mut cmd = Command::new(std::env::current_exe()?);
                        cmd.arg("--checkpoint-loop")
                            .arg(self.ledger(&self.mount))
                            .stdin(Stdio::null())
                            .stdout(Stdio::null())
                            .stderr(Stdio::null());
                        tools.push(("checkpoints", cmd.spawn()?));
                        report.checkpoints = true;
                    }
                    tools.push((
                        "reprocess",
                        self.tool("reprocess", &["--core", core, "--max-attempts", "1000"])?,
                    ));
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            // The power goes (if the k-th operation did not come yet): then every process.
            fs.freeze()?;
            report.ops = fs.stats()?.ops;
            if let Some((_, b)) = tools.iter_mut().find(|(n, _)| *n == "backup") {
                report.backup_done = b.try_wait()?.is_some_and(|s| s.success());
            }
            stop.store(true, Ordering::Relaxed);
            kill(relay.as_mut());
            for (_, t) in &mut tools {
                kill(Some(t));
            }
            report.sent = threads.into_iter().map(|t| t.join().unwrap_or(0)).sum();
        } else {
            fs.freeze()?;
            report.ops = fs.stats()?.ops;
        }
        kill(relay.as_mut());
        report.dropped = fs.drop_unsynced(mode, seed)?;

        self.after_cut(r, &backup_file, &mut report)?;
        if report.violations.is_empty() {
            self.restart(r, seed, &mut report)?;
        }
        Ok(report)
    }

    /// The checks on what the cut left, before anything runs on it again.
    fn after_cut(&self, r: u64, backup_file: &str, report: &mut Report) -> anyhow::Result<()> {
        // What the channels saw themselves (two different 0000 replies) first.
        report.violations.append(&mut lock(&self.book).violations);
        // A ledger the cut left unreadable (not a database, malformed) is a finding, not a
        // failure of the run.
        if let Err(e) = self.ledger_after_cut(r, &mut report.violations) {
            let why = format!("round {r}: the ledger the cut left cannot be read: {e:#}");
            report.violations.push(why);
        }
        self.files_after_cut(r, backup_file, report)
    }

    fn ledger_after_cut(&self, r: u64, out: &mut Vec<String>) -> anyhow::Result<()> {
        let booked = checks::bookings(&self.journal)?;
        let ledger = self.ledger(&self.backing);
        let book = lock(&self.book);
        let acknowledged = book.known.values().any(|k| k.ok_reply.is_some());
        if !ledger.exists() {
            if acknowledged || !booked.is_empty() {
                out.push(format!("round {r}: the ledger file is gone"));
            }
            return Ok(());
        }
        let c = checks::open(&ledger)?;
        let verdict = checks::integrity(&c)?;
        if verdict != "ok" {
            out.push(format!("round {r}: integrity_check: {verdict}"));
            return Ok(());
        }
        if !checks::has_ledger(&c)? {
            if acknowledged || !booked.is_empty() {
                out.push(format!("round {r}: the ledger has no table tx any more"));
            }
            return Ok(());
        }
        checks::acknowledged(&c, &book, r, out)?;
        checks::booked_have_rows(&c, &booked, r, out)
    }

    /// The files of ours beside the ledger: a backup and a metrics file written before the
    /// cut are there, and nothing else of them.
    fn files_after_cut(
        &self,
        r: u64,
        backup_file: &str,
        report: &mut Report,
    ) -> anyhow::Result<()> {
        let out = &mut report.violations;
        let backup = self.backing.join(backup_file);
        if report.backup_done {
            report.backup_restored = self.check_backup(r, &backup, out)?;
        }
        // What a backup leaves beside its copy: nothing, once it said it was done. A
        // temporary name that comes back after the cut is a second name of the copy (a
        // ledger with two names is refused), and it is never cleaned up.
        let name = backup
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        let temp = format!(".{name}.tmp-");
        for e in std::fs::read_dir(self.backing.join("backups"))? {
            let e = e?;
            let stray = e.file_name().to_str().is_some_and(|n| n.starts_with(&temp));
            if stray && report.backup_done {
                out.push(format!(
                    "round {r}: the backup said it was done, and its temporary name {} came \
                     back after the cut",
                    e.file_name().to_string_lossy()
                ));
            }
            if stray {
                let _ = std::fs::remove_file(e.path());
            }
        }
        let _ = std::fs::remove_file(&backup);
        // A metrics file a tool wrote before the cut is there (then it goes, so that the next
        // round's is its own).
        let metrics = self.backing.join("metrics/resolve.prom");
        let written = std::fs::read_to_string(&metrics).unwrap_or_default();
        if report.metrics_written && !written.contains("txrelay_batch_exit_code{tool=\"resolve\"}")
        {
            out.push(format!(
                "round {r}: resolve wrote its --metrics-file before the cut, and after it the \
                 file holds {:?}",
                written.lines().next().unwrap_or("nothing (no file)")
            ));
        }
        let _ = std::fs::remove_file(&metrics);
        Ok(())
    }

    /// A backup that finished before the cut is there, and restores; whether it did.
    fn check_backup(&self, r: u64, backup: &Path, out: &mut Vec<String>) -> anyhow::Result<bool> {
        if !backup.exists() {
            out.push(format!(
                "round {r}: the backup that finished before the cut is gone"
            ));
            return Ok(false);
        }
        let folder = self.scratch.join(format!("round-{r}"));
        std::fs::create_dir_all(&folder)?;
        let restored = folder.join("ledger.db");
        let code = Command::new(testkit::bin("restore"))
            .arg("--from")
            .arg(backup)
            .arg("--db")
            .arg(&restored)
            .arg("--journal")
            .arg(&self.journal)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()?
            .code();
        if code != Some(0) {
            out.push(format!(
                "round {r}: restore of the backup taken before the cut: exit {code:?}"
            ));
        }
        let _ = std::fs::remove_dir_all(&folder);
        Ok(code == Some(0))
    }

    /// The relay restarted on what is left; the round's GUIDs (and some earlier ones) resent;
    /// rows left SENT aged past resolve's floor (every process that could still be working on
    /// them is gone); resolve and reprocess; then no GUID booked twice, every 0000 still DONE.
    fn restart(&self, r: u64, seed: u64, report: &mut Report) -> anyhow::Result<()> {
        let fs = Lossyfs::start(
            &self.lossyfs,
            &self.backing,
            &self.mount,
            &self.control,
            None,
        )?;
        let (mut relay, addr) = match self.relay() {
            Ok(x) => x,
            Err(e) => {
                report
                    .violations
                    .push(format!("round {r}: the relay does not restart: {e:#}"));
                return fs.stop();
            }
        };
        let mut rng = fastrand::Rng::with_seed(seed);
        let resend: Vec<(String, Vec<u8>)> = {
            let b = lock(&self.book);
            b.known
                .iter()
                .filter(|(_, k)| k.round == r || rng.u8(0..100) < 2)
                .map(|(g, k)| (g.clone(), k.msg.clone()))
                .collect()
        };
        let mut chan = testkit::Chan::connect(addr.as_str(), Duration::from_secs(10))?;
        for (guid, msg) in &resend {
            match chan.call(msg) {
                Ok(reply) => traffic::record(&self.book, r, guid, &reply),
                Err(e) => {
                    let why = format!("round {r}: the restarted relay did not answer {guid}: {e}");
                    report.violations.push(why);
                    break;
                }
            }
        }
        drop(chan);
        testkit::process::signal(relay.id(), "-TERM");
        relay.wait()?;
        {
            let c = checks::open(&self.ledger(&self.mount))?;
            c.execute(
                "UPDATE tx SET updated_at = datetime('now', '-61 seconds') WHERE state = 'SENT'",
                [],
            )?;
        }
        let core = self.core_url.as_str();
        let resolved = self.run_tool(
            "resolve",
            &["--core", core, "--min-age", "0", "--stale-sent", "60"],
        )?;
        let reprocessed =
            self.run_tool("reprocess", &["--core", core, "--max-attempts", "1000"])?;
        fs.stop()?;
        let out = &mut report.violations;
        if !matches!(resolved, Some(0 | 3)) || !matches!(reprocessed, Some(0 | 3)) {
            out.push(format!(
                "round {r}: after the restart resolve exited {resolved:?}, reprocess {reprocessed:?}"
            ));
        }
        let booked = checks::bookings(&self.journal)?;
        checks::booked_once(&booked, r, out);
        let c = checks::open(&self.ledger(&self.backing))?;
        checks::acknowledged(&c, &lock(&self.book), r, out)?;
        checks::booked_have_rows(&c, &booked, r, out)?;
        out.append(&mut lock(&self.book).violations);
        Ok(())
    }
}

fn kill(child: Option<&mut Child>) {
    if let Some(c) = child {
        let _ = c.kill();
        let _ = c.wait();
    }
}
