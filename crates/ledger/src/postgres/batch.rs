//! Group commit on PostgreSQL: the claims (and, apart, the results) that connection threads
//! submit together go to the server as one statement and one commit.
//!
//! A `Batcher` has a few writer threads sharing one queue. A writer takes the first write
//! that waits, then whatever else is already queued (no timer: what queued while the previous
//! batch was committing goes into the next one), runs them through `run` on a pooled
//! connection under the pool's deadline, and answers each submitter with its own result.
//! Every submitter waits at most its own deadline (and a margin): a batch whose outcome is
//! unknown answers each of its writes with an error, never with a guess.

use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::error::{LedgerError, Result};

/// Most writes one statement carries: bounds a batch's arrays and how long its commit takes.
pub(super) const MAX_BATCH: usize = 512;

/// How long past its deadline a submitter waits for the writer's answer (the writer answers
/// by the deadline itself; this only covers a writer that cannot).
const ANSWER_MARGIN: Duration = Duration::from_millis(500);

/// One write waiting in the queue, with its deadline and where its answer goes.
pub(super) struct Waiting<I, A> {
    pub item: I,
    pub deadline: Instant,
    reply: SyncSender<Result<A>>,
}

/// What runs a batch: each write's own result, in the order of `batch`.
type Run<I, A> = dyn Fn(&[Waiting<I, A>]) -> Vec<Result<A>> + Send + Sync;

pub(super) struct Batcher<I, A> {
    queue: Sender<Waiting<I, A>>,
    what: &'static str,
}

impl<I: Send + 'static, A: Send + 'static> Batcher<I, A> {
    /// Starts `writers` writer threads named `name`; they end when the `Batcher` is dropped.
    pub fn start(
        name: &str,
        what: &'static str,
        writers: usize,
        run: impl Fn(&[Waiting<I, A>]) -> Vec<Result<A>> + Send + Sync + 'static,
    ) -> Result<Batcher<I, A>> {
        let (queue, rx) = mpsc::channel::<Waiting<I, A>>();
        let rx = Arc::new(Mutex::new(rx));
        let run: Arc<Run<I, A>> = Arc::new(run);
        for _ in 0..writers {
            let (rx, run) = (Arc::clone(&rx), Arc::clone(&run));
            std::thread::Builder::new()
                .name(name.to_string())
                .stack_size(256 * 1024)
                .spawn(move || write_loop(&rx, &*run))
                .map_err(|e| {
                    LedgerError::Unavailable(format!("cannot start the {name} thread: {e}"))
                })?;
        }
        Ok(Batcher { queue, what })
    }

    /// Submits `item` and waits for its result, at most until `deadline` (and a margin).
    pub fn submit(&self, item: I, deadline: Instant) -> Result<A> {
        let started = Instant::now();
        let (reply, answer) = mpsc::sync_channel(1);
        let waiting = Waiting {
            item,
            deadline,
            reply,
        };
        if self.queue.send(waiting).is_err() {
            return Err(LedgerError::Unavailable(format!(
                "{}: the batch writer has stopped",
                self.what
            )));
        }
        let wait = deadline.saturating_duration_since(started) + ANSWER_MARGIN;
        answer.recv_timeout(wait).unwrap_or_else(|_| {
            Err(LedgerError::Deadline {
                what: self.what,
                after: started.elapsed(),
            })
        })
    }
}

fn write_loop<I, A>(rx: &Mutex<Receiver<Waiting<I, A>>>, run: &Run<I, A>) {
    loop {
        let batch = {
            let rx = rx.lock().unwrap_or_else(|e| e.into_inner());
            let Ok(first) = rx.recv() else { return };
            let mut batch = vec![first];
            while batch.len() < MAX_BATCH {
                match rx.try_recv() {
                    Ok(w) => batch.push(w),
                    Err(_) => break,
                }
            }
            batch
        };
        let started = Instant::now();
        let results = run(&batch);
        crate::observe::commit(batch.len(), started.elapsed());
        let mut results = results.into_iter();
        for w in batch {
            let result = results.next().unwrap_or_else(|| {
                Err(LedgerError::Writer(
                    "the batch gave no result for this write".into(),
                ))
            });
            let _ = w.reply.send(result);
        }
    }
}

/// The earliest deadline of `batch`: the batch must answer by then.
pub(super) fn deadline_of<I, A>(batch: &[Waiting<I, A>]) -> Instant {
    batch
        .iter()
        .map(|w| w.deadline)
        .min()
        .unwrap_or_else(Instant::now)
}

/// `e`, which failed a whole batch, as each of its writes is told.
pub(super) fn shared(e: &LedgerError) -> LedgerError {
    match e {
        LedgerError::Deadline { what, after } => LedgerError::Deadline {
            what,
            after: *after,
        },
        LedgerError::PoolExhausted => LedgerError::PoolExhausted,
        // Kept as it is: the relay must not retry such a write (see `NotReplicated`).
        LedgerError::NotReplicated { what } => LedgerError::NotReplicated { what },
        other => LedgerError::Unavailable(format!("the batch was not committed: {other}")),
    }
}

/// Each of `n` writes failed with `e`.
pub(super) fn all_failed<A>(n: usize, e: &LedgerError) -> Vec<Result<A>> {
    (0..n).map(|_| Err(shared(e))).collect()
}

/// A write as a test builds it, its answer going nowhere.
#[cfg(test)]
pub(super) fn waiting<I, A>(item: I) -> Waiting<I, A> {
    let (reply, _) = mpsc::sync_channel(1);
    Waiting {
        item,
        deadline: Instant::now(),
        reply,
    }
}
