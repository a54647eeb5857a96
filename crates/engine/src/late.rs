//! Late replies: the core's answer to a call the relay gave up on at its read timeout.
//!
//! The relay answers `E901` and records UNKNOWN at the read timeout, as always. But the
//! connection to the core is not thrown away (`core_client::capture` caught it): a background
//! thread goes on reading it for up to `--late-reply-ms`. If the answer comes and is a booking
//! or a business rejection, the row moves UNKNOWN → DONE with the reply the channel would have
//! got — one guarded statement that names the attempt — and the next resend gets it instead
//! of `E901`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use core_client::Outcome;
use ledger::state::{Change, State};
use ledger::store::Store;
use log::{info, warn};

use crate::core::PendingAnswer;
use crate::metrics::metrics;
use crate::record::{RECORD_WINDOW, record_result};

/// The background waiters: bounded, counted, and waited for at shutdown.
pub struct LateReplies {
    store: Arc<dyn Store>,
    wait: Duration,
    max: usize,
    waiting: Mutex<usize>,
    done: Condvar,
    pub counts: LateCounts,
}

/// What late replies came to, for logs and metrics.
#[derive(Debug, Default)]
pub struct LateCounts {
    /// Calls handed to a background waiter.
    pub adopted: AtomicU64,
    /// Calls dropped because `max` were already waiting.
    pub dropped: AtomicU64,
    /// Answers that came, whatever they were.
    pub arrived: AtomicU64,
    /// UNKNOWN rows they moved to DONE.
    pub settled: AtomicU64,
}

impl LateReplies {
    pub fn new(store: Arc<dyn Store>, wait: Duration, max: usize) -> LateReplies {
        LateReplies {
            store,
            wait,
            max,
            waiting: Mutex::new(0),
            done: Condvar::new(),
            counts: LateCounts::default(),
        }
    }

    /// Calls waiting right now.
    pub fn waiting(&self) -> usize {
        *self.lock()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, usize> {
        self.waiting.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits in the background for the answer to `call`, whose row is UNKNOWN on `attempt`
    /// with request `msg`; settles it if the answer is a booking or a rejection.
    pub fn adopt(self: &Arc<Self>, call: Box<dyn PendingAnswer>, attempt: i64, msg: Vec<u8>) {
        {
            let mut waiting = self.lock();
            if *waiting >= self.max {
                drop(waiting);
                metrics().late_dropped.inc();
                let n = self.counts.dropped.fetch_add(1, Ordering::Relaxed) + 1;
                warn!(guid:% = call.guid(); "late reply not awaited: {} calls already waiting ({n} dropped so far)",
                    self.max
                );
                return;
            }
            *waiting += 1;
            metrics().late_waiting.set(*waiting as i64);
        }
        metrics().late_adopted.inc();
        self.counts.adopted.fetch_add(1, Ordering::Relaxed);
        let this = Arc::clone(self);
        let until = Instant::now() + self.wait;
        let spawned = std::thread::Builder::new()
            .name("late-reply".into())
            .stack_size(256 * 1024)
            .spawn(move || {
                let guid = call.guid().to_string();
                this.settle(&guid, call.wait(until), attempt, &msg);
                this.release();
            });
        if let Err(e) = spawned {
            warn!("cannot start a late-reply thread: {e}");
            self.release();
        }
    }

    fn settle(&self, guid: &str, outcome: Option<Outcome>, attempt: i64, msg: &[u8]) {
        let Some(outcome) = outcome else {
            info!(guid:% = guid; "no late reply within {} ms",
                self.wait.as_millis()
            );
            return;
        };
        metrics().late_arrived.inc();
        self.counts.arrived.fetch_add(1, Ordering::Relaxed);
        let (code, body) = match &outcome {
            Outcome::Booked(body) => (wire::OK, Some(body)),
            Outcome::Rejected(code) => (*code, None),
            Outcome::NotSent(why) | Outcome::Unknown(why) => {
                info!(guid:% = guid; "late reply settles nothing: {why}");
                return;
            }
        };
        let change = Change::new(
            guid,
            State::Unknown,
            Some(attempt),
            State::Done,
            code,
            wire::reply_to(msg, &code, body),
        )
        .because("late reply");
        // Recorded like any result: retried while the ledger fails, and if the row moved on
        // (resolve took a 404 from the core still at work: FAILED), put right.
        let by = Instant::now() + RECORD_WINDOW;
        // Nobody waits for this answer: only whether the result was written matters.
        let (_, made) = record_result(self.store.as_ref(), msg, None, change, by);
        if made {
            metrics().late_settled.inc();
            self.counts.settled.fetch_add(1, Ordering::Relaxed);
            info!(guid:% = guid; "late reply {}: settled DONE (attempt {attempt})",
                String::from_utf8_lossy(&code)
            );
        } else {
            info!(guid:% = guid; "late reply {} came after the row moved on; left to it",
                String::from_utf8_lossy(&code)
            );
        }
    }

    /// One waiter is done.
    fn release(&self) {
        let mut waiting = self.lock();
        *waiting -= 1;
        metrics().late_waiting.set(*waiting as i64);
        drop(waiting);
        self.done.notify_all();
    }

    /// Waits until no call is waiting any more (each ends by its own deadline).
    pub fn wait_all(&self) {
        let mut waiting = self.lock();
        while *waiting > 0 {
            info!("waiting for {} late repl(ies)", *waiting);
            waiting = self.done.wait(waiting).unwrap_or_else(|e| e.into_inner());
        }
    }
}
