//! `inspect`: the operator's tool. Without a command, or with `summary`, `list` and `show`, a
//! read-only look at the ledger, so that an operator (or the demo) needs no sqlite3 or psql
//! shell and cannot change a row by mistake. A settlement by hand of one GUID in doubt takes
//! two people (contract §12): `settle` records a request, `approve` (another person) carries
//! it out as one guarded statement whose history names both, `reject` closes it, `requests`
//! lists them. `recovery --begin` and `--end` write the ledger's recovery mark (contract §11),
//! and the event saying who did.

mod approve;
mod checks;
mod duration;
mod recovery;
mod recovery_journal;
mod requests;
mod settle;
mod show;
mod view;

use std::process::ExitCode;

use clap::{ArgGroup, CommandFactory, Parser, Subcommand};
use ledger::State;
use ledger::page::Cursor;
use ledger::store::{DEFAULT_MAX_ATTEMPTS, DEFAULT_MAX_INQUIRIES};

/// A listing's page: a screenful.
const DEFAULT_LIMIT: u64 = 50;

/// The operator's tool: without a command, lists ledger rows (a page of 50, oldest change
/// first; or one GUID), the count of rows per state, and the GUIDs resolve has stopped
/// asking about (needs operator).
/// Read-only, except `settle`, `approve`, `reject` and `recovery --begin`/`--end`.
#[derive(Parser, Debug)]
#[command(version = cli::VERSION, about)]
struct Args {
    /// The ledger: the relay's SQLite file, or a postgres:// URL. Before or after the
    /// command.
    #[arg(long, env = "INSPECT_DB", hide_env_values = true, global = true)]
    db: Option<String>,
    /// Without a command: only this GUID.
    #[arg(long, conflicts_with = "after")]
    guid: Option<String>,
    /// Without a command: at most this many rows (a page; default 50).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    limit: Option<u64>,
    /// Without a command: the page after this cursor (as the last page printed it).
    #[arg(long, value_name = "CURSOR")]
    after: Option<Cursor>,
    /// One JSON object instead of text.
    #[arg(long, global = true)]
    json: bool,
    /// A GUID still in doubt with this many failed inquiries needs an operator; set it as
    /// resolve's --max-inquiries is set.
    #[arg(long, env = "INSPECT_MAX_INQUIRIES", default_value_t = DEFAULT_MAX_INQUIRIES,
          value_parser = clap::value_parser!(u32).range(1..), global = true)]
    max_inquiries: u32,
    /// A FAILED/E902 row with this many attempts is at reprocess's cap (it will not be resent);
    /// set it as reprocess's --max-attempts is set.
    #[arg(long, env = "INSPECT_MAX_ATTEMPTS", default_value_t = DEFAULT_MAX_ATTEMPTS,
          value_parser = clap::value_parser!(i64).range(1..), global = true)]
    max_attempts: i64,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Rows by state, the oldest UNKNOWN, SENT and FAILED rows and their ages, FAILED/E902
    /// rows at reprocess's attempt cap, and the GUIDs resolve has given up on.
    Summary,
    /// The rows in one state, oldest first, a page at a time (50 unless --limit).
    List(ListArgs),
    /// One GUID: its row, the request and the stored reply decoded, its failed inquiries,
    /// and its history.
    Show {
        /// The GUID.
        guid: String,
    },
    /// Ask to settle one GUID in doubt by hand, on evidence from outside the relay: --booked
    /// (DONE/0000) or --not-booked (FAILED/E902, which reprocess may resend). From UNKNOWN, or
    /// SENT unchanged for 60 s (--not-booked: either only once unchanged for --min-age, 300 s
    /// by default). Changes no row: records a request, prints its id; another person carries
    /// it out with `approve ID`. Who asks is the system's user (or PostgreSQL role).
    Settle(Box<SettleArgs>),
    /// The settlement requests pending a second person, oldest first (--all: the newest of
    /// every status).
    Requests {
        /// Every status (approved, rejected, expired too), the newest --limit.
        #[arg(long)]
        all: bool,
        /// At most this many.
        #[arg(long, default_value_t = DEFAULT_LIMIT,
              value_parser = clap::value_parser!(u64).range(1..))]
        limit: u64,
    },
    /// Carry out another person's settlement request: its checks run again (the row as the
    /// request saw it; for --not-booked the canary and the core's inquiry), then one guarded
    /// statement from the state and attempts the request recorded; the history names both.
    Approve(Box<ApproveArgs>),
    /// Close another person's settlement request (pending or expired) without a change.
    Reject {
        /// The request's id (as `settle` printed it, or `requests` lists it).
        id: i64,
        /// Why (recorded with the decision).
        #[arg(long, value_parser = reason_text)]
        reason: String,
    },
    /// Whether the ledger is recovering (put back to an earlier state: the relay and reprocess
    /// then ask the core before claiming a GUID it may have forgotten), since when, and the
    /// ledger's last events; --begin --since T marks it so, --end ends it, each recorded with
    /// who did it.
    Recovery(recovery::RecoveryArgs),
}

