//! `reprocess`: resends only what the ledger proves never left the relay, with the same GUID.

mod report;

use std::process::ExitCode;

use clap::Parser;
use cli::{DryRun, EXIT_FATAL, print_report};
use engine::batch::{self, ReprocessError};

/// Resends FAILED rows with rsp_code E902 and fewer than --max-attempts attempts.
#[derive(Parser, Debug)]
#[command(version = cli::VERSION, about)]
struct Args {
    #[command(flatten)]
    ends: Endpoints,
    /// Only rows with fewer attempts than this.
    #[arg(long, env = "REPROCESS_MAX_ATTEMPTS",
          value_parser = clap::value_parser!(i64).range(1..))]
    max_attempts: i64,
    /// Send at most this many rows in one run (oldest first), so that a recovering core is
    /// not hit by a storm. Default: all.
    #[arg(long, env = "REPROCESS_LIMIT")]
    limit: Option<u64>,
    #[command(flatten)]
    batch: BatchRun,
}

// The flags resolve and reprocess share, in this tool's words where they differ.
cli::core_batch_flags! {
    env = "REPROCESS_";
    /// Time allowed to connect to the core; on expiry the row stays FAILED/E902.
    connect_timeout_ms;
    /// Time allowed for each later phase of the call; on expiry the row is UNKNOWN.
    read_timeout_ms;
    /// Rows resent at once, each over its own kept-alive connection to the core. The run
    /// still stops claiming rows at the first one that finds the core unreachable.
    parallel;
    /// List the rows that would be resent; no HTTP, no write.
    dry_run;
}

fn main() -> ExitCode {
    BatchOutput::main("reprocess", cli::parse::<Args>(), |a| &a.batch.output, run)
}

fn run(args: Args, counts: &mut cli::RunCounts) -> anyhow::Result<u8> {
    let db = cli::db_arg::<Args>(&args.ends.ledger.db);
    let ledger = db.open(args.batch.parallel.access(), "reprocess")?;
    // Checked even for --dry-run, so that a dry run also proves the settings.
    let core = args.ends.core.with(&args.batch.timeouts).client()?;
    if args.batch.output.dry_run {
        let rows = ledger.select_resendable(args.max_attempts, args.limit)?;
        return Ok(print_report(
            "reprocess",
            &DryRun::new("reprocess", &rows),
            args.batch.output.json(),
        ));
    }
    let result = batch::reprocess(
        ledger.as_ref(),
        &core,
        args.max_attempts,
        args.limit,
        args.batch.parallel.get(),
        &engine::clock::SystemClock,
    );
    match result {
        Ok(summary) => {
            let summary = report::Summary(summary);
            counts.record(&summary);
            Ok(print_report(
                "reprocess",
                &summary,
                args.batch.output.json(),
            ))
        }
        Err(ReprocessError::Ledger(e)) => {
            Err(anyhow::Error::new(e).context(format!("ledger {}", db)))
        }
        Err(e @ ReprocessError::WrongCore(_)) => {
            // A core that does not know our bookings: the settings look wrong. With --json,
            // the failure object says so on stdout too.
            Ok(cli::refuse_run("reprocess", &e.to_string(), EXIT_FATAL))
        }
    }
}
