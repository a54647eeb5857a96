//! `reprocess`: resends only what the ledger proves was never sent, with the same GUID. While
//! the ledger is recovering (contract §11) it asks the core before each re-claim first.

use std::sync::atomic::{AtomicBool, Ordering};

use log::{info, warn};
use serde::Serialize;

use super::canary::{Canary, CanaryFailure, canary};
use super::{in_parallel, stored_transfer};
use crate::clock::Clock;
use crate::core::{Core, Inquiry};
use crate::events::{Events, NoEventsOn};
use crate::recovery::{self, Resend};
use crate::transfer::send_and_record;
use ledger::error::LedgerError;
use ledger::state::{Row, State};
use ledger::store::Store;

#[derive(Debug, Default, Serialize)]
pub struct ReprocessSummary {
    pub examined: usize,
    pub sent: usize,
    /// Rows left DONE: sent and booked or rejected, or (recovery mode) settled from the
    /// core's booking without a send (`recovered`).
    pub done: usize,
    /// Recovery mode: FAILED rows the core had booked, settled DONE/`0000` from its inquiry
    /// and not sent; counted in `done` too.
    pub recovered: usize,
    /// Recovery mode: FAILED rows left as they were, not sent, because the core's inquiry
    /// failed or found the GUID booked for another amount; counted in `skipped` too.
    pub recovery_left: usize,
    /// Not sent again (the core is still unreachable): the run stops at the first one.
    pub failed: usize,
    pub unknown: usize,
    /// Not tried because the core was found unreachable before the run claimed anything, or
    /// earlier in this run.
    pub not_tried: usize,
    /// Rows without a usable stored request, or whose claim or result could not be written,
    /// or that recovery mode left (`recovery_left`).
    pub skipped: usize,
    /// Rows another writer claimed first.
    pub raced: usize,
    /// The GUIDs not settled (FAILED again, UNKNOWN, not tried, skipped), for the operator;
    /// sorted.
    pub unsettled: Vec<String>,
}

/// Why `reprocess` stopped before claiming any row.
#[derive(Debug, thiserror::Error)]
pub enum ReprocessError {
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    /// The canary inquiry about the ledger's newest booking answered 404: this `--core` is
    /// not the core that booked it (a wrong path, another environment), and resending there
    /// would book where nobody looks.
    #[error("{0}; no row claimed")]
    WrongCore(CanaryFailure),
}

/// Whether the core answers, asked before any row is claimed so that an outage spends no
/// attempt (contract §5, v1.2): the canary (resolve's), or in a ledger without a booking an
/// inquiry about the first row to resend, whose answer — 200 or the core's JSON 404 —
/// proves the core is up. `Some(why)`: it does not. No row with a usable stored request:
/// nothing will be claimed, nothing to ask.
fn core_unreachable(
    ledger: &dyn Store,
    core: &dyn Core,
    rows: &[Row],
) -> Result<Option<String>, ReprocessError> {
    let Some(t) = rows
        .iter()
        .find_map(|r| stored_transfer(r).ok().map(|(t, _)| t))
    else {
        return Ok(None);
    };
    match canary(ledger, core)? {
        Canary::Passed { .. } => Ok(None),
        Canary::Failed(c) if c.not_found => Err(ReprocessError::WrongCore(c)),
        Canary::Failed(c) => Ok(Some(c.to_string())),
        Canary::NoBooking => Ok(match core.inquire(&t) {
            Inquiry::Booked(_) | Inquiry::NotFound => None,
            Inquiry::Error(why) => Some(format!(
                "reachability inquiry about GUID {} (the first row to resend) failed \
                 ({why}): the core cannot be reached",
                t.guid
            )),
        }),
    }
}