#[derive(clap::Args, Debug)]
struct ListArgs {
    // Help: "RECEIVED, SENT, DONE, UNKNOWN or FAILED", from the ledger's list.
    #[arg(long, value_parser = parse_state, help = one_of_the_states())]
    state: State,
    /// Only rows unchanged for at least this long: 90s, 15m, 2h, 1d, 1h30m.
    #[arg(long, value_parser = duration::parse_secs, value_name = "DURATION")]
    older_than: Option<u64>,
    /// At most this many rows (a page, the oldest first).
    #[arg(long, default_value_t = DEFAULT_LIMIT,
          value_parser = clap::value_parser!(u64).range(1..))]
    limit: u64,
    /// The page after this cursor (as the last page printed it).
    #[arg(long, value_name = "CURSOR")]
    after: Option<Cursor>,
}

#[derive(clap::Args, Debug)]
#[command(group(ArgGroup::new("outcome").required(true).args(["booked", "not_booked"])))]
struct SettleArgs {
    /// The GUID.
    guid: String,
    /// The core booked it (its operators say so): DONE/0000, the reply built from the
    /// booking as resolve builds it. Needs --core-ref, --amount and --booked-at.
    #[arg(long, requires_all = ["core_ref", "amount", "booked_at"])]
    booked: bool,
    /// With --booked: the core's reference of the booking (1-18 printable ASCII characters).
    #[arg(long, conflicts_with = "not_booked")]
    core_ref: Option<String>,
    /// With --booked: the booked amount in minor units (must be the request's).
    #[arg(long, conflicts_with = "not_booked")]
    amount: Option<u64>,
    /// With --booked: when the core booked it, RFC 3339 as the core's JSON carries it
    /// (2026-01-31T23:59:59Z).
    #[arg(long, conflicts_with = "not_booked")]
    booked_at: Option<String>,
    /// The core never booked it: FAILED/E902, so that reprocess may resend it. Only if the
    /// core's inquiry answers 404 now and that core knows the ledger's newest booking (the
    /// canary, as resolve's), unless --force.
    #[arg(long)]
    not_booked: bool,
    /// With --not-booked: settle even though the core's inquiry did not answer 404, or the
    /// canary failed or is missing (recorded in the reason). A transfer the core did book is
    /// then booked again by reprocess.
    #[arg(long, conflicts_with = "booked")]
    force: bool,
    /// With --not-booked: only a row unchanged for at least this many seconds (at least 60):
    /// a 404 proves "never booked" only once the core can no longer be working on the
    /// request, so it must exceed the core's longest processing time; set it as resolve's
    /// --min-age is set.
    #[arg(long, env = "INSPECT_MIN_AGE", default_value_t = checks::DEFAULT_MIN_AGE_SECS,
          value_parser = checks::min_age_secs, value_name = "SECS")]
    min_age: u64,
    /// Why (the evidence: a ticket, who at the core said so); recorded in the history.
    #[arg(long, value_parser = reason_text)]
    reason: String,
    /// How long the request may be approved: 90s, 15m, 2h, 1d (at least a minute, at most
    /// 7 days).
    #[arg(long, env = "INSPECT_EXPIRES", value_parser = expiry_secs, value_name = "DURATION",
          default_value = "24h")]
    expires: u64,
    /// Gone (contract v1.3): who asks is taken from the system, never from a flag.
    #[arg(long, hide = true, value_parser = operator_is_gone, value_name = "NAME")]
    operator: Option<String>,
    /// Show what would be asked (after every check, the inquiry included); write nothing.
    #[arg(long)]
    dry_run: bool,
    #[command(flatten)]
    core: CoreFlags,
    #[command(flatten)]
    timeouts: CoreTimeouts,
}

#[derive(clap::Args, Debug)]
struct ApproveArgs {
    /// The request's id (as `settle` printed it, or `requests` lists it).
    id: i64,
    /// Why, if anything is to be added to the request's reason (recorded with the decision).
    #[arg(long, value_parser = reason_text)]
    reason: Option<String>,
    #[command(flatten)]
    core: CoreFlags,
    #[command(flatten)]
    timeouts: CoreTimeouts,
}

// Where `settle --not-booked` (and its approval) asks the core, as resolve does.
cli::core_flags! {
    env = "INSPECT_";
    /// For a --not-booked settlement: base URL of the core banking system.
    core;
    /// Time allowed to connect to the core.
    connect_timeout_ms;
    /// Time allowed for each later phase of the inquiry.
    read_timeout_ms;
}

