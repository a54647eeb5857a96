//! `resolve`: settles what is in doubt (UNKNOWN, and with `--stale-sent` orphaned SENT rows)
//! by asking the core. Never POSTs.

use std::fmt;

use log::{info, warn};
use serde::Serialize;

use super::stored_transfer;
use crate::core_client::{CoreClient, Inquiry};
use crate::error::LedgerError;
use crate::state::{Change, Row, State};
use crate::store::Store;
use crate::wire;

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
    /// The GUIDs not settled (left, moved to UNKNOWN, skipped), for the operator.
    pub unsettled: Vec<String>,
}

/// resolve's selection: UNKNOWN rows at least `min_age_secs` old, then (with `stale_sent`)
/// SENT rows at least that old.
pub fn resolve_candidates(
    ledger: &dyn Store,
    min_age_secs: u64,
    stale_sent: Option<u64>,
) -> Result<Vec<Row>, LedgerError> {
    let mut rows = ledger.select_aged(State::Unknown, min_age_secs)?;
    if let Some(secs) = stale_sent {
        rows.extend(ledger.select_aged(State::Sent, secs)?);
    }
    Ok(rows)
}

/// Why `resolve` stopped before changing any row.
#[derive(Debug)]
pub enum ResolveError {
    Ledger(LedgerError),
    /// The canary inquiry did not answer 200. `not_found`: the core (or whatever answers at
    /// this `--core` URL) says it never booked a transfer the ledger says it booked, so its
    /// 404s prove nothing; otherwise the inquiry failed (core down, a proxy's page).
    Canary {
        guid: String,
        why: String,
        not_found: bool,
    },
}

impl fmt::Display for ResolveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResolveError::Ledger(e) => e.fmt(f),
            ResolveError::Canary {
                guid,
                why,
                not_found: true,
            } => write!(
                f,
                "canary inquiry: GUID {guid} is booked (DONE/0000 in the ledger) but {why}; \
                 --core does not look like the core that booked it (path, environment?): no \
                 row changed"
            ),
            ResolveError::Canary { guid, why, .. } => write!(
                f,
                "canary inquiry about booked GUID {guid} failed ({why}): the core cannot be \
                 trusted to answer inquiries right now; no row changed"
            ),
        }
    }
}

impl std::error::Error for ResolveError {}

impl From<LedgerError> for ResolveError {
    fn from(e: LedgerError) -> Self {
        ResolveError::Ledger(e)
    }
}

/// How many of the newest bookings the canary looks through for one whose GUID it may put in
/// a URL (a hand-made row may hold anything).
const CANARY_CANDIDATES: usize = 20;

/// Before any row is settled: the most recent GUID the ledger holds as booked (DONE/0000)
/// must be known to the core (inquiry answers 200). `Ok(None)`: the ledger has no booking
/// yet, so there is nothing to check against (the caller warns).
pub fn canary(ledger: &dyn Store, core: &CoreClient) -> Result<Option<String>, ResolveError> {
    let Some(row) = ledger
        .recent_bookings(CANARY_CANDIDATES)?
        .into_iter()
        .find(|r| wire::valid_guid(r.guid.as_bytes()))
    else {
        return Ok(None);
    };
    let (why, not_found) = match core.inquire(&row.guid) {
        Inquiry::Booked(_) => return Ok(Some(row.guid)),
        Inquiry::NotFound => ("the inquiry answered 404 (never booked)".to_string(), true),
        Inquiry::Error(why) => (why, false),
    };
    Err(ResolveError::Canary {
        guid: row.guid,
        why,
        not_found,
    })
}

/// Settles UNKNOWN (and, with `stale_sent`, orphaned SENT) rows by inquiry. Never POSTs.
/// Every settlement names the state and the attempt it leaves, so a row that moved on (a
/// reprocess re-claimed it) is never settled by an inquiry about its earlier attempt.
pub fn resolve(
    ledger: &dyn Store,
    core: &CoreClient,
    min_age_secs: u64,
    stale_sent: Option<u64>,
) -> Result<ResolveSummary, ResolveError> {
    if canary(ledger, core)?.is_none() {
        warn!("no booked transfer (DONE/0000) in the ledger to check the core's inquiry with");
    }
    let mut sum = ResolveSummary::default();
    for row in resolve_candidates(ledger, min_age_secs, stale_sent)? {
        sum.examined += 1;
        let from = row.state;
        let (_, req) = match stored_transfer(&row) {
            Ok(x) => x,
            Err(why) => {
                warn!("guid={} skipped: {why}", row.guid);
                sum.skipped += 1;
                sum.unsettled.push(row.guid.clone());
                continue;
            }
        };
        let (to, code, body, counter, why) = match core.inquire(&row.guid) {
            Inquiry::Booked(body) => (
                State::Done,
                wire::OK,
                Some(body),
                &mut sum.done,
                "inquiry: booked".to_string(),
            ),
            Inquiry::NotFound => (
                State::Failed,
                wire::E_NOT_SENT,
                None,
                &mut sum.failed,
                "inquiry: never booked (404)".to_string(),
            ),
            Inquiry::Error(why) if from == State::Sent => {
                warn!(
                    "guid={} inquiry failed, SENT moves to UNKNOWN: {why}",
                    row.guid
                );
                (
                    State::Unknown,
                    wire::E_UNKNOWN,
                    None,
                    &mut sum.sent_to_unknown,
                    format!("stale SENT, inquiry failed: {why}"),
                )
            }
            Inquiry::Error(why) => {
                warn!("guid={} left UNKNOWN: {why}", row.guid);
                sum.left += 1;
                sum.unsettled.push(row.guid.clone());
                continue;
            }
        };
        let change = Change::new(
            &row.guid,
            from,
            row.attempts,
            to,
            code,
            wire::reply_to(req, &code, body.as_ref()),
        )
        .because(why);
        match ledger.transition(&change) {
            Ok(true) => {
                info!("guid={} {from} -> {to} ({})", row.guid, change.code_str());
                *counter += 1;
                if to == State::Unknown {
                    sum.unsettled.push(row.guid.clone());
                }
            }
            Ok(false) => {
                info!(
                    "guid={} was changed by another writer; left to it",
                    row.guid
                );
                sum.raced += 1;
            }
            Err(e) => {
                warn!("guid={} skipped: cannot record {to}: {e}", row.guid);
                sum.skipped += 1;
                sum.unsettled.push(row.guid.clone());
            }
        }
    }
    Ok(sum)
}
