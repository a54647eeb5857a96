//! `purge`: deletes finished (DONE) rows past their retention; nothing else, whatever its age.

mod report;

use std::process::ExitCode;

use anyhow::Context;
use clap::error::ErrorKind;
use clap::{CommandFactory, Parser};
use cli::{DryRun, print_report};
use engine::batch;
use ledger::Access;

cli::db_flag! { env = "PURGE_"; }

cli::batch_output_flags! {
    env = "PURGE_";
    /// List the rows that would be deleted; no write.
}

/// Deletes DONE rows last changed more than --days days ago.
#[derive(Parser, Debug)]
#[command(version = cli::VERSION, about)]
struct Args {
    #[command(flatten)]
    ledger: DbFlag,
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
    #[command(flatten)]
    output: BatchOutput,
}

fn main() -> ExitCode {
    let args = cli::parse::<Args>();
    if args.days == 0 && !args.force {
        let e = Args::command().error(
            ErrorKind::ValueValidation,
            "--days 0 deletes every DONE row, and a channel resending one of those GUIDs \
             would be booked again; give --days 1 or more (or --force)",
        );
        cli::usage_exit(e, "purge");
    }
    BatchOutput::main("purge", args, |a| &a.output, run)
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
    let db = cli::db_arg::<Args>(&args.ledger.db);
    let ledger = db.open(Access::Tool, "purge")?;
    if args.output.dry_run {
        let rows = ledger.select_purgeable(args.days)?;
        return Ok(print_report(
            "purge",
            &DryRun::new("purge", &rows),
            args.output.json(),
        ));
    }
    let summary = batch::purge(ledger.as_ref(), args.days, args.history_days)
        .with_context(|| format!("ledger {}", db))?;
    let summary = report::Summary(summary);
    counts.record(&summary);
    Ok(print_report("purge", &summary, args.output.json()))
}
