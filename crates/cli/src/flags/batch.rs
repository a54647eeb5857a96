//! What the batch tools that call the core (resolve, reprocess) share: every flag but their
//! own selection, declared once per tool by [`core_batch_flags!`](crate::core_batch_flags).

/// Declares in the calling module, with the tool's environment prefix, what resolve and
/// reprocess share: `Endpoints`, the flags before their own (`--db` then `--core` and its TLS
/// files, as `ledger: DbFlag` and `core: CoreFlags`), and `BatchRun`, those after them
/// (`parallel: ParallelFlag`, `output: BatchOutput` and `timeouts: CoreTimeouts`); the help
/// of the two timeouts, `--parallel` and `--dry-run` the doc comments given.
#[macro_export]
macro_rules! core_batch_flags {
    (
        env = $prefix:literal;
        $(#[$connect:meta])+ connect_timeout_ms;
        $(#[$read:meta])+ read_timeout_ms;
        $(#[$parallel:meta])+ parallel;
        $(#[$dry_run:meta])+ dry_run;
    ) => {
        $crate::db_flag! { env = $prefix; }
        $crate::core_flags! {
            env = $prefix;
            /// Base URL of the core banking system.
            core;
            $(#[$connect])+ connect_timeout_ms;
            $(#[$read])+ read_timeout_ms;
        }
        $crate::parallel_flag! { env = $prefix; $(#[$parallel])+ }
        $crate::batch_output_flags! { env = $prefix; $(#[$dry_run])+ }

        /// The ledger, and the core its rows are settled at.
        #[derive(clap::Args, Debug)]
        struct Endpoints {
            #[command(flatten)]
            ledger: DbFlag,
            #[command(flatten)]
            core: CoreFlags,
        }

        /// How the run goes: how many rows at once, what it prints and writes, how long a
        /// call to the core may take.
        #[derive(clap::Args, Debug)]
        struct BatchRun {
            #[command(flatten)]
            parallel: ParallelFlag,
            #[command(flatten)]
            output: BatchOutput,
            #[command(flatten)]
            timeouts: CoreTimeouts,
        }
    };
}
