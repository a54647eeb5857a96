//! `inspect`: a read-only look at the ledger, so that an operator (or the demo) needs no
//! sqlite3 shell and cannot change a row by mistake.

use std::process::ExitCode;

use clap::Parser;
use cli::{EXIT_SETTLED, Listed};
use ledger::Access;

/// Lists ledger rows (all, or one GUID) and the count of rows per state.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// The ledger: the relay's SQLite file, or a postgres:// URL.
    #[arg(long, env = "INSPECT_DB", hide_env_values = true)]
    db: String,
    /// Only this GUID.
    #[arg(long)]
    guid: Option<String>,
    /// One JSON object instead of text.
    #[arg(long)]
    json: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    cli::main("inspect", || run(args))
}

fn run(args: Args) -> anyhow::Result<u8> {
    let db = cli::db_arg::<Args>(&args.db);
    let ledger = db.open(Access::ReadOnly, "inspect")?;
    let rows = match &args.guid {
        Some(g) => ledger.read(g)?.into_iter().collect(),
        None => ledger.all_rows()?,
    };
    let listed: Vec<Listed> = rows.iter().map(Listed::of).collect();
    let counts = ledger.count_by_state()?;
    if args.json {
        let by_state: serde_json::Map<_, _> = counts
            .iter()
            .map(|(s, n)| (s.as_str().to_string(), (*n).into()))
            .collect();
        println!(
            "{}",
            serde_json::json!({ "rows": listed, "by_state": by_state })
        );
        return Ok(EXIT_SETTLED);
    }
    println!("{}", Listed::HEADER);
    for l in &listed {
        println!("{}", l.line());
    }
    let counts: Vec<String> = counts.iter().map(|(s, n)| format!("{n} {s}")).collect();
    println!(
        "rows by state: {}",
        if counts.is_empty() {
            "none".into()
        } else {
            counts.join(", ")
        }
    );
    Ok(EXIT_SETTLED)
}
