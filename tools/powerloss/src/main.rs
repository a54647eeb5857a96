//! `powerloss`: the relay's SQLite ledger on `lossyfs`, the power cut again and again (issue
//! 43). Each round mounts the ledger's folder with the cut at the k-th mutating operation
//! (swept over the first rounds, drawn from the seed after), runs the relay with channels
//! sending and resending, a backup, resolve and reprocess alongside; at the cut every process
//! is killed and what was not synced is dropped (all of it, a seeded subset, or the last
//! write torn); then the checks (`checks`) on what is left, the relay restarted on it, every
//! GUID of the round resent, resolve and reprocess, and the checks again. The core simulator
//! and its journal, the truth, live outside the file system that loses power.
//!
//! Exit 0: no violation; 1: violations (each with its round; the run stops at the first
//! round that has one); 2: the run could not be carried out. With
//! `--unsafe-synchronous-normal` (the negative control: the ledger at `synchronous=NORMAL`, a
//! debug build's test switch) the other way round: 0 when a round caught the loss, 1 when
//! none did.

mod checks;
mod mount;
mod round;
mod traffic;

use std::path::PathBuf;
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Parser;

use mount::Mode;

/// Power-loss run: the SQLite ledger on lossyfs, cut at the k-th write or sync, restarted,
/// checked.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// Rounds (power cuts); half swept over the crash points, half drawn from the seed.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    rounds: u64,
    /// Run only part I of N of the rounds (those whose number is I modulo N), each with the
    /// crash point, mode and seed it has in the whole run: N processes with parts 0/N to
    /// N-1/N make the same cuts as one, side by side.
    #[arg(long, default_value = "0/1", value_parser = parse_part, value_name = "I/N")]
    part: (u64, u64),
    /// Seed of the crash points, the drops and the channels (default: from the clock;
    /// always printed).
    #[arg(long)]
    seed: Option<u64>,
    /// Crash points are drawn from 1 to this many mutating operations of a round.
    #[arg(long, default_value_t = 1500, value_parser = clap::value_parser!(u64).range(1..))]
    span: u64,
    /// Channels sending at once.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..=64))]
    channels: u64,
    /// The longest a round sends before the power goes anyway, in milliseconds.
    #[arg(long, default_value_t = 1500, value_parser = clap::value_parser!(u64).range(10..))]
    round_ms: u64,
    /// The negative control: the ledger at synchronous=NORMAL (a debug build's test switch);
    /// the run must then find a violation.
    #[arg(long)]
    unsafe_synchronous_normal: bool,
    /// Where to make the run's folder (default: the system's temp dir).
    #[arg(long)]
    work_dir: Option<PathBuf>,
    /// Keep the run's folder (it is kept anyway when a violation is found).
    #[arg(long)]
    keep: bool,
    /// (The run's own helper process: checkpoint this ledger until an error or a kill.)
    #[arg(long, hide = true, value_name = "LEDGER")]
    checkpoint_loop: Option<PathBuf>,
}

/// `I/N`, with I below N.
fn parse_part(s: &str) -> Result<(u64, u64), String> {
    let (i, n) = s
        .split_once('/')
        .ok_or_else(|| format!("{s:?} is not I/N"))?;
    let (i, n) = (
        i.parse::<u64>().map_err(|e| format!("{i:?}: {e}"))?,
        n.parse::<u64>().map_err(|e| format!("{n:?}: {e}"))?,
    );
    if n == 0 || i >= n {
        return Err(format!("{s:?}: I must be below N, and N above 0"));
    }
    Ok((i, n))
}

