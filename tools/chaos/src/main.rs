//! `chaos`: a chaos run against the real binaries. Many channels send transfers (new ones,
//! resends, twins in flight, other amounts) while the relay is SIGKILLed every few seconds,
//! the core goes away now and then, and `resolve` and `reprocess` run alongside. With
//! `--backend postgres --relays N`, N relays share a PostgreSQL ledger on a cluster of the
//! run's own, resends mostly go to another relay than the first send, and the database
//! server is restarted in immediate mode now and then. Then it quiesces, settles what is
//! left, and checks that no GUID was booked twice, that every booking has its DONE row and
//! every 0000 a channel saw is what the ledger holds. It counts what the relays' late replies
//! settled (from their logs) and checks those rows too.
//!
//! Exit codes: 0 no violation, 1 violations (each printed with its GUID and evidence),
//! 2 usage error or the run could not be carried out, 130 interrupted.

mod channel;
mod check;
mod http;
mod late;
mod plan;
mod procs;
mod run;
mod tools;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Context;
use clap::Parser;

/// Chaos run: channels, relay kills, core outages, resolve and reprocess, then the checks.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// How long the traffic and the kills go on, in seconds.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    secs: u64,
    /// Seed of every channel's actions (and routes) and of the kill schedule, database
    /// restarts included (default: from the clock;
    /// always printed, so that a run can be replayed).
    #[arg(long)]
    seed: Option<u64>,
    /// Channel threads, each on its own persistent connection.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u64).range(1..=1000))]
    channels: u64,
    /// What holds the ledger: an SQLite file in the work dir, or a PostgreSQL cluster the
    /// run starts for itself (PostgreSQL's server binaries must be installed) and restarts in
    /// immediate mode every 5–10 s.
    #[arg(long, value_enum, default_value_t = run::Backend::Sqlite)]
    backend: run::Backend,
    /// A PostgreSQL ledger the run does not own, instead of a cluster of its own: a URL, a
    /// multi-host one (`target_session_attrs=read-write`) for a database that fails over
    /// while a script acts on it (`scripts/chaos_failover.sh`). The run restarts no
    /// database; a relay that cannot start because no host is writable is started again
    /// every half second, as a supervisor would, and is a finding only after a minute.
    #[arg(long, conflicts_with = "backend")]
    db: Option<String>,
    /// Relays sharing the ledger, each on its own port and SIGKILLed on its own schedule;
    /// the channels spread their sends across them.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=16))]
    relays: u64,
    /// Where the workspace binaries are (coresim, relay, resolve, reprocess); default: the
    /// directory of this executable.
    #[arg(long)]
    bin_dir: Option<PathBuf>,
    /// Where to create the run's work directory (ledger, journal, logs); default: the
    /// system's temp dir. A tmpfs (e.g. /dev/shm) makes the ledger's fsyncs free: kills
    /// are survived the same way (the page cache outlives a process), and the run does
    /// more in the same time.
    #[arg(long)]
    work_dir: Option<PathBuf>,
    /// resolve's --min-age during the run (default 2, above the simulator's 500 ms SLOW).
    /// Below that, resolve takes a 404 from a core still thinking as "never booked" and
    /// reprocess books the transfer again: `--resolve-min-age 0` shows the checks catching
    /// exactly that.
    #[arg(long, default_value_t = run::MIN_AGE_SECS)]
    resolve_min_age: u64,
    /// Keep the work directory (ledger, journal, logs) and print its path. It is kept
    /// anyway when a violation is found.
    #[arg(long)]
    keep: bool,
    /// Channels speak mutual TLS to the relays: the run makes a CA, the relays' certificate
    /// and two channel identities (channel-a for even channels, channel-b for odd ones) in
    /// its work directory, and starts the relays with --tls-cert, --tls-key and --client-ca.
    #[arg(long)]
    tls: bool,
    /// The relays also serve their HTTP channel API (--http-listen): every third channel
    /// sends 3 in 4 of its requests through it, the others 1 in 4, so that resends of a
    /// GUID cross doors; the HTTP answers are held to the same checks as frames. Not with
    /// --tls.
    #[arg(long, conflicts_with = "tls")]
    http: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    cli::main("chaos", || Ok(exit_code(start(args))))
}

/// 0 no violation, 1 violations, 130 interrupted, 2 the run could not be carried out.
fn exit_code(outcome: anyhow::Result<bool>) -> u8 {
    match outcome {
        Ok(true) => 0,
        Ok(false) => 1,
        Err(e) if e.to_string() == "interrupted" => {
            eprintln!("chaos: interrupted; everything it started was stopped");
            130
        }
        Err(e) => {
            eprintln!("chaos: cannot carry out the run: {e:#}");
            2
        }
    }
}

fn start(args: Args) -> anyhow::Result<bool> {
    let seed = args.seed.unwrap_or_else(|| {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        now ^ u64::from(std::process::id()).rotate_left(32)
    });
    let bin_dir = args
        .bin_dir
        .unwrap_or_else(|| testkit::spawn::bin_dir().to_path_buf());
    // SIGINT/SIGTERM: stop at the next check and kill every child on the way out.
    let interrupted = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&interrupted))
            .context("cannot install a signal handler")?;
    }
    let cfg = run::Config {
        secs: args.secs,
        seed,
        channels: usize::try_from(args.channels).unwrap_or(32),
        backend: if args.db.is_some() {
            run::Backend::Postgres
        } else {
            args.backend
        },
        external_db: args.db,
        relays: usize::try_from(args.relays).unwrap_or(1),
        bin_dir,
        work_dir: args.work_dir,
        resolve_min_age: args.resolve_min_age,
        keep: args.keep,
        tls: args.tls,
        http: args.http,
    };
    run::run(&cfg, &interrupted)
}
