//! `migrate`: copies an SQLite ledger into a PostgreSQL one, every row byte for byte with its
//! `updated_at`, never overwriting: a GUID already there with the same content is counted,
//! one with other content is reported and left. Running it again is harmless.

use std::process::ExitCode;

use clap::Parser;
use cli::print_report;
use ledger::postgres::{PgStore, Settings};
use ledger::{Access, Db};

/// Copies every row of an SQLite ledger into a PostgreSQL ledger (stop the relays first).
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// The SQLite ledger to copy (opened read-only).
    #[arg(long, env = "MIGRATE_FROM")]
    from: String,
    /// The PostgreSQL ledger to copy into (postgres://…; its schema is applied).
    #[arg(long, env = "MIGRATE_TO", hide_env_values = true)]
    to: String,
    /// Print the summary as one JSON object.
    #[arg(long)]
    json: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    cli::main("migrate", || run(args))
}

fn run(args: Args) -> anyhow::Result<u8> {
    let from = cli::db_arg::<Args>(&args.from);
    let Db::Sqlite(_) = from else {
        anyhow::bail!("--from must be an SQLite ledger (a file path), not {from}");
    };
    let to = cli::db_arg::<Args>(&args.to);
    let Db::Postgres(url) = &to else {
        anyhow::bail!("--to must be a PostgreSQL ledger (postgres://…), not {to}");
    };
    let source = from.open(Access::ReadOnly, "migrate")?;
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
    let summary = ledger::migrate::copy(source.as_ref(), &target)?;
    Ok(print_report("migrate", &summary, args.json))
}
