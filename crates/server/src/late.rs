//! The late-reply waiters: a call the relay gave up on at its read timeout (handed over by
//! the engine, `Events::late_call`) is read on by a thread of its own for up to
//! `--late-reply-ms`, and its answer settles the row (`engine::late::settle`). Bounded,
//! counted in the metrics, and waited for at shutdown.

use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use engine::core::PendingAnswer;
use ledger::store::Store;
use log::{info, warn};

use crate::metrics::Metrics;

/// The background waiters: bounded, counted, and waited for at shutdown.
pub struct LateReplies {
    store: Arc<dyn Store>,
    metrics: Arc<Metrics>,
    wait: Duration,
    max: usize,
    waiting: Mutex<usize>,
    done: Condvar,
}

impl LateReplies {
    pub fn new(
        store: Arc<dyn Store>,
        metrics: Arc<Metrics>,
        wait: Duration,
        max: usize,
    ) -> LateReplies {
        LateReplies {
            store,
            metrics,
            wait,
            max,
            waiting: Mutex::new(0),
            done: Condvar::new(),
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
    /// with request `msg`, and has it settle the row; the metrics hear what came of it.
    pub fn adopt(self: &Arc<Self>, call: Box<dyn PendingAnswer>, attempt: i64, msg: Vec<u8>) {
        {
            let mut waiting = self.lock();
            if *waiting >= self.max {
                drop(waiting);
                self.metrics.late_dropped.inc();
                let n = self.metrics.late_dropped.get();
                warn!(guid:% = call.guid(); "late reply not awaited: {} calls already waiting ({n} dropped so far)",
                    self.max
                );
                return;
            }
            *waiting += 1;
            self.metrics.late_waiting.set(*waiting as i64);
        }
        self.metrics.late_adopted.inc();
        let this = Arc::clone(self);
        let until = Instant::now() + self.wait;
        let spawned = std::thread::Builder::new()
            .name("late-reply".into())
            .stack_size(256 * 1024)
            .spawn(move || {
                let guid = call.guid().to_string();
                match call.wait(until) {
                    Some(outcome) => {
                        let (store, events) = (this.store.as_ref(), this.metrics.as_ref());
                        engine::late::settle(store, events, &guid, outcome, attempt, &msg);
                    }
                    None => info!(guid:% = guid; "no late reply within {} ms",
                        this.wait.as_millis()
                    ),
                }
                this.release();
            });
        if let Err(e) = spawned {
            warn!("cannot start a late-reply thread: {e}");
            self.release();
        }
    }

    /// One waiter is done.
    fn release(&self) {
        let mut waiting = self.lock();
        *waiting -= 1;
        self.metrics.late_waiting.set(*waiting as i64);
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
