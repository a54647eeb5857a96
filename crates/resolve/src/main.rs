//! `resolve`: settles transfers whose outcome is unknown by asking the core. Never POSTs.

mod report;

use std::process::ExitCode;

use clap::Parser;
use cli::{DryRun, EXIT_FATAL, EXIT_LEFT, print_report};
use engine::batch::{self, ResolveError, ResolveSettings};
use engine::transfer::STALE_SENT_FLOOR;
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
#[command(version = cli::VERSION, about)]
struct Args {
    #[command(flatten)]
    ends: Endpoints,
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
    #[command(flatten)]
    batch: BatchRun,
}

// The flags resolve and reprocess share, in this tool's words where they differ.
cli::core_batch_flags! {
    env = "RESOLVE_";
    /// Time allowed to connect to the core.
    connect_timeout_ms;
    /// Time allowed for each later phase of an inquiry.
    read_timeout_ms;
    /// Inquiries made at once, each over its own kept-alive connection to the core.
    parallel;
    /// List the rows that would be examined; no inquiry, no write.
    dry_run;
}

fn main() -> ExitCode {
    BatchOutput::main("resolve", cli::parse::<Args>(), |a| &a.batch.output, run)
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
    let db = cli::db_arg::<Args>(&args.ends.ledger.db);
    let ledger = db.open(args.batch.parallel.access(), "resolve")?;
    // Checked even for --dry-run, so that a dry run also proves the settings.
    let core = args.ends.core.with(&args.batch.timeouts).client()?;
    let settings = ResolveSettings::new(args.min_age)
        .stale_sent(args.stale_sent)
        .max_inquiries(args.max_inquiries)
        .parallel(args.batch.parallel.get());
    if args.batch.output.dry_run {
        let rows = batch::resolve_candidates(ledger.as_ref(), &settings)?;
        return Ok(print_report(
            "resolve",
            &DryRun::new("resolve", &rows),
            args.batch.output.json(),
        ));
    }
    match batch::resolve(ledger.as_ref(), &core, &settings) {
        Ok(summary) => {
            let summary = report::Summary(summary);
            counts.record(&summary);
            Ok(print_report("resolve", &summary, args.batch.output.json()))
        }
        Err(e @ ResolveError::Canary { not_found, .. }) => {
            // A core that does not know our bookings: the settings look wrong (1). A core
            // that could not answer: a later run may do the work (3). Either way a script
            // reading --json gets its one object, saying why nothing changed.
            let code = if not_found { EXIT_FATAL } else { EXIT_LEFT };
            Ok(cli::refuse_run("resolve", &e.to_string(), code))
        }
        Err(e) => Err(anyhow::Error::new(e).context(format!("ledger {}", db))),
    }
}
