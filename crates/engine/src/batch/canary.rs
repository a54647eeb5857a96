//! The canary (contract §5, v1.1): a 404 means "never booked" only if it comes from the core
//! that booked our transfers. Before a 404 is believed — by `resolve` before it changes any
//! row, by `inspect settle --not-booked` before it settles one — the newest GUID the ledger
//! holds as booked (DONE/0000) must be known to the core at this URL (its inquiry answers
//! 200). A wrong `--core` path or another environment's core answers 404 for everything and
//! would otherwise turn booked transfers FAILED, which reprocess then books again.

use crate::core::{Core, Inquiry};
use ledger::error::LedgerError;
use ledger::store::Inquiries;

use super::stored_transfer;

/// How many of the newest bookings the canary looks through for one whose GUID it may put in
/// a URL and whose stored request says what the core's booking must be (a hand-made row may
/// hold anything).
const CANARY_CANDIDATES: usize = 20;

/// What the canary found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Canary {
    /// The core knows the ledger's newest booking: its answers can be believed.
    Passed { guid: String },
    /// The ledger holds no booking yet: nothing to check the core against.
    NoBooking,
    /// The inquiry about the newest booking did not answer 200.
    Failed(CanaryFailure),
}

/// The canary inquiry did not answer 200. `not_found`: the core (or whatever answers at this
/// URL) says it never booked a transfer the ledger says it booked, so its 404s prove nothing;
/// otherwise the inquiry failed (core down, a proxy's page).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", CanaryFailure::text(.guid, .why, *.not_found))]
pub struct CanaryFailure {
    pub guid: String,
    pub why: String,
    pub not_found: bool,
}

impl CanaryFailure {
    /// The failure in words, for whoever reports it (who adds what it did not change).
    pub fn text(guid: &str, why: &str, not_found: bool) -> String {
        if not_found {
            format!(
                "canary inquiry: GUID {guid} is booked (DONE/0000 in the ledger) but {why}; \
                 --core does not look like the core that booked it (path, environment?)"
            )
        } else {
            format!(
                "canary inquiry about booked GUID {guid} failed ({why}): the core cannot be \
                 trusted to answer inquiries right now"
            )
        }
    }
}

/// Asks `core` about the most recent GUID `ledger` holds as booked (DONE/0000).
pub fn canary(ledger: &dyn Inquiries, core: &dyn Core) -> Result<Canary, LedgerError> {
    // A usable stored request carries a valid GUID, the row's own: one that may go in a URL.
    let Some((row, t)) = ledger
        .recent_bookings(CANARY_CANDIDATES)?
        .into_iter()
        .find_map(|r| {
            let (t, _) = stored_transfer(&r).ok()?;
            Some((r, t))
        })
    else {
        return Ok(Canary::NoBooking);
    };
    let (why, not_found) = match core.inquire(&t) {
        Inquiry::Booked(_) => return Ok(Canary::Passed { guid: row.guid }),
        Inquiry::NotFound => ("the inquiry answered 404 (never booked)".to_string(), true),
        Inquiry::Error(why) => (why, false),
    };
    Ok(Canary::Failed(CanaryFailure {
        guid: row.guid,
        why,
        not_found,
    }))
}
