//! What the ledger reports about its own work, for whoever keeps metrics (the relay's
//! `txrelay_ledger_commit_*`): each commit's statement count and how long it took. Nothing
//! here knows a metrics library; without an observer the reports go nowhere.

use std::sync::OnceLock;
use std::time::Duration;

/// Called once per commit with its number of statements and its duration.
pub type CommitObserver = fn(usize, Duration);

static OBSERVER: OnceLock<CommitObserver> = OnceLock::new();

/// Sets the observer, once per process (later calls are ignored).
pub fn on_commit(f: CommitObserver) {
    let _ = OBSERVER.set(f);
}

pub(crate) fn commit(statements: usize, took: Duration) {
    if let Some(f) = OBSERVER.get() {
        f(statements, took);
    }
}
