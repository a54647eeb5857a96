//! `resolve`: settles transfers whose outcome is unknown by asking the core. Never POSTs.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use cli::{DryRun, EXIT_FATAL, EXIT_LEFT, print_report};
use core_client::CoreClient;
use core_client::tls::TlsFiles;
use engine::batch::{self, DEFAULT_PARALLEL, MAX_PARALLEL, ResolveError, ResolveSettings};
use engine::transfer::STALE_SENT_FLOOR;
use ledger::Access;
use ledger::store::DEFAULT_MAX_INQUIRIES;
use log::Level;

/// Below this, a core still working on a request may answer 404 and be taken at its word.
const SAFE_MIN_AGE_SECS: u64 = 60;

/// `--stale-sent`: at least the floor, beyond which no relay can still be waiting for the
/// core on a SENT row.
fn stale_sent_secs(s: &str) -> Result<u64, String> {
    let secs: u64 = s.parse().map_err(|e| format!("{e}"))?;
    let floor = STALE_SENT_FLOOR.as_secs();
    if secs < floor {
        return Err(format!(
            "must be at least {floor} seconds: a relay may still be waiting for the core on a \
             younger SENT row, and settling it by a 404 could book it twice"
        ));
    }
    Ok(secs)
}

/// Settles UNKNOWN rows (and, with --stale-sent, orphaned SENT rows) by inquiry at the core.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// The ledger: the relay's SQLite file, or a postgres:// URL.
    #[arg(long, env = "RESOLVE_DB", hide_env_values = true)]
    db: String,
    /// Base URL of the core banking system.
    #[arg(long, env = "RESOLVE_CORE", default_value = "http://127.0.0.1:9201")]
    core: String,
    /// For an https:// core: trust the certificates in this PEM file instead of the system's
    /// root certificates.
    #[arg(long, env = "RESOLVE_CORE_CA")]
    core_ca: Option<PathBuf>,
    /// For an https:// core: show this client certificate (PEM, leaf first) for mutual TLS;
    /// with --core-key.
    #[arg(long, env = "RESOLVE_CORE_CERT", requires = "core_key")]
    core_cert: Option<PathBuf>,
    /// The private key (PEM) of --core-cert.
    #[arg(long, env = "RESOLVE_CORE_KEY", requires = "core_cert")]
    core_key: Option<PathBuf>,
    /// Only rows unchanged for at least this many seconds; must exceed the core's longest
    /// processing time, or a 404 from a core still at work would mark a booking FAILED.
    #[arg(long, env = "RESOLVE_MIN_AGE")]
    min_age: u64,
    /// Also settle SENT rows unchanged for this many seconds (left by a relay that died);
    /// at least 60. Off by default, and only from the command line (no environment twin).
    #[arg(long, value_parser = stale_sent_secs)]
    stale_sent: Option<u64>,
    /// Stop asking about a GUID after this many failed inquiries: it is left to an operator
    /// (listed as needing one, exit 3). Each failure puts the GUID's next inquiry off,
    /// doubling from --min-age up to an hour.
    #[arg(long, env = "RESOLVE_MAX_INQUIRIES", default_value_t = DEFAULT_MAX_INQUIRIES,
          value_parser = clap::value_parser!(u32).range(1..))]
    max_inquiries: u32,
    /// Inquiries made at once, each over its own kept-alive connection to the core.
    #[arg(long, env = "RESOLVE_PARALLEL", default_value_t = DEFAULT_PARALLEL as u64,
          value_parser = clap::value_parser!(u64).range(1..=MAX_PARALLEL as u64))]
    parallel: u64,
    /// List the rows that would be examined; no inquiry, no write.
    #[arg(long)]
    dry_run: bool,
    /// Print the summary as one JSON object.
    #[arg(long)]
    json: bool,
    /// Log lines on stderr: text, or one JSON object a line.
    #[arg(long, env = "RESOLVE_LOG_FORMAT", value_enum, default_value_t = cli::LogFormat::Text)]
    log_format: cli::LogFormat,
    /// Also write the run's counts and exit code to this file, in the Prometheus text
    /// format (for node_exporter's textfile collector); replaced atomically. Not on --dry-run.
    #[arg(long, env = "RESOLVE_METRICS_FILE")]
    metrics_file: Option<std::path::PathBuf>,
    /// Time allowed to connect to the core.
    #[arg(long, env = "RESOLVE_CONNECT_TIMEOUT_MS", default_value_t = 1000,
          value_parser = clap::value_parser!(u64).range(1..))]
    connect_timeout_ms: u64,
    /// Time allowed for each later phase of an inquiry.
    #[arg(long, env = "RESOLVE_READ_TIMEOUT_MS", default_value_t = 5000,
          value_parser = clap::value_parser!(u64).range(1..))]
    read_timeout_ms: u64,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let metrics_file = args.metrics_file.clone().filter(|_| !args.dry_run);
    cli::batch_main("resolve", args.log_format, metrics_file, |counts| {
        run(args, counts)
    })
}

fn run(args: Args, counts: &mut cli::RunCounts) -> anyhow::Result<u8> {
    if args.min_age < SAFE_MIN_AGE_SECS {
        cli::stderr_line(
            "resolve",
            Level::Warn,
            &format!(
                "--min-age {} is under {SAFE_MIN_AGE_SECS} s; a core still processing a \
                 request answers 404, which would mark a booked transfer FAILED",
                args.min_age
            ),
        );
    }
    if std::env::var_os("RESOLVE_STALE_SENT").is_some() && args.stale_sent.is_none() {
        cli::stderr_line(
            "resolve",
            Level::Warn,
            "RESOLVE_STALE_SENT is ignored; SENT rows are settled only with --stale-sent SECS \
             on the command line",
        );
    }
    let db = cli::db_arg::<Args>(&args.db);
    // Several rows at once: on SQLite through group commit, so that their settlements
    // share fsyncs; one at a time, one connection as before.
    let access = if args.parallel > 1 {
        Access::Batch
    } else {
        Access::Tool
    };
    let ledger = db.open(access, "resolve")?;
    // Checked even for --dry-run, so that a dry run also proves the settings.
    let core = CoreClient::with_tls(
        &args.core,
        Duration::from_millis(args.connect_timeout_ms),
        Duration::from_millis(args.read_timeout_ms),
        &TlsFiles {
            ca: args.core_ca,
            cert: args.core_cert,
            key: args.core_key,
        },
    )?;
    let settings = ResolveSettings::new(args.min_age)
        .stale_sent(args.stale_sent)
        .max_inquiries(args.max_inquiries)
        .parallel(args.parallel as usize);
    if args.dry_run {
        let rows = batch::resolve_candidates(ledger.as_ref(), &settings)?;
        return Ok(print_report(
            "resolve",
            &DryRun::new("resolve", &rows),
            args.json,
        ));
    }
    match batch::resolve(ledger.as_ref(), &core, &settings) {
        Ok(summary) => {
            counts.record(&summary);
            Ok(print_report("resolve", &summary, args.json))
        }
        Err(e @ ResolveError::Canary { not_found, .. }) => {
            // A core that does not know our bookings: the settings look wrong (1). A core
            // that could not answer: a later run may do the work (3).
            cli::stderr_line("resolve", Level::Error, &e.to_string());
            Ok(if not_found { EXIT_FATAL } else { EXIT_LEFT })
        }
        Err(e) => Err(anyhow::Error::new(e).context(format!("ledger {}", db))),
    }
}
