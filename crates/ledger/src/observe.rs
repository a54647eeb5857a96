//! What the ledger reports about its own work, for whoever keeps metrics (the relay's
//! `txrelay_ledger_commit_*`): each commit's statement count and how long it took, and each
//! PostgreSQL commit whose wait for the synchronous standby was cut short. Nothing here
//! knows a metrics library; without an observer the reports go nowhere.

use std::sync::OnceLock;
use std::time::Duration;

/// Called once per commit with its number of statements and its duration.
pub type CommitObserver = Box<dyn Fn(usize, Duration) + Send + Sync>;

/// Called once per commit that was not replicated (`postgres::sync_wait`), with what it was
/// writing ("claiming", "recording a result", ...).
pub type NotReplicatedObserver = Box<dyn Fn(&'static str) + Send + Sync>;

static OBSERVER: OnceLock<CommitObserver> = OnceLock::new();
static NOT_REPLICATED: OnceLock<NotReplicatedObserver> = OnceLock::new();

/// Sets the observer, once per process (later calls are ignored).
pub fn on_commit(f: CommitObserver) {
    let _ = OBSERVER.set(f);
}

pub(crate) fn commit(statements: usize, took: Duration) {
    if let Some(f) = OBSERVER.get() {
        f(statements, took);
    }
}

/// Sets the observer of commits not replicated, once per process (later calls are ignored).
pub fn on_not_replicated(f: NotReplicatedObserver) {
    let _ = NOT_REPLICATED.set(f);
}

pub(crate) fn not_replicated(what: &'static str) {
    if let Some(f) = NOT_REPLICATED.get() {
        f(what);
    }
}