/// `State::ALL` in words: "RECEIVED, SENT, … or FAILED".
fn one_of_the_states() -> String {
    let names: Vec<&str> = State::ALL.iter().map(|s| s.as_str()).collect();
    let (last, rest) = names.split_last().expect("the ledger has states");
    format!("{} or {last}", rest.join(", "))
}

fn parse_state(s: &str) -> Result<State, String> {
    s.to_ascii_uppercase().parse()
}

/// Text an operator must give: not blank, no control characters, at most `max` characters.
fn operator_text(s: &str, max: usize) -> Result<String, String> {
    let s = s.trim();
    if s.is_empty() {
        return Err("must not be empty".into());
    }
    if s.chars().any(char::is_control) {
        return Err("must not contain control characters (newlines, tabs)".into());
    }
    if s.chars().count() > max {
        return Err(format!("must be at most {max} characters"));
    }
    Ok(s.to_string())
}

fn reason_text(s: &str) -> Result<String, String> {
    operator_text(s, 500)
}

/// `--operator`, which the contract removed (v1.3 §12): whoever can type a flag could sign as
/// anyone.
fn operator_is_gone(_: &str) -> Result<String, String> {
    Err(
        "--operator is gone: who asks is taken from the system (your login user, or your \
         PostgreSQL role), and another person carries the request out with `inspect approve \
         ID`"
        .into(),
    )
}

/// `--expires`: a duration from a minute to 7 days.
fn expiry_secs(s: &str) -> Result<u64, String> {
    let secs = duration::parse_secs(s)?;
    if !(60..=7 * 86_400).contains(&secs) {
        return Err(
            "must be from 1m to 7d: a request older than its evidence is not one to \
                    approve"
                .into(),
        );
    }
    Ok(secs)
}

/// A usage error (exit 2) in clap's words.
fn usage_error(kind: clap::error::ErrorKind, message: String) -> ! {
    cli::usage_exit(Args::command().error(kind, message), "inspect")
}

fn main() -> ExitCode {
    let args = cli::parse::<Args>();
    let Some(db) = args.db.as_deref() else {
        usage_error(
            clap::error::ErrorKind::MissingRequiredArgument,
            "the following required argument was not provided: --db <DB> (or INSPECT_DB)".into(),
        )
    };
    if args.guid.is_some() && args.command.is_some() {
        usage_error(
            clap::error::ErrorKind::ArgumentConflict,
            "--guid is for the listing without a command; use `show GUID`".into(),
        );
    }
    if (args.limit.is_some() || args.after.is_some()) && args.command.is_some() {
        usage_error(
            clap::error::ErrorKind::ArgumentConflict,
            "--limit and --after before the command are the listing's without a command; \
             give them after `list`"
                .into(),
        );
    }
    let db = cli::db_arg::<Args>(db);
    let opts = view::Opts {
        json: args.json,
        max_inquiries: args.max_inquiries,
        max_attempts: args.max_attempts,
    };
    match args.command {
        None => {
            let paging = view::Paging {
                limit: args.limit.unwrap_or(DEFAULT_LIMIT),
                after: args.after,
            };
            cli::main("inspect", || {
                view::listing(&db, &opts, args.guid.as_deref(), &paging)
            })
        }
        Some(Command::Summary) => cli::main("inspect", || view::summary(&db, &opts)),
        Some(Command::List(l)) => {
            let paging = view::Paging {
                limit: l.limit,
                after: l.after,
            };
            cli::main("inspect", || {
                view::list(&db, &opts, l.state, l.older_than, &paging)
            })
        }
        Some(Command::Show { guid }) => cli::main("inspect", || show::show(&db, &opts, &guid)),
        Some(Command::Settle(s)) => {
            let order = settle::Order::from_args(*s);
            cli::main("inspect", || settle::settle(&db, args.json, order))
        }
        Some(Command::Requests { all, limit }) => {
            cli::main("inspect", || requests::requests(&db, args.json, all, limit))
        }
        Some(Command::Approve(a)) => {
            let order = approve::Order::Approve {
                id: a.id,
                reason: a.reason,
                core: a.core.with(&a.timeouts),
            };
            cli::main("inspect", || approve::decide(&db, args.json, order))
        }
        Some(Command::Reject { id, reason }) => {
            let order = approve::Order::Reject { id, reason };
            cli::main("inspect", || approve::decide(&db, args.json, order))
        }
        Some(Command::Recovery(r)) => {
            let order = recovery::Order::from_args(r);
            cli::main("inspect", || recovery::recovery(&db, args.json, order))
        }
    }
}
