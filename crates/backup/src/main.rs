//! `backup`: an online backup of an SQLite ledger while the relay runs, into one checked,
//! self-contained file (`ledger::sqlite::backup`). A PostgreSQL ledger is backed up with the
//! database's own tools.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use cli::{EXIT_SETTLED, EXIT_USAGE, Report, print_report};
use ledger::Db;
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
    #[command(flatten)]
    json: cli::JsonFlag,
}

fn main() -> ExitCode {
    let args = cli::parse::<Args>();
    cli::main("backup", || run(args))
}

fn run(args: Args) -> anyhow::Result<u8> {
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
    let done = ledger::sqlite::backup::backup(&path, &args.to, args.force)?;
    let summary = Summary {
        to: done.to.display().to_string(),
        total: done.total(),
        bytes: done.bytes,
        seconds: started.elapsed().as_secs_f64(),
        rows: done.rows,
        snapshot_at: done.snapshot_at,
    };
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
        format!(
            "backup: {} rows{by_state} in {}, {} bytes, {:.2} s, snapshot_at={}",
            self.total, self.to, self.bytes, self.seconds, self.snapshot_at
        )
    }

    fn exit_code(&self) -> u8 {
        EXIT_SETTLED
    }
}
