//! `recovery`: whether the ledger is recovering (contract §11), and the operator's way to mark
//! it so, or to end it. A ledger put back to an earlier state (a PostgreSQL point-in-time
//! restore, a failover that lost commits, an SQLite file put back by other means than
//! `restore`) no longer knows the GUIDs claimed after that point; while it is marked
//! recovering, the relay and reprocess ask the core before they claim such a GUID, so that a
//! channel's resend is not booked a second time. Running relays see a change within seconds.
//!
//! Without `--begin` or `--end` the command only reads (the ledger opened read-only, as the
//! other views open it): the mark, and the last few events of the ledger as a whole.
//! `--journal FILE…` enters the core's bookings since the mark (`recovery_journal`).
//! `--begin --since T` and `--end` each write the mark and one ledger event together, naming
//! `operator:NAME` (the system's user, never a flag: whoever can type a flag could sign as
//! anyone) and the reason.
//!
//! Exit 0 whenever the ledger could be read or written: recovering or not, and for `--end` on
//! a ledger that was not recovering too, since "not recovering" is then the state asked for
//! (a script ending recovery twice has not failed). Exit 1: the ledger cannot be opened, read
//! or written. Exit 2: a bad flag (`--begin` without `--since`, an instant that is not RFC
//! 3339, `--begin` with `--end`).

use cli::{EXIT_SETTLED, Report};
use ledger::recovery::{LedgerEvent, Recovery, normalize};
use ledger::{Access, Db};
use serde::Serialize;

use crate::reason_text;

/// How many of the ledger's newest events the view lists: what an operator reads to see who
/// began or ended recovery lately, not an audit export.
const EVENTS_LISTED: u64 = 10;

/// What the history says when the operator gives no `--reason`.
const BEGUN_BY_HAND: &str = "begun by hand (inspect recovery --begin)";
const ENDED_BY_HAND: &str = "ended by hand (inspect recovery --end)";

#[derive(clap::Args, Debug)]
#[command(group(clap::ArgGroup::new("change").args(["begin", "end"]).multiple(false)))]
pub struct RecoveryArgs {
    /// Mark the ledger recovering since --since: the relay and reprocess then ask the core
    /// before claiming a GUID the ledger has no row for (or re-claiming a FAILED one). If it is
    /// recovering already, the older of the two instants is kept.
    #[arg(long, requires = "since")]
    begin: bool,
    /// With --begin: since when the ledger may have forgotten claims, RFC 3339 with an offset
    /// (2026-12-06T09:57:03Z): the instant it was put back to, with a margin for clocks and
    /// requests in flight.
    #[arg(long, value_name = "RFC3339", requires = "begin", value_parser = instant)]
    since: Option<String>,
    /// End recovery (once reconcile over the window is clean).
    #[arg(long)]
    end: bool,
    /// With --begin or --end: why (a ticket, the restore it follows); recorded in the ledger's
    /// events.
    #[arg(long, requires = "change", value_parser = reason_text)]
    reason: Option<String>,
    /// Enter the core's journal (one JSON object a line, as reconcile reads it; may be given
    /// more than once) into the recovering ledger: every booking since the mark, a GUID
    /// without a row written DONE/0000 and a FAILED, UNKNOWN or SENT row settled, one guarded
    /// statement each; a GUID booked twice is reported and left. The ledger must be
    /// recovering already (--begin first).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["begin", "end"])]
    journal: Vec<std::path::PathBuf>,
}

/// An instant as the ledger stores it (UTC, to the second), or why it is not one.
fn instant(s: &str) -> Result<String, String> {
    normalize(s).ok_or_else(|| {
        "not an RFC 3339 instant with an offset (2026-12-06T09:57:03Z, or \
         2026-12-06T10:57:03+01:00)"
            .to_string()
    })
}

/// What the command was asked to do, from the flags.
pub enum Order {
    Show,
    Begin { since: String, reason: String },
    End { reason: String },
    Journal(Vec<std::path::PathBuf>),
}

impl Order {
    pub fn from_args(a: RecoveryArgs) -> Order {
        if !a.journal.is_empty() {
            return Order::Journal(a.journal);
        }
        match (a.begin, a.since, a.end) {
            (true, Some(since), _) => Order::Begin {
                since,
                reason: a.reason.unwrap_or_else(|| BEGUN_BY_HAND.to_string()),
            },
            (true, None, _) => unreachable!("clap requires --since with --begin"),
            (false, _, true) => Order::End {
                reason: a.reason.unwrap_or_else(|| ENDED_BY_HAND.to_string()),
            },
            (false, _, false) => Order::Show,
        }
    }
}

