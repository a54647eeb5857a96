//! `reprocess`: resends only what the ledger proves never left the relay, with the same GUID.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use cli::{DryRun, print_report};
use core_client::CoreClient;
use core_client::tls::TlsFiles;
use engine::batch::{self, DEFAULT_PARALLEL, MAX_PARALLEL};
use ledger::Access;

/// Resends FAILED rows with rsp_code E902 and fewer than --max-attempts attempts.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// The ledger: the relay's SQLite file, or a postgres:// URL.
    #[arg(long, env = "REPROCESS_DB", hide_env_values = true)]
    db: String,
    /// Base URL of the core banking system.
    #[arg(long, env = "REPROCESS_CORE", default_value = "http://127.0.0.1:9201")]
    core: String,
    /// For an https:// core: trust the certificates in this PEM file instead of the system's
    /// root certificates.
    #[arg(long, env = "REPROCESS_CORE_CA")]
    core_ca: Option<PathBuf>,
    /// For an https:// core: show this client certificate (PEM, leaf first) for mutual TLS;
    /// with --core-key.
    #[arg(long, env = "REPROCESS_CORE_CERT", requires = "core_key")]
    core_cert: Option<PathBuf>,
    /// The private key (PEM) of --core-cert.
    #[arg(long, env = "REPROCESS_CORE_KEY", requires = "core_cert")]
    core_key: Option<PathBuf>,
    /// Only rows with fewer attempts than this.
    #[arg(long, env = "REPROCESS_MAX_ATTEMPTS",
          value_parser = clap::value_parser!(i64).range(1..))]
    max_attempts: i64,
    /// Send at most this many rows in one run (oldest first), so that a recovering core is
    /// not hit by a storm. Default: all.
    #[arg(long, env = "REPROCESS_LIMIT")]
    limit: Option<u64>,
    /// Rows resent at once, each over its own kept-alive connection to the core. The run
    /// still stops claiming rows at the first one that finds the core unreachable.
    #[arg(long, env = "REPROCESS_PARALLEL", default_value_t = DEFAULT_PARALLEL as u64,
          value_parser = clap::value_parser!(u64).range(1..=MAX_PARALLEL as u64))]
    parallel: u64,
    /// List the rows that would be resent; no HTTP, no write.
    #[arg(long)]
    dry_run: bool,
    /// Print the summary as one JSON object.
    #[arg(long)]
    json: bool,
    /// Log lines on stderr: text, or one JSON object a line.
    #[arg(long, env = "REPROCESS_LOG_FORMAT", value_enum, default_value_t = cli::LogFormat::Text)]
    log_format: cli::LogFormat,
    /// Also write the run's counts and exit code to this file, in the Prometheus text
    /// format (for node_exporter's textfile collector); replaced atomically. Not on --dry-run.
    #[arg(long, env = "REPROCESS_METRICS_FILE")]
    metrics_file: Option<std::path::PathBuf>,
    /// Time allowed to connect to the core; on expiry the row stays FAILED/E902.
    #[arg(long, env = "REPROCESS_CONNECT_TIMEOUT_MS", default_value_t = 1000,
          value_parser = clap::value_parser!(u64).range(1..))]
    connect_timeout_ms: u64,
    /// Time allowed for each later phase of the call; on expiry the row is UNKNOWN.
    #[arg(long, env = "REPROCESS_READ_TIMEOUT_MS", default_value_t = 5000,
          value_parser = clap::value_parser!(u64).range(1..))]
    read_timeout_ms: u64,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let metrics_file = args.metrics_file.clone().filter(|_| !args.dry_run);
    cli::batch_main("reprocess", args.log_format, metrics_file, |counts| {
        run(args, counts)
    })
}

fn run(args: Args, counts: &mut cli::RunCounts) -> anyhow::Result<u8> {
    let db = cli::db_arg::<Args>(&args.db);
    // Several rows at once: on SQLite through group commit, so that their settlements
    // share fsyncs; one at a time, one connection as before.
    let access = if args.parallel > 1 {
        Access::Batch
    } else {
        Access::Tool
    };
    let ledger = db.open(access, "reprocess")?;
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
    if args.dry_run {
        let rows = ledger.select_resendable(args.max_attempts, args.limit)?;
        return Ok(print_report(
            "reprocess",
            &DryRun::new("reprocess", &rows),
            args.json,
        ));
    }
    let summary = batch::reprocess(
        ledger.as_ref(),
        &core,
        args.max_attempts,
        args.limit,
        args.parallel as usize,
    )
    .with_context(|| format!("ledger {}", db))?;
    counts.record(&summary);
    Ok(print_report("reprocess", &summary, args.json))
}
