//! The rules the tools share about which rows need whom, each said once in Rust: a row
//! proven never sent that reprocess resends (below its attempt cap) or no longer resends (at
//! it), a row in doubt, a GUID resolve has given up on. Each backend's SQL says the same in
//! its WHERE (`crate::writes`, `sqlite::sql`, `postgres::sql` and their `page`s); the ledger
//! suite holds the two equal on every backend (`tests/suite/rules.rs`), so a change to one
//! that the other does not follow fails there.

use crate::state::{Row, State};
use crate::store::InquiryRecord;

/// FAILED with `E902`: the ledger proves the send never left (reprocess's to resend).
pub fn proven_unsent(row: &Row) -> bool {
    row.state == State::Failed && row.rsp_code.as_deref() == Some("E902")
}

/// Proven unsent with fewer than `max_attempts` attempts: reprocess resends it.
pub fn resendable(row: &Row, max_attempts: i64) -> bool {
    proven_unsent(row) && row.attempts.is_some_and(|a| a < max_attempts)
}

/// Proven unsent with `max_attempts` or more attempts: reprocess no longer resends it, an
/// operator must look at it.
pub fn at_attempt_cap(row: &Row, max_attempts: i64) -> bool {
    proven_unsent(row) && row.attempts.is_some_and(|a| a >= max_attempts)
}

/// UNKNOWN or SENT: whether the core booked it is not known (resolve's to settle).
pub fn in_doubt(state: State) -> bool {
    matches!(state, State::Unknown | State::Sent)
}

/// `failures` failed inquiries reach `max_inquiries`: resolve asks no more.
pub fn inquiries_exhausted(failures: i64, max_inquiries: u32) -> bool {
    failures >= i64::from(max_inquiries)
}

/// A GUID in doubt whose inquiries are exhausted: it needs an operator.
pub fn needs_operator(state: State, record: &InquiryRecord, max_inquiries: u32) -> bool {
    in_doubt(state) && inquiries_exhausted(record.failures, max_inquiries)
}
