//! `resolve`: settles what is in doubt (UNKNOWN, and with `--stale-sent` orphaned SENT rows)
//! by asking the core. Never POSTs.

use log::{info, warn};
use serde::Serialize;

use super::canary::{Canary, CanaryFailure, canary};
use super::{DEFAULT_PARALLEL, in_parallel, stored_transfer};
use crate::core::{Core, Inquiry};
use ledger::error::LedgerError;
use ledger::state::{Change, Row, State};
use ledger::store::{DEFAULT_MAX_INQUIRIES, InquiryRecord, Store};

/// What a resolve run is asked to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolveSettings {
    /// Only rows unchanged for this long (`--min-age`); also where the backoff starts.
    pub min_age_secs: u64,
    /// Also SENT rows unchanged for this long (`--stale-sent`).
    pub stale_sent: Option<u64>,
    /// A GUID with this many failed inquiries is left to an operator (`--max-inquiries`).
    pub max_inquiries: u32,
    /// Inquiries made at once (`--parallel`).
    pub parallel: usize,
}

impl ResolveSettings {
    /// UNKNOWN rows at least `min_age_secs` old; the defaults for everything else.
    pub fn new(min_age_secs: u64) -> ResolveSettings {
        ResolveSettings {
            min_age_secs,
            stale_sent: None,
            max_inquiries: DEFAULT_MAX_INQUIRIES,
            parallel: DEFAULT_PARALLEL,
        }
    }

    pub fn stale_sent(self, stale_sent: Option<u64>) -> ResolveSettings {
        ResolveSettings { stale_sent, ..self }
    }

    pub fn max_inquiries(self, max_inquiries: u32) -> ResolveSettings {
        ResolveSettings {
            max_inquiries,
            ..self
        }
    }

    pub fn parallel(self, parallel: usize) -> ResolveSettings {
        ResolveSettings { parallel, ..self }
    }
}

/// A GUID resolve has stopped asking about, as its summary lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NeedsOperator {
    pub guid: String,
    pub failures: i64,
    pub last_error: Option<String>,
}

impl From<InquiryRecord> for NeedsOperator {
    fn from(r: InquiryRecord) -> NeedsOperator {
        NeedsOperator {
            guid: r.guid,
            failures: r.failures,
            last_error: r.last_error,
        }
    }
}

#[derive(Debug, Default, Serialize)]
pub struct ResolveSummary {
    pub examined: usize,
    pub done: usize,
    pub failed: usize,
    /// Inquiry failed: the UNKNOWN row is as it was.
    pub left: usize,
    /// Orphaned SENT rows whose inquiry failed, moved to UNKNOWN for a later run.
    pub sent_to_unknown: usize,
    /// Rows without a usable stored request, or whose update failed.
    pub skipped: usize,
    /// Rows another writer changed first (the relay, another resolve).
    pub raced: usize,
    /// The GUIDs not settled (left, moved to UNKNOWN, skipped), for the operator; sorted.
    pub unsettled: Vec<String>,
    /// The GUIDs resolve no longer asks about (`--max-inquiries` failed inquiries, still
    /// UNKNOWN or SENT), whether they reached it in this run or before; by GUID.
    pub needs_operator: Vec<NeedsOperator>,
}

/// resolve's selection: UNKNOWN rows at least `min_age_secs` old, then (with `stale_sent`)
/// SENT rows at least that old; in both, only rows whose next inquiry is due and that have
/// failed fewer than `max_inquiries` inquiries.
pub fn resolve_candidates(
    ledger: &dyn Store,
    settings: &ResolveSettings,
) -> Result<Vec<Row>, LedgerError> {
    let max = settings.max_inquiries;
    let mut rows = ledger.select_due(State::Unknown, settings.min_age_secs, max)?;
    if let Some(secs) = settings.stale_sent {
        rows.extend(ledger.select_due(State::Sent, secs, max)?);
    }
    Ok(rows)
}

/// Why `resolve` stopped before changing any row.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    /// The canary inquiry did not answer 200. `not_found`: the core (or whatever answers at
    /// this `--core` URL) says it never booked a transfer the ledger says it booked, so its
    /// 404s prove nothing; otherwise the inquiry failed (core down, a proxy's page).
    #[error("{}; no row changed", CanaryFailure::text(.guid, .why, *.not_found))]
    Canary {
        guid: String,
        why: String,
        not_found: bool,
    },
}

