//! When the core may have booked a GUID twice: an earlier attempt's result (a booking, or an
//! outcome in doubt) came back after a later attempt had claimed the row, which it could only
//! do because the row had been settled `FAILED` under the earlier one (`resolve --stale-sent`
//! or an operator on a short margin, then a resend). The ledger keeps the later attempt; the
//! earlier booking is the one record an investigator needs to reverse it, so it goes into
//! the GUID's history (with its core_ref, amount and booked_at), the log and a metric.

use log::warn;

use crate::events::Events;
use ledger::state::{Change, Evidence};
use ledger::store::Transfers;

/// What `change` (the result of attempt `change.attempt`) says the core did, for the
/// history and the log; `None` if it booked nothing (a business rejection, never sent).
fn what_the_core_did(change: &Change) -> Option<String> {
    if change.code == wire::OK {
        return Some(match wire::parse_reply(&change.response) {
            Ok(wire::Reply {
                booking: Some(b), ..
            }) => format!(
                "booked: core_ref {}, amount {}, booked_at {}",
                b.core_ref, b.amount, b.booked_at
            ),
            _ => "booked (the reply cannot be decoded)".to_string(),
        });
    }
    (change.code == wire::E_UNKNOWN).then(|| "outcome unknown".to_string())
}

/// Records that attempt `change.attempt`'s result came after attempt `now` claimed the row,
/// if that result may be a booking. Never changes the row.
pub fn earlier_attempt_came_back<S: Transfers + ?Sized>(
    store: &S,
    events: &dyn Events,
    change: &Change,
    now: i64,
) {
    let attempt = change.attempt.unwrap_or_default();
    let Some(did) = what_the_core_did(change) else {
        warn!(guid:% = change.guid; "attempt {attempt}'s result {} came after attempt {now} claimed the row; \
             it booked nothing",
            change.code_str()
        );
        return;
    };
    events.possible_double_booking();
    let reason = format!(
        "possible double booking: attempt {attempt} {did}; it came after attempt {now} \
         claimed the row"
    );
    let recorded = store.record_evidence(&Evidence {
        guid: change.guid.clone(),
        attempt,
        rsp_code: change.code_str().to_string(),
        reason: reason.clone(),
    });
    let note = match recorded {
        Ok(()) => "recorded in its history".to_string(),
        Err(e) => format!("NOT recorded in its history ({e})"),
    };
    warn!(guid:% = change.guid; "the core may have booked this GUID twice: {reason}; {note}; check with the \
         core");
}