fn main() -> ExitCode {
    let args = Args::parse();
    if let Some(ledger) = &args.checkpoint_loop {
        return match checks::checkpoint_loop(ledger) {
            Ok(()) => ExitCode::SUCCESS,
            Err(_) => ExitCode::from(1),
        };
    }
    match run(&args) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("powerloss: error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run(a: &Args) -> anyhow::Result<u8> {
    let seed = a.seed.unwrap_or_else(|| fastrand::u64(..));
    let work = match &a.work_dir {
        Some(d) => tempfile::Builder::new()
            .prefix("powerloss-")
            .tempdir_in(d)?,
        None => tempfile::Builder::new().prefix("powerloss-").tempdir()?,
    };
    let dir = work.path().to_path_buf();
    let (backing, mount, scratch) = (dir.join("backing"), dir.join("mnt"), dir.join("scratch"));
    for d in [
        &backing.join("backups"),
        &backing.join("metrics"),
        &mount,
        &scratch,
    ] {
        std::fs::create_dir_all(d)?;
    }
    let journal = dir.join("core.journal");
    let core = testkit::process::Server::spawn(
        "coresim",
        &[
            "--listen",
            "127.0.0.1:0",
            "--journal",
            journal.to_str().context("UTF-8")?,
        ],
    );
    let ctx = round::Ctx {
        backing,
        mount: mount.clone(),
        control: dir.join("lossyfs.sock"),
        journal,
        scratch,
        core_url: core.url(),
        lossyfs: testkit::bin("lossyfs"),
        book: Default::default(),
        channels: a.channels,
        round_time: Duration::from_millis(a.round_ms),
        unsafe_normal: a.unsafe_synchronous_normal,
    };
    let (part, parts) = a.part;
    println!(
        "powerloss: seed {seed} (replay: --seed {seed}), {} rounds{}, crash points 1..={}, {} \
         channels, work dir {}{}",
        a.rounds,
        if parts > 1 {
            format!(" (part {part}/{parts}: those {part} modulo {parts})")
        } else {
            String::new()
        },
        a.span,
        a.channels,
        dir.display(),
        if a.unsafe_synchronous_normal {
            "; NEGATIVE CONTROL: the ledger at synchronous=NORMAL"
        } else {
            ""
        }
    );
    let mut rng = fastrand::Rng::with_seed(seed);
    let half = a.rounds.div_ceil(2);
    let started = Instant::now();
    let (mut sent, mut caught) = (0, None);
    let (mut dropped, mut points) = (mount::Dropped::default(), std::collections::BTreeSet::new());
    let (mut relay_up, mut backups, mut checkpoints, mut ran) = (0, 0, 0, 0);
    for r in 0..a.rounds {
        // The first half sweeps the crash points in order, the second draws them.
        let k = if r < half {
            1 + (r * a.span / half).min(a.span - 1)
        } else {
            rng.u64(1..=a.span)
        };
        let mode = [Mode::All, Mode::Subset, Mode::Torn][(r % 3) as usize];
        let round_seed = rng.u64(..);
        // Drawn for every round, run for this part's: each round as in the whole run.
        if r % parts != part {
            continue;
        }
        ran += 1;
        let _ = Command::new("umount").arg("-l").arg(&mount).output();
        let report = ctx.round(r, k, mode, round_seed)?;
        sent += report.sent;
        dropped.add(&report.dropped);
        points.insert(k);
        relay_up += u64::from(report.relay_started);
        backups += u64::from(report.backup_restored);
        checkpoints += u64::from(report.checkpoints);
        println!(
            "round {r}: cut at op {k} ({}): {} ops, relay {}, {} sent, backup {}; {}{}",
            mode.as_str(),
            report.ops,
            if report.relay_started {
                "up"
            } else {
                "not up yet"
            },
            report.sent,
            match (report.backup_done, report.backup_restored) {
                (true, true) => "restored",
                (true, false) => "NOT restored",
                _ => "-",
            },
            report.dropped,
            if report.violations.is_empty() {
                "; ok"
            } else {
                "; VIOLATIONS"
            }
        );
        if !report.violations.is_empty() {
            for v in &report.violations {
                println!("  {v}");
            }
            caught = Some(r);
            break;
        }
    }
    let guids = traffic::lock(&ctx.book).known.len();
    let booked = checks::bookings(&ctx.journal)?.len();
    println!(
        "powerloss: {} rounds in {:.0} s ({} crash points, the relay up at {relay_up} cuts), \
         {sent} requests, {guids} GUIDs, {booked} booked, {backups} backups taken before a cut \
         restored, {checkpoints} rounds checkpointing; {dropped}",
        ran,
        started.elapsed().as_secs_f64(),
        points.len()
    );
    // The negative control's violation is the expected one: its folder goes unless --keep.
    if (caught.is_some() && !a.unsafe_synchronous_normal) || a.keep {
        let kept = work.keep();
        println!("powerloss: work dir kept: {}", kept.display());
    }
    Ok(match (a.unsafe_synchronous_normal, caught) {
        (false, None) => {
            println!("powerloss: PASS (seed {seed}, 0 violations)");
            0
        }
        (false, Some(r)) => {
            println!("powerloss: FAIL (seed {seed}, round {r}; replay with --seed {seed})");
            1
        }
        (true, Some(r)) => {
            println!(
                "powerloss: the negative control FAILED, as it must: round {r} caught the \
                 commits synchronous=NORMAL lost"
            );
            0
        }
        (true, None) => {
            println!(
                "powerloss: the negative control PASSED: the run did not see the loss it must \
                 see (the switch exists only in a debug build of the workspace, whose ledger has \
                 the unsafe-test-switches feature: run those binaries, not a release or a \
                 `cargo build -p relay` one)"
            );
            1
        }
    })
}