/// Settles UNKNOWN (and, with `stale_sent`, orphaned SENT) rows by inquiry. Never POSTs.
/// Every settlement names the state and the attempt it leaves, so a row that moved on (a
/// reprocess re-claimed it) is never settled by an inquiry about its earlier attempt.
///
/// Up to `parallel` inquiries run at once (over the core client's kept-alive connections),
/// each row's settlement still its own guarded statement. A failed inquiry is counted in the
/// GUID's record, which puts its next inquiry off (doubling from `--min-age`, capped); a
/// successful one deletes the record. A GUID with `max_inquiries` failures is not asked
/// about again: it is listed in `needs_operator`.
pub fn resolve(
    ledger: &dyn Store,
    core: &dyn Core,
    settings: &ResolveSettings,
) -> Result<ResolveSummary, ResolveError> {
    match canary(ledger, core)? {
        Canary::Passed { .. } => {}
        Canary::NoBooking => {
            warn!("no booked transfer (DONE/0000) in the ledger to check the core's inquiry with")
        }
        Canary::Failed(CanaryFailure {
            guid,
            why,
            not_found,
        }) => {
            return Err(ResolveError::Canary {
                guid,
                why,
                not_found,
            });
        }
    }
    match ledger.prune_inquiries() {
        Ok(0) => {}
        Ok(n) => info!("forgot the failed inquiries of {n} GUIDs no longer in doubt"),
        Err(e) => warn!("cannot forget the failed inquiries of settled GUIDs: {e}"),
    }
    let rows = resolve_candidates(ledger, settings)?;
    let outcomes = in_parallel(&rows, settings.parallel, |row| {
        settle(ledger, core, settings, row)
    });
    let mut sum = ResolveSummary::default();
    for (row, outcome) in rows.iter().zip(outcomes) {
        sum.examined += 1;
        *match outcome {
            Settled::Done => &mut sum.done,
            Settled::Failed => &mut sum.failed,
            Settled::Left => &mut sum.left,
            Settled::SentToUnknown => &mut sum.sent_to_unknown,
            Settled::Skipped => &mut sum.skipped,
            Settled::Raced => &mut sum.raced,
        } += 1;
        if matches!(
            outcome,
            Settled::Left | Settled::SentToUnknown | Settled::Skipped
        ) {
            sum.unsettled.push(row.guid.clone());
        }
    }
    sum.unsettled.sort();
    sum.needs_operator = ledger
        .needs_operator(settings.max_inquiries)?
        .into_iter()
        .map(NeedsOperator::from)
        .collect();
    for n in &sum.needs_operator {
        warn!(guid:% = n.guid; "needs an operator: {} inquiries failed, the last: {}",
            n.failures,
            n.last_error.as_deref().unwrap_or("-")
        );
    }
    Ok(sum)
}

/// What became of one row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Settled {
    Done,
    Failed,
    /// The inquiry failed: the UNKNOWN row is as it was.
    Left,
    SentToUnknown,
    Skipped,
    Raced,
}

/// Asks the core about one row and settles it by one guarded statement.
fn settle(ledger: &dyn Store, core: &dyn Core, settings: &ResolveSettings, row: &Row) -> Settled {
    let from = row.state;
    let (t, req) = match stored_transfer(row) {
        Ok(x) => x,
        Err(why) => {
            warn!(guid:% = row.guid; "skipped: {why}");
            return Settled::Skipped;
        }
    };
    let (to, code, body, settled, why) = match core.inquire(&t) {
        Inquiry::Booked(body) => {
            forget_failures(ledger, &row.guid);
            let why = "inquiry: booked";
            (State::Done, wire::OK, Some(body), Settled::Done, why)
        }
        Inquiry::NotFound => {
            forget_failures(ledger, &row.guid);
            let why = "inquiry: never booked (404)";
            (State::Failed, wire::E_NOT_SENT, None, Settled::Failed, why)
        }
        Inquiry::Error(why) if from == State::Sent => {
            warn!(guid:% = row.guid; "inquiry failed, SENT moves to UNKNOWN: {why}");
            let change = change(row, State::Unknown, wire::E_UNKNOWN, req, None)
                .because(format!("stale SENT, inquiry failed: {why}"));
            let settled = record(ledger, row, &change, Settled::SentToUnknown);
            if settled == Settled::SentToUnknown {
                count_failure(ledger, settings, &row.guid, &why);
            }
            return settled;
        }
        Inquiry::Error(why) => {
            warn!(guid:% = row.guid; "left UNKNOWN: {why}");
            count_failure(ledger, settings, &row.guid, &why);
            return Settled::Left;
        }
    };
    let change = change(row, to, code, req, body.as_ref()).because(why);
    record(ledger, row, &change, settled)
}

fn change(
    row: &Row,
    to: State,
    code: wire::Code,
    req: &[u8],
    body: Option<&[u8; wire::BOOKING_BODY_LEN]>,
) -> Change {
    Change::new(
        &row.guid,
        row.state,
        row.attempts,
        to,
        code,
        wire::reply_to(req, &code, body),
    )
}

/// Makes the settlement `change`; `settled` if it happened.
fn record(ledger: &dyn Store, row: &Row, change: &Change, settled: Settled) -> Settled {
    match ledger.transition(change) {
        Ok(true) => {
            info!(guid:% = row.guid; "{} -> {} ({})",
                change.from,
                change.to,
                change.code_str()
            );
            settled
        }
        Ok(false) => {
            info!(guid:% = row.guid; "was changed by another writer; left to it");
            Settled::Raced
        }
        Err(e) => {
            warn!(guid:% = row.guid; "skipped: cannot record {}: {e}", change.to
            );
            Settled::Skipped
        }
    }
}

/// The core answered: the GUID's failed inquiries are history.
fn forget_failures(ledger: &dyn Store, guid: &str) {
    if let Err(e) = ledger.clear_inquiry(guid) {
        warn!(guid:% = guid; "cannot clear its failed inquiries: {e}");
    }
}

/// One more failed inquiry about `guid`, and when the next is due.
fn count_failure(ledger: &dyn Store, settings: &ResolveSettings, guid: &str, why: &str) {
    match ledger.record_inquiry_failure(guid, why, settings.min_age_secs) {
        Ok(r) if ledger::rules::inquiries_exhausted(r.failures, settings.max_inquiries) => {
            warn!(guid:% = guid; "{} inquiries failed (--max-inquiries {}): no more inquiries; left to \
                 an operator",
                r.failures, settings.max_inquiries
            )
        }
        Ok(r) => info!(guid:% = guid; "inquiry failure {} of {}; next inquiry not before {} UTC",
            r.failures, settings.max_inquiries, r.next_at
        ),
        Err(e) => warn!(guid:% = guid; "cannot count the failed inquiry: {e}"),
    }
}
