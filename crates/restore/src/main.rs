//! `restore`: puts an SQLite ledger back from a backup (`ledger::sqlite::restore`), marked
//! recovering since the backup's snapshot minus 5 minutes, with the core's journal entered.
//! A PostgreSQL ledger is restored with the database's own tools, then marked recovering
//! with `inspect recovery --begin`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use cli::{EXIT_SETTLED, EXIT_USAGE, Report, print_report};
use ledger::Db;
use ledger::recovery::normalize;
use ledger::sqlite::restore::{JournalApplied, Restore, restore};
use reconcile::journal;
use serde::Serialize;

cli::db_flag! {
    env = "RESTORE_";
    /// The ledger to put the backup at: the relay's SQLite file (it need not exist; a
    /// postgres:// URL is refused: restore PostgreSQL with its own tools).
}

/// Puts an SQLite ledger back from a backup, while nothing uses it: the backup checked
/// (integrity, schema version), the ledger it replaces kept beside it as
/// DB.before-restore-STAMP (its WAL folded in), the backup's content swapped in atomically
/// with the replaced ledger's owner, group and mode, and marked recovering since the backup's
/// snapshot minus 5 minutes, so that the relay asks the core before it claims a GUID the
/// ledger has forgotten. With --journal, the core's bookings since then are entered.
#[derive(Parser, Debug)]
#[command(version = cli::VERSION, about)]
struct Args {
    /// The backup to put in place (a file `backup` wrote).
    #[arg(long, env = "RESTORE_FROM")]
    from: PathBuf,
    #[command(flatten)]
    ledger: DbFlag,
    /// The core's booking journal (one JSON object a line, CONTRACT §10); may be given more
    /// than once (several days' exports). Every booking at or after the recovery mark is
    /// entered: DONE/0000 for a GUID without a row, a FAILED, UNKNOWN or SENT row settled
    /// DONE/0000; a GUID booked twice is reported and left.
    #[arg(long, env = "RESTORE_JOURNAL")]
    journal: Vec<PathBuf>,
    /// Recovering since this instant (RFC 3339 with an offset) instead of the backup's
    /// snapshot minus 5 minutes; needed for a backup without a recorded snapshot time. The
    /// earlier of the two is taken when both are known.
    #[arg(long, env = "RESTORE_SINCE", value_parser = rfc3339)]
    since: Option<String>,
    #[command(flatten)]
    json: cli::JsonFlag,
}

fn rfc3339(s: &str) -> Result<String, String> {
    normalize(s).ok_or_else(|| format!("{s:?} is not an instant in RFC 3339 with an offset"))
}

fn main() -> ExitCode {
    let args = cli::parse::<Args>();
    cli::main("restore", || run(args))
}

fn run(args: Args) -> anyhow::Result<u8> {
    let path = match cli::db_arg::<Args>(&args.ledger.db) {
        Db::Sqlite(path) => path,
        Db::Postgres(url) => {
            let message = format!(
                "--db {url} is a PostgreSQL ledger: restore it with PostgreSQL's own tools \
                 (point-in-time recovery, PITR, from pg_basebackup and the WAL archive), then \
                 mark it recovering with `inspect recovery --begin --since RFC3339`"
            );
            cli::stderr_line("restore", log::Level::Error, &message);
            cli::print_failure("restore", &message, EXIT_USAGE);
            return Ok(EXIT_USAGE);
        }
    };
    // Every journal is read, and refused if bad, before the ledger is touched.
    let bookings = journal::read_bookings(&args.journal)?;
    let who = format!("restore (by {})", ledger::identity::operator());
    let done = restore(&Restore {
        from: &args.from,
        db: &path,
        since: args.since.as_deref(),
        bookings: &bookings,
        who: &who,
    })?;
    let summary = Summary {
        db: done.db.display().to_string(),
        from: done.from.display().to_string(),
        snapshot_at: done.snapshot_at.clone(),
        total: done.total(),
        rows: done.rows.clone(),
        recovering_since: done.recovering_since.clone(),
        before_restore: done
            .before_restore
            .as_ref()
            .map(|p| p.display().to_string()),
        journals: args.journal.len(),
        journal: done.journal,
    };
    Ok(print_report("restore", &summary, args.json.json))
}

/// What a restore printed.
#[derive(Serialize)]
struct Summary {
    db: String,
    from: String,
    /// When the backup's snapshot was taken (RFC 3339, UTC); null for a backup without one.
    snapshot_at: Option<String>,
    rows: BTreeMap<String, u64>,
    total: u64,
    /// Since when the restored ledger is recovering (RFC 3339, UTC).
    recovering_since: String,
    /// Where the ledger it replaced is kept; null when there was none.
    before_restore: Option<String>,
    /// How many --journal files were read.
    journals: usize,
    journal: JournalApplied,
}

impl Report for Summary {
    fn line(&self) -> String {
        let snapshot = match &self.snapshot_at {
            Some(s) => format!("snapshot_at={s}"),
            None => "no snapshot_at recorded".into(),
        };
        let kept = match &self.before_restore {
            Some(p) => format!("kept {p}"),
            None => "no ledger was there to keep".into(),
        };
        format!(
            "restore: {} from {} ({snapshot}), {} rows{}, recovering since {}, {kept}, \
             journal: {}",
            self.db,
            self.from,
            self.total,
            by_state(&self.rows),
            self.recovering_since,
            journal_text(self.journals, &self.journal)
        )
    }

    fn exit_code(&self) -> u8 {
        EXIT_SETTLED
    }
}

/// ` (DONE 3, UNKNOWN 1)`, or nothing for an empty ledger.
fn by_state(rows: &BTreeMap<String, u64>) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let parts: Vec<String> = rows.iter().map(|(s, n)| format!("{s} {n}")).collect();
    format!(" ({})", parts.join(", "))
}

/// What the journal changed, in words.
fn journal_text(files: usize, j: &JournalApplied) -> String {
    if files == 0 {
        return "none given".into();
    }
    j.to_string()
}
