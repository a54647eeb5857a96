//! Whether the ledger is recovering (contract §11), as the relay knows it: read once before
//! the relay says `listening on`, then every `engine::recovery::POLL` by a thread of its own,
//! so that a mark begun or ended by `inspect recovery` (or a restore) is seen within seconds
//! without a restart, and a request costs one atomic load, never a ledger read, to know it
//! (`engine::recovery::Mode`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use engine::recovery::Mode;
use ledger::error::LedgerError;
use ledger::recovery::Recovery;
use ledger::store::Store;
use log::{info, warn};

use crate::every::Every;
use crate::metrics::Metrics;

/// What the watcher last read, shared with its thread.
#[derive(Default)]
struct Seen {
    recovering: AtomicBool,
    mark: Mutex<Option<Recovery>>,
    /// The last read failed (warned once; the next success says so).
    failing: AtomicBool,
    /// Where `txrelay_ledger_recovering` goes (none: a fixed watch).
    metrics: Option<Arc<Metrics>>,
}

impl Seen {
    /// Takes in a mark read from the ledger: the flag, the gauge, and one line at INFO when
    /// the relay enters or leaves recovery mode (or the mark's `since` moves).
    fn take(&self, now: Option<Recovery>) {
        if self.failing.swap(false, Ordering::Relaxed) {
            info!("the ledger's recovery mark can be read again");
        }
        let mut mark = self.mark.lock().unwrap_or_else(|e| e.into_inner());
        match (mark.as_ref(), now.as_ref()) {
            (None, Some(m)) => info!(
                "recovery mode: the ledger is recovering since {} (marked by {} at {}): every \
                 new GUID and FAILED re-claim is asked about at the core first",
                m.since, m.who, m.at
            ),
            (Some(m), None) => info!(
                "recovery mode ended: the ledger is no longer recovering (it was since {})",
                m.since
            ),
            (Some(was), Some(m)) if was.since != m.since => info!(
                "recovery mode: the ledger is now recovering since {} (was {}; marked by {})",
                m.since, was.since, m.who
            ),
            _ => {}
        }
        self.recovering.store(now.is_some(), Ordering::Relaxed);
        if let Some(metrics) = &self.metrics {
            metrics.ledger_recovering.set(i64::from(now.is_some()));
        }
        *mark = now;
    }

    /// A read that failed: the last value stays (a ledger that does not answer changes
    /// nothing about whether it is recovering), said once until a read succeeds again.
    fn failed(&self, e: &LedgerError) {
        if !self.failing.swap(true, Ordering::Relaxed) {
            let recovering = self.recovering.load(Ordering::Relaxed);
            warn!(
                "cannot read the ledger's recovery mark (keeping recovering={recovering} until \
                 it can be read): {e}"
            );
        }
    }
}

/// Whether the ledger is recovering, as last read; a thread reads it again every [`POLL`]
/// and stops when this is dropped.
pub struct RecoveryWatch {
    seen: Arc<Seen>,
    _thread: Every,
}

impl RecoveryWatch {
    /// Reads the mark from `store` now (an error is the caller's: a relay that cannot tell
    /// whether its ledger is recovering must not serve), then every `every`.
    pub fn start(
        store: Arc<dyn Store>,
        metrics: Arc<Metrics>,
        every: Duration,
    ) -> Result<RecoveryWatch, LedgerError> {
        let seen = Arc::new(Seen {
            metrics: Some(metrics),
            ..Seen::default()
        });
        seen.take(store.recovery()?);
        let theirs = Arc::clone(&seen);
        let thread = Every::start("recovery-watch", every, move || match store.recovery() {
            Ok(mark) => theirs.take(mark),
            Err(e) => theirs.failed(&e),
        })
        .map_err(|e| {
            LedgerError::Unavailable(format!(
                "cannot start the thread that watches the recovery mark: {e}"
            ))
        })?;
        Ok(RecoveryWatch {
            seen,
            _thread: thread,
        })
    }

    /// A watcher that never reads: always `mode` (tests, and callers that read the mark
    /// themselves once per run).
    pub fn fixed(mode: Mode) -> RecoveryWatch {
        let seen = Seen::default();
        seen.recovering
            .store(mode == Mode::Recovering, Ordering::Relaxed);
        RecoveryWatch {
            seen: Arc::new(seen),
            _thread: Every::never(),
        }
    }

    /// How a request is to be handled now: one atomic load.
    pub fn mode(&self) -> Mode {
        if self.seen.recovering.load(Ordering::Relaxed) {
            Mode::Recovering
        } else {
            Mode::Ordinary
        }
    }

    /// The mark as last read (`None`: not recovering).
    pub fn mark(&self) -> Option<Recovery> {
        self.seen
            .mark
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ledger() -> (tempfile::TempDir, Arc<dyn Store>) {
        let dir = tempfile::tempdir().unwrap();
        let l = ledger::sqlite::Ledger::open(&dir.path().join("l.db")).unwrap();
        (dir, Arc::new(Mutex::new(l)))
    }

    fn metrics() -> Arc<Metrics> {
        Arc::new(Metrics::new("test"))
    }

    /// Polls `f` for up to 5 s (the contract's bound).
    fn within_5s(f: impl Fn() -> bool) -> bool {
        let until = std::time::Instant::now() + Duration::from_secs(5);
        while std::time::Instant::now() < until {
            if f() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    }

    #[test]
    fn the_mark_is_read_at_start_and_followed_without_a_restart() {
        let (_d, store) = ledger();
        let watch =
            RecoveryWatch::start(Arc::clone(&store), metrics(), Duration::from_millis(20)).unwrap();
        assert_eq!(watch.mode(), Mode::Ordinary);
        assert_eq!(watch.mark(), None);

        store
            .begin_recovery("2026-01-01T00:00:00Z", "test", "a restore")
            .unwrap();
        assert!(within_5s(|| watch.mode() == Mode::Recovering));
        assert_eq!(watch.mark().unwrap().since, "2026-01-01T00:00:00Z");

        store.end_recovery("test", "reconciled").unwrap();
        assert!(within_5s(|| watch.mode() == Mode::Ordinary));

        store
            .begin_recovery("2026-01-01T00:00:00Z", "test", "again")
            .unwrap();
        let again = RecoveryWatch::start(store, metrics(), Duration::from_secs(3600)).unwrap();
        assert_eq!(again.mode(), Mode::Recovering, "read once at start");
    }

    #[test]
    fn a_fixed_watch_is_what_it_was_made() {
        assert_eq!(
            RecoveryWatch::fixed(Mode::Recovering).mode(),
            Mode::Recovering
        );
        assert_eq!(RecoveryWatch::fixed(Mode::Ordinary).mode(), Mode::Ordinary);
    }
}
