//! `resolve` end to end: UNKNOWN rows (and, with `--stale-sent`, SENT rows) settled by one
//! inquiry each, never by a POST, against the real core simulator and a temp ledger, with
//! rows made by a real relay or by hand. Every test checks the ledger rows AND the core's
//! per-GUID booking counts.

mod backoff;
mod canary;
mod parallel;
mod races;
mod stale_sent;
mod unknown;
