//! The flags the tools share besides the core's: `--db` and its hidden environment twin,
//! `--json`, `--log-format`, `--metrics-file` and `--parallel`. Those with an environment twin
//! are declared per tool by a macro given the tool's prefix (`"RESOLVE_"`); `--json` has none
//! and is one struct, [`JsonFlag`].

use ledger::Access;

/// `--json`, as the batch tools and `migrate` print their summary.
#[derive(clap::Args, Debug)]
pub struct JsonFlag {
    /// Print the summary as one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// How a batch tool opens the ledger for `parallel` rows at once: several on SQLite through
/// group commit, so that their settlements share fsyncs; one at a time, one connection.
pub fn batch_access(parallel: u64) -> Access {
    if parallel > 1 {
        Access::Batch
    } else {
        Access::Tool
    }
}

/// Declares `DbFlag` in the calling module: `--db`, its environment twin `{env}DB` with its
/// value hidden (a URL may hold a password). Its help is the doc comment given, else the
/// batch tools' "The ledger: the relay's SQLite file, or a postgres:// URL.".
#[macro_export]
macro_rules! db_flag {
    (env = $prefix:literal;) => {
        $crate::db_flag! {
            env = $prefix;
            /// The ledger: the relay's SQLite file, or a postgres:// URL.
        }
    };
    (env = $prefix:literal; $(#[$help:meta])+) => {
        /// The ledger.
        #[derive(clap::Args, Debug)]
        struct DbFlag {
            $(#[$help])+
            #[arg(long, env = concat!($prefix, "DB"), hide_env_values = true)]
            db: String,
        }
    };
}

/// Declares `LogFormatFlag` in the calling module: `--log-format` (text or json), its
/// environment twin `{env}LOG_FORMAT`.
#[macro_export]
macro_rules! log_format_flag {
    (env = $prefix:literal;) => {
        /// How log lines are written.
        #[derive(clap::Args, Debug)]
        struct LogFormatFlag {
            /// Log lines on stderr: text, or one JSON object a line.
            #[arg(long, env = concat!($prefix, "LOG_FORMAT"), value_enum,
                                                  default_value_t = $crate::LogFormat::Text)]
            log_format: $crate::LogFormat,
        }
    };
}

/// Declares `BatchOutput` in the calling module (and the `LogFormatFlag` it holds): what a
/// batch tool's run prints and writes, `--dry-run` (its help the doc comment given), `--json`,
/// `--log-format` and `--metrics-file`, the last two with environment twins named with `env`.
/// `BatchOutput::main` is the tool's `main`.
#[macro_export]
macro_rules! batch_output_flags {
    (env = $prefix:literal; $(#[$dry_run:meta])+) => {
        $crate::log_format_flag! { env = $prefix; }

        /// What the run prints and writes.
        #[derive(clap::Args, Debug)]
        struct BatchOutput {
            $(#[$dry_run])+
            #[arg(long)]
            dry_run: bool,
            #[command(flatten)]
            json: $crate::JsonFlag,
            #[command(flatten)]
            log: LogFormatFlag,
            /// Also write the run's counts and exit code to this file, in the Prometheus text
            /// format (for node_exporter's textfile collector); replaced atomically. Not on
            /// --dry-run.
            #[arg(long, env = concat!($prefix, "METRICS_FILE"))]
            metrics_file: Option<std::path::PathBuf>,
        }

        impl BatchOutput {
            /// `--json`.
            fn json(&self) -> bool {
                self.json.json
            }

            /// The tool's `main`: [`cli::batch_main`]($crate::batch_main) with the flags of
            /// `args` that `output` picks, `--log-format`, and `--metrics-file` unless
            /// `--dry-run` (a dry run writes nothing).
            fn main<A>(
                tool: &str,
                args: A,
                output: impl Fn(&A) -> &BatchOutput,
                run: impl FnOnce(A, &mut $crate::RunCounts) -> $crate::flags::anyhow::Result<u8>,
            ) -> std::process::ExitCode {
                let o = output(&args);
                let metrics_file = o.metrics_file.clone().filter(|_| !o.dry_run);
                $crate::batch_main(tool, o.log.log_format, metrics_file, |counts| {
                    run(args, counts)
                })
            }
        }
    };
}

/// Declares `ParallelFlag` in the calling module: `--parallel` (default
/// `engine::batch::DEFAULT_PARALLEL`, from 1 to `MAX_PARALLEL`), its environment twin
/// `{env}PARALLEL`, its help the doc comment given; `get()` the number, `access()` how
/// the ledger is opened for it ([`batch_access`]).
#[macro_export]
macro_rules! parallel_flag {
    (env = $prefix:literal; $(#[$help:meta])+) => {
        /// How many rows at once.
        #[derive(clap::Args, Debug)]
        struct ParallelFlag {
            $(#[$help])+
            #[arg(long, env = concat!($prefix, "PARALLEL"),
                  default_value_t = $crate::flags::DEFAULT_PARALLEL as u64,
                  value_parser = clap::value_parser!(u64)
                      .range(1..=$crate::flags::MAX_PARALLEL as u64))]
            parallel: u64,
        }

        impl ParallelFlag {
            /// How many at once.
            fn get(&self) -> usize {
                self.parallel as usize
            }

            /// How to open the ledger for that many at once.
            fn access(&self) -> $crate::flags::Access {
                $crate::flags::batch_access(self.parallel)
            }
        }
    };
}
