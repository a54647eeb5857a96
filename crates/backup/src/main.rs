//! `backup`: an online backup of an SQLite ledger while the relay runs, into one checked,
//! self-contained file (`ledger::sqlite::backup`). A PostgreSQL ledger is backed up with the
//! database's own tools.
//!
//! The timer's retention lives here too (`--keep`, `--min-free`), not in its unit: one place
//! decides which copies go and when a copy would fill the disk, the same by hand as under
//! systemd, and it is tested.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::error::ErrorKind;
use clap::{CommandFactory, Parser};
use cli::{EXIT_SETTLED, EXIT_USAGE, LogFormat, Report, print_report};
use ledger::Db;
use ledger::sqlite::backup::keep::{MIN_DIGITS, Series};
use ledger::sqlite::backup::space::MinFree;
use ledger::sqlite::backup::{Options, backup_with};
use serde::Serialize;

cli::db_flag! {
    env = "BACKUP_";
    /// The ledger to back up: the relay's SQLite file (a postgres:// URL is refused: back
    /// PostgreSQL up with its own tools).
}

/// Backs up an SQLite ledger while the relay runs (a snapshot by VACUUM INTO, which does not
/// hold the relay up), into one self-contained file: written beside --to, checked
/// (integrity_check, rows counted), synced, then renamed onto --to. Never `cp` the ledger: its
/// newest claims are in the -wal file.
#[derive(Parser, Debug)]
#[command(version = cli::VERSION, about)]
struct Args {
    #[command(flatten)]
    ledger: DbFlag,
    /// The backup file to write (mode 0600); an existing file is refused unless --force.
    #[arg(long, env = "BACKUP_TO")]
    to: PathBuf,
    /// Replace an existing --to.
    #[arg(long)]
    force: bool,
    /// After a backup, keep only the N newest copies named like --to in its folder (the same
    /// name but for its digits: ledger-YYYYMMDD-HHMM.db), the new one included, and delete the
    /// older ones; those past N are deleted before the copy is written too. Only backup
    /// copies are deleted (files backup sealed, never a ledger), never files of other names.
    /// Unset: nothing is deleted.
    #[arg(long, env = "BACKUP_KEEP", value_name = "N",
          value_parser = clap::value_parser!(u64).range(1..))]
    keep: Option<u64>,
    /// Refuse (exit 1, nothing written) a backup that would leave less than this free on
    /// --to's filesystem, the copy estimated as the ledger's pages: a whole percentage of
    /// the filesystem (10%) or bytes (1073741824, 512MiB, 1GiB). 0 still refuses a copy
    /// larger than the free space. The package's timer sets 10%.
    #[arg(long, env = "BACKUP_MIN_FREE", value_name = "SIZE", default_value_t = MinFree::DEFAULT,
          value_parser = min_free)]
    min_free: MinFree,
    #[command(flatten)]
    json: cli::JsonFlag,
    /// Also write the run's exit code and rows copied to this file, in the Prometheus text
    /// format (node_exporter's textfile collector); replaced atomically, a refused or failed
    /// run's too.
    #[arg(long, env = "BACKUP_METRICS_FILE")]
    metrics_file: Option<PathBuf>,
}

fn min_free(s: &str) -> Result<MinFree, String> {
    s.parse()
}

fn main() -> ExitCode {
    let args = cli::parse::<Args>();
    if args.keep.is_some() && Series::of(&args.to).is_none() {
        let e = Args::command().error(
            ErrorKind::ArgumentConflict,
            format!(
                "--keep (BACKUP_KEEP) needs a --to with the time in its name (at least \
                 {MIN_DIGITS} digits, as in ledger-YYYYMMDD-HHMM.db): the copies it keeps are \
                 told by name; {} has none",
                args.to.display()
            ),
        );
        cli::usage_exit(e, "backup");
    }
    if std::env::var_os("BACKUP_KEEP_DAYS").is_some() {
        cli::stderr_line(
            "backup",
            log::Level::Warn,
            "BACKUP_KEEP_DAYS is no longer read: copies are kept by count, BACKUP_KEEP \
             (--keep)",
        );
    }
    let metrics_file = args.metrics_file.clone();
    cli::batch_main("backup", LogFormat::Text, metrics_file, |counts| {
        run(args, counts)
    })
}

fn run(args: Args, counts: &mut cli::RunCounts) -> anyhow::Result<u8> {
    let path = match cli::db_arg::<Args>(&args.ledger.db) {
        Db::Sqlite(path) => path,
        Db::Postgres(url) => {
            let message = format!(
                "--db {url} is a PostgreSQL ledger: back it up with PostgreSQL's own tools \
                 (pg_dump, or pg_basebackup with WAL archiving for point-in-time recovery)"
            );
            cli::stderr_line("backup", log::Level::Error, &message);
            cli::print_failure("backup", &message, EXIT_USAGE);
            return Ok(EXIT_USAGE);
        }
    };
    let started = Instant::now();
    let options = Options {
        replace: args.force,
        keep: args.keep.map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
        min_free: args.min_free,
    };
    let done = backup_with(&path, &args.to, &options)?;
    let summary = Summary {
        to: done.to.display().to_string(),
        total: done.total(),
        bytes: done.bytes,
        seconds: started.elapsed().as_secs_f64(),
        rows: done.rows,
        keep: args.keep,
        deleted: done
            .deleted
            .iter()
            .map(|p| p.display().to_string())
            .collect(),
        snapshot_at: done.snapshot_at,
    };
    counts.record(&summary);
    Ok(print_report("backup", &summary, args.json.json))
}

/// What a backup printed: the rows the copy holds, by state.
#[derive(Serialize)]
struct Summary {
    to: String,
    rows: BTreeMap<String, u64>,
    total: u64,
    bytes: u64,
    seconds: f64,
    /// `--keep`, if given.
    keep: Option<u64>,
    /// The older copies deleted by `--keep`, oldest first.
    deleted: Vec<String>,
    /// When the snapshot was taken (RFC 3339, UTC): a restore of this copy is recovering
    /// from this instant (minus a margin), and reconcile's window starts there.
    snapshot_at: String,
}

impl Report for Summary {
    fn line(&self) -> String {
        let by_state: Vec<String> = self.rows.iter().map(|(s, n)| format!("{s} {n}")).collect();
        let by_state = if by_state.is_empty() {
            String::new()
        } else {
            format!(" ({})", by_state.join(", "))
        };
        let kept = match self.keep {
            Some(n) => format!(", {} older copies deleted (--keep {n})", self.deleted.len()),
            None => String::new(),
        };
        format!(
            "backup: {} rows{by_state} in {}, {} bytes, {:.2} s{kept}, snapshot_at={}",
            self.total, self.to, self.bytes, self.seconds, self.snapshot_at
        )
    }

    fn exit_code(&self) -> u8 {
        EXIT_SETTLED
    }

    fn counts(&self) -> Vec<(&'static str, u64)> {
        vec![("copied", self.total)]
    }
}