/// `recovery [--begin --since T | --end] [--reason TEXT] | --journal FILE…`.
pub fn recovery(db: &Db, json: bool, order: Order) -> anyhow::Result<u8> {
    let code = match order {
        Order::Journal(files) => crate::recovery_journal::enter(db, json, &files, &who())?,
        Order::Show => {
            let ledger = db.open(Access::ReadOnly, "inspect")?;
            let view = View {
                mark: Mark::of(ledger.recovery()?),
                events: ledger.ledger_events(EVENTS_LISTED)?,
            };
            cli::print_report("inspect", &view, json)
        }
        Order::Begin { since, reason } => {
            let ledger = db.open(Access::Tool, "inspect")?;
            let before = ledger.recovery()?;
            let now = ledger.begin_recovery(&since, &who(), &reason)?;
            let begun = Begun {
                older_kept: (now.since != since).then(|| now.since.clone()),
                was_recovering: before.is_some(),
                asked_since: since,
                mark: Mark::of(Some(now)),
                reason,
            };
            cli::print_report("inspect", &begun, json)
        }
        Order::End { reason } => {
            let ledger = db.open(Access::Tool, "inspect")?;
            let ended = ledger.end_recovery(&who(), &reason)?;
            let ended = Ended {
                mark: Mark::of(None),
                written: ended.is_some(),
                ended,
                reason,
            };
            cli::print_report("inspect", &ended, json)
        }
    };
    Ok(code)
}

/// Who the ledger's events name: the person at the keyboard, as the system knows them.
fn who() -> String {
    format!("operator:{}", ledger::identity::operator())
}

/// The mark as `--json` shows it in every form of the command: whether the ledger is
/// recovering and since when; `who` and `at` as the mark records them.
#[derive(Serialize)]
struct Mark {
    recovering: bool,
    since: Option<String>,
    who: Option<String>,
    at: Option<String>,
}

impl Mark {
    fn of(r: Option<Recovery>) -> Mark {
        Mark {
            recovering: r.is_some(),
            since: r.as_ref().map(|r| r.since.clone()),
            who: r.as_ref().map(|r| r.who.clone()),
            at: r.map(|r| r.at),
        }
    }

    /// `recovering since T (marked by W at A)`, or `not recovering`.
    fn line(&self) -> String {
        match (&self.since, &self.who, &self.at) {
            (Some(since), Some(who), Some(at)) => {
                format!("recovering since {since} (marked by {who} at {at})")
            }
            _ => "not recovering".to_string(),
        }
    }
}

/// The view without `--begin` or `--end`.
#[derive(Serialize)]
struct View {
    #[serde(flatten)]
    mark: Mark,
    /// The newest events of the ledger as a whole, oldest first.
    events: Vec<LedgerEvent>,
}

impl Report for View {
    fn line(&self) -> String {
        let mut out = self.mark.line();
        if self.events.is_empty() {
            out.push_str("\nledger events: none recorded");
            return out;
        }
        out.push_str(&format!(
            "\nledger events (the last {EVENTS_LISTED} at most, oldest first):\
             \nat\twho\tevent\tdetail"
        ));
        for e in &self.events {
            out.push_str(&format!(
                "\n{}\t{}\t{}\t{}",
                e.at,
                e.who,
                e.event,
                e.detail.as_deref().unwrap_or("-")
            ));
        }
        out
    }

    fn exit_code(&self) -> u8 {
        EXIT_SETTLED
    }
}

/// What `--begin` did: the mark as it now is.
#[derive(Serialize)]
struct Begun {
    #[serde(flatten)]
    mark: Mark,
    /// `--since`, as the ledger stores instants.
    asked_since: String,
    /// The ledger was recovering already since an older instant, which it keeps: it may have
    /// forgotten claims since then, and a later `--since` cannot make it remember them.
    older_kept: Option<String>,
    was_recovering: bool,
    reason: String,
}

impl Report for Begun {
    fn line(&self) -> String {
        let mut out = format!("recovery begun: {}", self.mark.line());
        if let Some(older) = &self.older_kept {
            out.push_str(&format!(
                "\nnote: the ledger was already recovering since {older}, before --since {}: \
                 the older instant is kept",
                self.asked_since
            ));
        }
        out
    }

    fn exit_code(&self) -> u8 {
        EXIT_SETTLED
    }
}

/// What `--end` did: the mark it ended, if there was one.
#[derive(Serialize)]
struct Ended {
    /// The mark as it now is: not recovering.
    #[serde(flatten)]
    mark: Mark,
    ended: Option<Recovery>,
    written: bool,
    reason: String,
}

impl Report for Ended {
    fn line(&self) -> String {
        match &self.ended {
            Some(r) => format!(
                "recovery ended: had been recovering since {} (marked by {} at {}); not \
                 recovering now",
                r.since, r.who, r.at
            ),
            None => "not recovering: there was no recovery to end; nothing written".to_string(),
        }
    }

    fn exit_code(&self) -> u8 {
        EXIT_SETTLED
    }
}
