//! `reprocess`: resends only what the ledger proves was never sent, with the same GUID.

use log::{info, warn};
use serde::Serialize;

use super::stored_transfer;
use crate::core_client::CoreClient;
use crate::error::LedgerError;
use crate::state::State;
use crate::store::Store;
use crate::transfer::send_and_record;

#[derive(Debug, Default, Serialize)]
pub struct ReprocessSummary {
    pub examined: usize,
    pub sent: usize,
    pub done: usize,
    /// Not sent again (the core is still unreachable): the run stops at the first one.
    pub failed: usize,
    pub unknown: usize,
    /// Not tried because the core was found unreachable earlier in this run.
    pub not_tried: usize,
    /// Rows without a usable stored request, or whose claim or result could not be written.
    pub skipped: usize,
    /// Rows another writer claimed first.
    pub raced: usize,
    /// The GUIDs not settled (FAILED again, UNKNOWN, not tried, skipped), for the operator.
    pub unsettled: Vec<String>,
}

/// Resends FAILED/E902 rows below `max_attempts`, each claimed by one guarded UPDATE first.
/// Stops sending at the first row that finds the core unreachable: the rest would only
/// burn an attempt each.
pub fn reprocess(
    ledger: &dyn Store,
    core: &CoreClient,
    max_attempts: i64,
    limit: Option<u64>,
) -> Result<ReprocessSummary, LedgerError> {
    let mut sum = ReprocessSummary::default();
    let mut core_down = false;
    for row in ledger.select_resendable(max_attempts, limit)? {
        sum.examined += 1;
        if core_down {
            sum.not_tried += 1;
            sum.unsettled.push(row.guid.clone());
            continue;
        }
        let (t, req) = match stored_transfer(&row) {
            Ok(x) => x,
            Err(why) => {
                warn!("guid={} skipped: {why}", row.guid);
                sum.skipped += 1;
                sum.unsettled.push(row.guid.clone());
                continue;
            }
        };
        let attempt = match ledger.reclaim_for_resend(&row.guid, max_attempts) {
            Ok(Some(attempt)) => attempt,
            Ok(None) => {
                info!(
                    "guid={} was claimed by another writer; left to it",
                    row.guid
                );
                sum.raced += 1;
                continue;
            }
            Err(e) => {
                warn!("guid={} skipped: cannot claim: {e}", row.guid);
                sum.skipped += 1;
                sum.unsettled.push(row.guid.clone());
                continue;
            }
        };
        sum.sent += 1;
        let handled = send_and_record(ledger, core, None, &t, req, attempt);
        let code = String::from_utf8_lossy(&handled.code);
        info!("guid={} resent: {code}", row.guid);
        match handled.state {
            Some(State::Done) => sum.done += 1,
            Some(State::Failed) => {
                sum.failed += 1;
                core_down = true;
            }
            Some(State::Unknown) => sum.unknown += 1,
            _ => sum.skipped += 1,
        }
        if handled.state != Some(State::Done) {
            sum.unsettled.push(row.guid.clone());
        }
    }
    Ok(sum)
}
