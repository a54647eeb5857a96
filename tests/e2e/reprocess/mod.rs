//! `reprocess` end to end: only FAILED/E902 rows (proven unsent) are sent again, with the
//! same GUID, and every outcome is recorded as the relay records it. Every test checks the
//! ledger rows AND the core's per-GUID booking counts.

mod core_down;
mod outcomes;
mod parallel;
mod races;
mod selection;
