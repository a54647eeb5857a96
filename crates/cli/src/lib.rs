//! What the tools share in talking to people: the `main` they all have (logging, the run, the
//! one-line fatal error, the exit code), their exit codes, and how a run's summary is printed
//! (one line, or one JSON object with `--json`), and the flags they share (`flags`, each
//! written once). The ledger library returns values; this crate turns them into text.

mod failure;
#[cfg(feature = "tools")]
pub mod flags;
mod generate;
mod logging;
#[cfg(feature = "tools")]
mod metrics_file;
mod out;
mod parse;
#[cfg(feature = "tools")]
pub mod report;

#[cfg(feature = "tools")]
use std::path::PathBuf;
use std::process::ExitCode;
#[cfg(feature = "tools")]
use std::time::Instant;

pub use failure::{json_failures, print_failure, print_object, refuse_run, usage_exit};
#[cfg(feature = "core")]
pub use flags::Core;
#[cfg(feature = "tools")]
pub use flags::JsonFlag;
pub use generate::{GENERATE_ENV, generate_if_asked, write_all as write_docs};
pub use logging::{LogFormat, stderr_line};
#[cfg(feature = "tools")]
pub use metrics_file::RunCounts;
pub use out::print_args;
pub use parse::{parse, parse_from, try_parse_from};
#[cfg(feature = "tools")]
pub use report::{DryRun, Listed, Report, print_report};

/// The commit the binaries were built from (`build.rs`: `TXRELAY_COMMIT`, else `git
/// rev-parse --short HEAD`, else `unknown`): every tool's `--version`, the relay's
/// `txrelay_build_info` and the batch tools' `--metrics-file`.
pub const COMMIT: &str = env!("TXRELAY_COMMIT");

/// What every tool's `--version` prints after its name: the version and the commit it was
/// built from (`0.1.0 (commit 1a2b3c4)`).
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("TXRELAY_COMMIT"),
    ")"
);

/// Exit codes of the tools.
pub const EXIT_SETTLED: u8 = 0;
pub const EXIT_FATAL: u8 = 1;
pub const EXIT_USAGE: u8 = 2;
pub const EXIT_LEFT: u8 = 3;

/// A tool's `main`: logs to stderr (`RUST_LOG`, default `info`), runs `run`, and turns an
/// error into one line `tool: what went wrong` and exit code 1.
pub fn main(tool: &str, run: impl FnOnce() -> anyhow::Result<u8>) -> ExitCode {
    main_logged(tool, LogFormat::Text, run)
}

/// `main` with the log lines in `log_format` (`--log-format`); the fatal error line too.
pub fn main_logged(
    tool: &str,
    log_format: LogFormat,
    run: impl FnOnce() -> anyhow::Result<u8>,
) -> ExitCode {
    logging::init(log_format);
    ExitCode::from(exit_code(tool, run()))
}

#[cfg(feature = "tools")]
/// A batch tool's `main`: `main_logged`, and with `metrics_file` (`--metrics-file`; `None`
/// for a dry run) the run's counts (what `run` recorded) and exit code written to that file
/// when the run ends, fatal errors included. A file that cannot be written is one warning
/// line; the exit code stays the run's.
pub fn batch_main(
    tool: &str,
    log_format: LogFormat,
    metrics_file: Option<PathBuf>,
    run: impl FnOnce(&mut RunCounts) -> anyhow::Result<u8>,
) -> ExitCode {
    logging::init(log_format);
    let started = Instant::now();
    let mut counts = RunCounts::default();
    let code = exit_code(tool, run(&mut counts));
    if let Some(path) = metrics_file {
        let text = metrics_file::render(tool, &counts, code, started.elapsed());
        if let Err(e) = metrics_file::write_atomically(&path, &text) {
            stderr_line(
                tool,
                log::Level::Warn,
                &format!("cannot write --metrics-file {}: {e}", path.display()),
            );
        }
    }
    ExitCode::from(code)
}

/// The run's exit code; an error is one line on stderr and exit code 1. So is stdout
/// failing for another reason than a reader that has gone (`out`), which changes nothing.
fn exit_code(tool: &str, result: anyhow::Result<u8>) -> u8 {
    let code = match result {
        Ok(code) => code,
        Err(e) => {
            let message = format!("{e:#}");
            stderr_line(tool, log::Level::Error, &message);
            print_failure(tool, &message, EXIT_FATAL);
            EXIT_FATAL
        }
    };
    log_limit::flush_all();
    match out::take_failure() {
        Some(e) => {
            let message = format!("cannot write to stdout: {e}");
            stderr_line(tool, log::Level::Error, &message);
            EXIT_FATAL
        }
        None => code,
    }
}

#[cfg(feature = "tools")]
/// `--db` as given (a path or a PostgreSQL URL). A URL that cannot be used is a usage
/// error (exit 2) naming `--db`, with the password masked: clap would echo the raw value.
pub fn db_arg<A: clap::CommandFactory>(value: &str) -> ledger::Db {
    match value.parse() {
        Ok(db) => db,
        Err(e) => {
            let mut cmd = A::command();
            let tool = cmd.get_name().to_string();
            let e = cmd.error(
                clap::error::ErrorKind::ValueValidation,
                format!("invalid value for --db: {e}"),
            );
            usage_exit(e, &tool)
        }
    }
}
