//! `purge`: deletes finished (DONE) rows past their retention; nothing else, whatever its age.

use std::process::ExitCode;

use anyhow::Context;
use clap::error::ErrorKind;
use clap::{CommandFactory, Parser};
use cli::{DryRun, print_report};
use engine::batch;
use ledger::Access;

/// Deletes DONE rows last changed more than --days days ago.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// The ledger: the relay's SQLite file, or a postgres:// URL.
    #[arg(long, env = "PURGE_DB", hide_env_values = true)]
    db: String,
    /// Retention in days; must exceed the longest time a channel may resend a GUID (a
    /// resend after the purge books again). At least 1 unless --force.
    #[arg(long, env = "PURGE_DAYS")]
    days: u64,
    /// Allow --days 0 (every DONE row, whatever its age).
    #[arg(long)]
    force: bool,
    /// Also delete history rows (tx_history) older than this many days; off by default
    /// (history is kept for ever). Only of GUIDs no longer in doubt: purged, or DONE and older
    /// than --days; a row in doubt keeps its whole history.
    #[arg(long, env = "PURGE_HISTORY_DAYS", value_parser = clap::value_parser!(u64).range(1..))]
    history_days: Option<u64>,
    /// List the rows that would be deleted; no write.
    #[arg(long)]
    dry_run: bool,
    /// Print the summary as one JSON object.
    #[arg(long)]
    json: bool,
    /// Log lines on stderr: text, or one JSON object a line.
    #[arg(long, env = "PURGE_LOG_FORMAT", value_enum, default_value_t = cli::LogFormat::Text)]
    log_format: cli::LogFormat,
    /// Also write the run's counts and exit code to this file, in the Prometheus text
    /// format (for node_exporter's textfile collector); replaced atomically. Not on --dry-run.
    #[arg(long, env = "PURGE_METRICS_FILE")]
    metrics_file: Option<std::path::PathBuf>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    if args.days == 0 && !args.force {
        Args::command()
            .error(
                ErrorKind::ValueValidation,
                "--days 0 deletes every DONE row, and a channel resending one of those GUIDs \
                 would be booked again; give --days 1 or more (or --force)",
            )
            .exit();
    }
    let metrics_file = args.metrics_file.clone().filter(|_| !args.dry_run);
    cli::batch_main("purge", args.log_format, metrics_file, |counts| {
        run(args, counts)
    })
}

fn run(args: Args, counts: &mut cli::RunCounts) -> anyhow::Result<u8> {
    if args.days == 0 {
        cli::stderr_line(
            "purge",
            log::Level::Warn,
            "--days 0 --force deletes every DONE row; a channel resending one of those GUIDs \
             later would be booked again",
        );
    }
    let db = cli::db_arg::<Args>(&args.db);
    let ledger = db.open(Access::Tool, "purge")?;
    if args.dry_run {
        let rows = ledger.select_purgeable(args.days)?;
        return Ok(print_report(
            "purge",
            &DryRun::new("purge", &rows),
            args.json,
        ));
    }
    let summary = batch::purge(ledger.as_ref(), args.days, args.history_days)
        .with_context(|| format!("ledger {}", db))?;
    counts.record(&summary);
    Ok(print_report("purge", &summary, args.json))
}
