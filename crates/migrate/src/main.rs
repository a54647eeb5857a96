//! `migrate`: copies an SQLite ledger into a PostgreSQL one, every row byte for byte with its
//! `updated_at`, never overwriting: a GUID already there with the same content is counted,
//! one with other content is reported and left (exit 3; the SQLite ledger stays as it was,
//! and a later run copies what is missing). The SQLite ledger's write lock is held for the
//! whole copy (a ledger in use is refused, exit 1); a copy with nothing refused seals the
//! SQLite ledger, after which every tool refuses it, naming where it went. A ledger with a
//! settlement request still undecided is refused (exit 1): the sealed file would keep a
//! request nobody could decide any more.

use std::process::ExitCode;

use clap::Parser;
use cli::print_report;
use ledger::Db;
use ledger::migrate::LockedSource;
use ledger::postgres::{PgStore, Settings};

/// Copies every row of an SQLite ledger into a PostgreSQL ledger, holding the SQLite
/// ledger's write lock (stop the relays and the batch tools first); then marks the SQLite
/// ledger moved, so that no tool uses it again.
#[derive(Parser, Debug)]
#[command(version = cli::VERSION, about)]
struct Args {
    /// The SQLite ledger to copy (locked for the copy, then marked moved).
    #[arg(long, env = "MIGRATE_FROM")]
    from: String,
    /// The PostgreSQL ledger to copy into (postgres://…; its schema is applied).
    #[arg(long, env = "MIGRATE_TO", hide_env_values = true)]
    to: String,
    #[command(flatten)]
    json: cli::JsonFlag,
}

fn main() -> ExitCode {
    let args = cli::parse::<Args>();
    cli::main("migrate", || run(args))
}

fn run(args: Args) -> anyhow::Result<u8> {
    let from = cli::db_arg::<Args>(&args.from);
    let Db::Sqlite(path) = &from else {
        anyhow::bail!("--from must be an SQLite ledger (a file path), not {from}");
    };
    let to = cli::db_arg::<Args>(&args.to);
    let Db::Postgres(url) = &to else {
        anyhow::bail!("--to must be a PostgreSQL ledger (postgres://…), not {to}");
    };
    let source = LockedSource::lock(path)?;
    let open = source.undecided_requests()?;
    if open.pending + open.expired > 0 {
        anyhow::bail!(
            "ledger {} has {} settlement request(s) pending and {} expired undecided: approve \
             or reject them first (inspect requests --all), since the copy carries rows, not \
             requests; nothing copied",
            path.display(),
            open.pending,
            open.expired
        );
    }
    let target = PgStore::open(
        (**url).clone(),
        Settings {
            max: 1,
            op_deadline: ledger::db::PG_OP_DEADLINE,
            read_only: false,
            application_name: "txrelay-migrate".into(),
            who: "migrate".into(),
        },
    )?;
    let summary = ledger::migrate::copy(&source, &target)?;
    // Every row is in PostgreSQL: only now is the SQLite ledger marked moved (its Display
    // masks the password). Otherwise the lock is let go, nothing written to it.
    if summary.refused == 0 {
        source.seal(&to.to_string())?;
    } else {
        drop(source);
    }
    Ok(print_report("migrate", &summary, args.json.json))
}
