//! `reconcile`: the ledger against the core's booking journal (CONTRACT §10). Reads the
//! ledger read-only (no schema, no write, no core call) and the journal (one file or several,
//! read as one) as a stream; prints one line per break and a summary line, or one JSON object
//! with `--json`.
//!
//! Exit codes: 0 no break, 1 at least one break, 2 bad flags (or a window that cannot be
//! made), 3 the journal or the ledger cannot be read (one line on stderr naming it).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::error::ErrorKind;
use clap::{CommandFactory, Parser};
use ledger::Access;
use reconcile::time::{Secs, parse_rfc3339};
use reconcile::{Class, Reconciler, Report, Window, journal};
use serde::Serialize;

cli::db_flag! {
    env = "RECONCILE_";
    /// The ledger, opened read-only: the relay's SQLite file, or a postgres:// URL.
}

cli::log_format_flag! { env = "RECONCILE_"; }

/// Exit code: no break.
const EXIT_CLEAN: u8 = 0;
/// Exit code: at least one break.
const EXIT_BREAKS: u8 = 1;
/// Exit code: the journal or the ledger cannot be read.
const EXIT_UNREADABLE: u8 = 3;

/// Reconciles the ledger against the core's booking journal, read-only.
#[derive(Parser, Debug)]
#[command(version = cli::VERSION, about)]
struct Args {
    #[command(flatten)]
    ledger: DbFlag,
    /// The core's booking journal: one JSON object a line,
    /// {"guid","core_ref","amount","booked_at"}. May be given more than once (several days'
    /// exports, read as one journal): a GUID the core booked again on another day is then seen
    /// booked twice. The environment twin names one file.
    #[arg(long, env = "RECONCILE_JOURNAL", required = true)]
    journal: Vec<PathBuf>,
    /// Start of the window (RFC 3339 with an offset, included); default: the journal's
    /// earliest booked_at.
    #[arg(long, env = "RECONCILE_FROM", value_parser = rfc3339)]
    from: Option<Secs>,
    /// End of the window (RFC 3339 with an offset, excluded); default: one second after the
    /// journal's latest booked_at.
    #[arg(long, env = "RECONCILE_TO", value_parser = rfc3339)]
    to: Option<Secs>,
    #[command(flatten)]
    json: cli::JsonFlag,
    #[command(flatten)]
    log: LogFormatFlag,
    /// Also write the counts per class and the exit code to this file, in the Prometheus
    /// text format (node_exporter's textfile collector); replaced atomically.
    #[arg(long, env = "RECONCILE_METRICS_FILE")]
    metrics_file: Option<PathBuf>,
}

fn rfc3339(s: &str) -> Result<Secs, String> {
    parse_rfc3339(s)
}

fn main() -> ExitCode {
    let args = cli::parse::<Args>();
    if let (Some(from), Some(to)) = (args.from, args.to)
        && let Err(e) = Window::decide(Some(from), Some(to), None)
    {
        usage(&e.to_string());
    }
    let (log_format, metrics_file) = (args.log.log_format, args.metrics_file.clone());
    cli::batch_main("reconcile", log_format, metrics_file, |counts| {
        Ok(run(args, counts))
    })
}

fn usage(message: &str) -> ! {
    let e = Args::command().error(ErrorKind::ArgumentConflict, message);
    cli::usage_exit(e, "reconcile")
}

/// One line on stderr (and the failure object with `--json`): exit 3.
fn unreadable(message: &str) -> u8 {
    cli::stderr_line("reconcile", log::Level::Error, message);
    cli::print_failure("reconcile", message, EXIT_UNREADABLE);
    EXIT_UNREADABLE
}

fn run(args: Args, counts: &mut cli::RunCounts) -> u8 {
    let journal = match journal::read_all(&args.journal) {
        Ok(j) => j,
        Err(e) => return unreadable(&e.to_string()),
    };
    let window = match Window::decide(args.from, args.to, journal.span) {
        Ok(w) => w,
        Err(e) => usage(&e.to_string()),
    };
    let db = cli::db_arg::<Args>(&args.ledger.db);
    let store = match db.open(Access::ReadOnly, "reconcile") {
        Ok(s) => s,
        Err(e) => return unreadable(&format!("ledger {db}: {e}")),
    };
    let mut r = Reconciler::new(journal, window);
    if let Err(e) = store.scan_for_reconcile(&mut |row| r.row(row)) {
        return unreadable(&format!("ledger {db}: {e}"));
    }
    let shown = Shown(r.finish());
    counts.record(&shown);
    cli::print_report("reconcile", &shown, args.json.json)
}

/// The report as the tools print theirs.
#[derive(Serialize)]
#[serde(transparent)]
struct Shown(Report);

impl cli::Report for Shown {
    fn line(&self) -> String {
        let mut out = String::new();
        for b in &self.0.breaks {
            out.push_str(&b.line());
            out.push('\n');
        }
        out.push_str(&self.0.summary());
        out
    }

    fn exit_code(&self) -> u8 {
        if self.0.counts.breaks() > 0 {
            EXIT_BREAKS
        } else {
            EXIT_CLEAN
        }
    }

    fn counts(&self) -> Vec<(&'static str, u64)> {
        Class::ALL
            .iter()
            .map(|&c| (c.as_str(), self.0.counts.get(c)))
            .collect()
    }
}
