//! The batch tools (contract §5): `resolve` settles what is in doubt by asking the core,
//! `reprocess` resends only what the ledger proves was never sent, `purge` forgets finished
//! rows. Each row is handled on its own: one odd row is reported and skipped, never fatal.

mod purge;
mod reprocess;
mod resolve;

pub use purge::{PurgeSummary, purge};
pub use reprocess::{ReprocessSummary, reprocess};
pub use resolve::{ResolveError, ResolveSummary, canary, resolve, resolve_candidates};

use crate::state::Row;
use crate::wire::{self, Transfer};

/// A stored request the tools can use: present, valid, and for the row's own GUID (a
/// hand-made row could hold anything; sending it would book under another GUID).
pub(crate) fn stored_transfer(row: &Row) -> Result<(Transfer, &[u8]), String> {
    let req = row
        .request
        .as_deref()
        .ok_or_else(|| "no stored request".to_string())?;
    let t = wire::parse_request(req).map_err(|e| format!("stored request is invalid: {e}"))?;
    if t.guid != row.guid {
        return Err(format!("stored request is for guid {:?}", t.guid));
    }
    Ok((t, req))
}
