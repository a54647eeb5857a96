//! The batch tools (contract §5): `resolve` settles what is in doubt by asking the core,
//! `reprocess` resends only what the ledger proves was never sent, `purge` forgets finished
//! rows. Each row is handled on its own: one odd row is reported and skipped, never fatal.

mod canary;
mod purge;
mod reprocess;
mod resolve;

pub use canary::{Canary, CanaryFailure, canary};
pub use purge::{PurgeSummary, purge};
pub use reprocess::{ReprocessError, ReprocessSummary, reprocess};
pub use resolve::{
    NeedsOperator, ResolveError, ResolveSettings, ResolveSummary, resolve, resolve_candidates,
};

use std::sync::atomic::{AtomicUsize, Ordering};

use ledger::state::Row;
use wire::{self, Transfer};

/// `--parallel` of resolve and reprocess: how many rows are worked on at once by default.
pub const DEFAULT_PARALLEL: usize = core_api::DEFAULT_PARALLEL;

/// The most rows worked on at once: the core client keeps at most this many idle
/// connections alive (`core_client::MAX_IDLE` is this), so every worker keeps its own.
pub const MAX_PARALLEL: usize = core_api::MAX_PARALLEL;

/// Runs `work` on every item, on up to `parallel` threads (the caller's among them), each
/// taking the next item not yet taken, in order; returns the results in the items' order,
/// whatever order they finished in. With one thread, everything runs on the caller's.
pub(crate) fn in_parallel<T: Sync, R: Send>(
    items: &[T],
    parallel: usize,
    work: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    let threads = parallel.clamp(1, MAX_PARALLEL).min(items.len().max(1));
    if threads == 1 {
        return items.iter().map(work).collect();
    }
    let next = AtomicUsize::new(0);
    let drain = || {
        let mut mine = Vec::new();
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(item) = items.get(i) else {
                return mine;
            };
            mine.push((i, work(item)));
        }
    };
    let done: Vec<(usize, R)> = std::thread::scope(|s| {
        // A helper that cannot be started leaves its share to the others (the caller's
        // thread always works).
        let helpers: Vec<_> = (1..threads)
            .filter_map(|n| {
                std::thread::Builder::new()
                    .name(format!("batch-{n}"))
                    .spawn_scoped(s, drain)
                    .ok()
            })
            .collect();
        let mut all = drain();
        for h in helpers {
            match h.join() {
                Ok(theirs) => all.extend(theirs),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        all
    });
    let mut slots: Vec<Option<R>> = (0..items.len()).map(|_| None).collect();
    for (i, r) in done {
        slots[i] = Some(r);
    }
    slots
        .into_iter()
        .map(|r| r.expect("every item is taken by exactly one thread"))
        .collect()
}

/// A stored request the tools can use: present, valid, and for the row's own GUID (a
/// hand-made row could hold anything; sending it would book under another GUID).
pub fn stored_transfer(row: &Row) -> Result<(Transfer, &[u8]), String> {
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
