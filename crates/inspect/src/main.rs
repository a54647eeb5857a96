//! `inspect`: a read-only look at the ledger, so that an operator (or the demo) needs no
//! sqlite3 shell and cannot change a row by mistake.

use std::process::ExitCode;

use clap::Parser;
use cli::{EXIT_SETTLED, Listed};
use ledger::Access;
use ledger::batch::NeedsOperator;
use ledger::store::DEFAULT_MAX_INQUIRIES;

/// Lists ledger rows (all, or one GUID), the count of rows per state, and the GUIDs resolve
/// has stopped asking about (needs operator).
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
    /// A GUID still in doubt with this many failed inquiries needs an operator; set it as
    /// resolve's --max-inquiries is set.
    #[arg(long, env = "INSPECT_MAX_INQUIRIES", default_value_t = DEFAULT_MAX_INQUIRIES,
          value_parser = clap::value_parser!(u32).range(1..))]
    max_inquiries: u32,
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
    let needs_operator: Vec<NeedsOperator> = ledger
        .needs_operator(args.max_inquiries)?
        .into_iter()
        .filter(|r| args.guid.as_ref().is_none_or(|g| *g == r.guid))
        .map(NeedsOperator::from)
        .collect();
    if args.json {
        let by_state: serde_json::Map<_, _> = counts
            .iter()
            .map(|(s, n)| (s.as_str().to_string(), (*n).into()))
            .collect();
        println!(
            "{}",
            serde_json::json!({
                "rows": listed,
                "by_state": by_state,
                "needs_operator": needs_operator,
            })
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
    for n in &needs_operator {
        println!(
            "needs operator: {} ({} inquiries failed; resolve no longer asks; last error: {})",
            n.guid,
            n.failures,
            n.last_error.as_deref().unwrap_or("-")
        );
    }
    Ok(EXIT_SETTLED)
}
