//! `recovery --journal FILE…`: the core's journal entered into a recovering ledger that is in
//! use (contract §11), on either backend — what `restore --journal` does while it puts a
//! backup in place, for a ledger put back by other means (a PostgreSQL point-in-time restore,
//! a failover that lost commits) or for the bookings a later export of the journal adds.
//! Every booking at or after the recovery mark's `since` is written DONE/`0000` for a GUID
//! without a row, or settles a FAILED, UNKNOWN or SENT row, one guarded statement each
//! (`ledger::recovery::journal`), so the relays working on the ledger meanwhile are never
//! overwritten. Once reconcile over the window is clean, recovery can end.
//!
//! Exit 0: every booking of the window is in the ledger; 3: some were left (a GUID booked
//! twice, a row that changed meanwhile, …: each named); 1: the ledger is not recovering (there
//! is no window to enter), or cannot be read or written, or a journal is bad (nothing entered).

use std::path::PathBuf;

use cli::{EXIT_FATAL, EXIT_LEFT, EXIT_SETTLED, Report};
use ledger::recovery::journal::{self, EnteredBy, JournalApplied};
use ledger::{Access, Db};
use serde::Serialize;

/// Enters the bookings of `files` into the ledger at `db`, as `who`.
pub fn enter(db: &Db, json: bool, files: &[PathBuf], who: &str) -> anyhow::Result<u8> {
    // Every journal is read, and refused if bad, before the ledger is touched.
    let bookings = reconcile::journal::read_bookings(files)?;
    let grouped = journal::group(&bookings)?;
    let ledger = db.open(Access::Tool, "inspect")?;
    let Some(mark) = ledger.recovery()? else {
        let message = "the ledger is not recovering, so there is no window to enter the \
                       journal into; mark it first (inspect recovery --begin --since T)";
        cli::stderr_line("inspect", log::Level::Error, message);
        cli::print_failure("inspect", message, EXIT_FATAL);
        return Ok(EXIT_FATAL);
    };
    let by = EnteredBy {
        tool: "inspect recovery --journal",
        who: Some(who),
    };
    let applied = journal::apply(ledger.as_ref(), &grouped, &mark.since, by)?;
    let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    ledger.record_ledger_event(
        who,
        "journal entered",
        &format!("{} since {}: {applied}", names.join(", "), mark.since),
    )?;
    let entered = Entered {
        since: mark.since,
        journals: names,
        journal: applied,
    };
    Ok(cli::print_report("inspect", &entered, json))
}

/// What `--journal` did.
#[derive(Serialize)]
struct Entered {
    /// The window's start: the recovery mark's `since`.
    since: String,
    journals: Vec<String>,
    journal: JournalApplied,
}

impl Report for Entered {
    fn line(&self) -> String {
        format!("journal entered since {}: {}", self.since, self.journal)
    }

    fn exit_code(&self) -> u8 {
        if self.journal.doubles.is_empty() && self.journal.left.is_empty() {
            EXIT_SETTLED
        } else {
            EXIT_LEFT
        }
    }
}