/// Resends FAILED/E902 rows below `max_attempts`, each claimed by one guarded UPDATE first,
/// up to `parallel` at once (oldest first), over the core client's kept-alive connections;
/// the first row sent goes alone. Stops sending at the first row that finds the core
/// unreachable: the rest would only burn an attempt each. No claim is made after that; the
/// sends already in flight (at most `parallel - 1`) finish, and every row not claimed is
/// "not tried". Before any claim the core must answer (`core_unreachable`); while it does
/// not, no row is claimed, one warning says why, and every row is "not tried". A core that
/// does not know the ledger's newest booking fails the run (`ReprocessError::WrongCore`).
///
/// While the ledger is recovering (its mark read once, at the start of the run), every row is
/// asked about at the core before its re-claim (`recovery::before_resend`): one the core had
/// booked is settled DONE/`0000` from its answer instead of being sent again; only the core's
/// JSON 404 lets the resend go on.
///
/// Its sends read the time and pause on `clock` (`SystemClock` for the tool; the simulator's
/// run clock there).
pub fn reprocess(
    ledger: &dyn Store,
    core: &dyn Core,
    max_attempts: i64,
    limit: Option<u64>,
    parallel: usize,
    clock: &dyn Clock,
) -> Result<ReprocessSummary, ReprocessError> {
    let rows = ledger.select_resendable(max_attempts, limit)?;
    let recovering = ledger.recovery()?.is_some();
    if let Some(why) = core_unreachable(ledger, core, &rows)? {
        warn!("{why}; no row claimed");
        let mut unsettled: Vec<String> = rows.iter().map(|r| r.guid.clone()).collect();
        unsettled.sort();
        return Ok(ReprocessSummary {
            examined: rows.len(),
            not_tried: rows.len(),
            unsettled,
            ..ReprocessSummary::default()
        });
    }
    let core_down = AtomicBool::new(false);
    let events = NoEventsOn(clock);
    let resend = |row: &Row| {
        resend(
            ledger,
            core,
            &events,
            max_attempts,
            recovering,
            &core_down,
            row,
        )
    };
    // One at a time until a row has been sent: a core that is down then costs one attempt,
    // not `parallel` of them. Then the rest, `parallel` at once.
    let mut outcomes = Vec::with_capacity(rows.len());
    for row in &rows {
        let outcome = resend(row);
        let sent = matches!(outcome, Resent::Sent(_));
        outcomes.push(outcome);
        if sent {
            break;
        }
    }
    outcomes.extend(in_parallel(&rows[outcomes.len()..], parallel, resend));
    let mut sum = ReprocessSummary::default();
    for (row, outcome) in rows.iter().zip(outcomes) {
        sum.examined += 1;
        let settled = match outcome {
            Resent::NotTried => {
                sum.not_tried += 1;
                false
            }
            Resent::Skipped => {
                sum.skipped += 1;
                false
            }
            Resent::Raced => {
                sum.raced += 1;
                true
            }
            Resent::Recovered => {
                sum.recovered += 1;
                sum.done += 1;
                true
            }
            Resent::RecoveryLeft => {
                sum.recovery_left += 1;
                sum.skipped += 1;
                false
            }
            Resent::Sent(state) => {
                sum.sent += 1;
                match state {
                    Some(State::Done) => sum.done += 1,
                    Some(State::Failed) => sum.failed += 1,
                    Some(State::Unknown) => sum.unknown += 1,
                    _ => sum.skipped += 1,
                }
                state == Some(State::Done)
            }
        };
        if !settled {
            sum.unsettled.push(row.guid.clone());
        }
    }
    sum.unsettled.sort();
    Ok(sum)
}

/// What became of one row.
enum Resent {
    /// The core was found unreachable before this row's turn.
    NotTried,
    /// No usable stored request, or the claim could not be written.
    Skipped,
    /// Another writer claimed it first.
    Raced,
    /// Recovery mode: the core had booked it; settled DONE from its inquiry, not sent.
    Recovered,
    /// Recovery mode: the inquiry did not let it be sent; left FAILED.
    RecoveryLeft,
    /// Claimed and sent; the state its result left the row in.
    Sent(Option<State>),
}

fn resend(
    ledger: &dyn Store,
    core: &dyn Core,
    events: &dyn Events,
    max_attempts: i64,
    recovering: bool,
    core_down: &AtomicBool,
    row: &Row,
) -> Resent {
    if core_down.load(Ordering::SeqCst) {
        return Resent::NotTried;
    }
    let (t, req) = match stored_transfer(row) {
        Ok(x) => x,
        Err(why) => {
            warn!(guid:% = row.guid; "skipped: {why}");
            return Resent::Skipped;
        }
    };
    if recovering {
        match recovery::before_resend(ledger, core, events, row, &t, req) {
            Resend::Go => {}
            Resend::Settled => return Resent::Recovered,
            Resend::Raced => return Resent::Raced,
            Resend::Left => return Resent::RecoveryLeft,
        }
    }
    // Checked again right before the claim: no claim after the core was found unreachable.
    if core_down.load(Ordering::SeqCst) {
        return Resent::NotTried;
    }
    let attempt = match ledger.reclaim_for_resend(&row.guid, max_attempts) {
        Ok(Some(attempt)) => attempt,
        Ok(None) => {
            info!(guid:% = row.guid; "was claimed by another writer; left to it");
            return Resent::Raced;
        }
        Err(e) => {
            warn!(guid:% = row.guid; "skipped: cannot claim: {e}");
            return Resent::Skipped;
        }
    };
    let handled = send_and_record(
        ledger,
        core,
        events,
        row.channel.as_deref(),
        &t,
        req,
        attempt,
    );
    let code = String::from_utf8_lossy(&handled.code);
    info!(guid:% = row.guid; "resent: {code}");
    if handled.state == Some(State::Failed) && !core_down.swap(true, Ordering::SeqCst) {
        warn!(guid:% = row.guid; "found the core unreachable: no more rows are sent in this run");
    }
    Resent::Sent(handled.state)
}
