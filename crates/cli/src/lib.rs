//! What the tools share in talking to people: the `main` they all have (logging, the run, the
//! one-line fatal error, the exit code), their exit codes, and how a run's summary is printed
//! (one line, or one JSON object with `--json`). The ledger library returns values; this
//! crate turns them into text.

mod report;

use std::process::ExitCode;

pub use report::{DryRun, Listed, Report, print_report};

/// Exit codes of the tools.
pub const EXIT_SETTLED: u8 = 0;
pub const EXIT_FATAL: u8 = 1;
pub const EXIT_USAGE: u8 = 2;
pub const EXIT_LEFT: u8 = 3;

/// A tool's `main`: logs to stderr (`RUST_LOG`, default `info`), runs `run`, and turns an
/// error into one line `tool: what went wrong` and exit code 1.
pub fn main(tool: &str, run: impl FnOnce() -> anyhow::Result<u8>) -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
    match run() {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("{tool}: {e:#}");
            ExitCode::from(EXIT_FATAL)
        }
    }
}

/// `--db` as given (a path or a PostgreSQL URL). A URL that cannot be used is a usage
/// error (exit 2) naming `--db`, with the password masked: clap would echo the raw value.
pub fn db_arg<A: clap::CommandFactory>(value: &str) -> ledger::Db {
    match value.parse() {
        Ok(db) => db,
        Err(e) => A::command()
            .error(
                clap::error::ErrorKind::ValueValidation,
                format!("invalid value for --db: {e}"),
            )
            .exit(),
    }
}
