//! The group commit's writer thread: it owns the ledger's write connection and runs the
//! writes of many connection threads in one transaction and one fsync. A write is submitted
//! as one closure over the `Ledger` with an answer slot of its own type, so what a write
//! comes to reaches its caller as it is.
//!
//! The hand-off costs one wake-up per batch, not one per write: the writer takes the whole
//! queue as a batch numbered by a generation, every submitter waits on the condition
//! variable of its batch's generation (two alternate: the batch being committed and the one
//! filling), and after the COMMIT the writer wakes them all in one `notify_all`. (One reply
//! channel per write cost the writer a `futex` wake per write, and on a busy machine each
//! woken thread preempted the writer before it had answered the rest of the batch.)

use std::fmt::Display;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Instant;

use crate::error::{LedgerError, Result};
use crate::sqlite::Ledger;
use crate::store::Durability;

/// Most statements one commit carries; bounds how long the first waiter waits for the rest.
const MAX_BATCH: usize = 1024;

/// One write waiting for the writer thread: a guarded statement, run in the batch's
/// transaction, whose own result is kept until the batch's COMMIT decides whether it stands.
pub(super) trait Job: Send {
    /// Runs the statement; its own error, if it failed.
    fn run(&mut self, l: &Ledger) -> Option<&LedgerError>;
    /// Leaves the answer for the thread that submitted it: the statement's own result, or,
    /// if the batch was not committed, `not_committed`. The submitter reads it once its
    /// batch's generation is done.
    fn answer(self: Box<Self>, not_committed: Option<&str>);
}

/// A write's statement.
type Statement<R> = Box<dyn FnOnce(&Ledger) -> Result<R> + Send>;

/// Where a write's result is left for its submitter.
type Slot<R> = Arc<Mutex<Option<Result<R>>>>;

/// A write and the slot its result goes to.
struct Submission<R> {
    statement: Option<Statement<R>>,
    outcome: Option<Result<R>>,
    reply: Slot<R>,
}

impl<R: Send> Job for Submission<R> {
    fn run(&mut self, l: &Ledger) -> Option<&LedgerError> {
        let statement = self.statement.take()?;
        self.outcome.insert(statement(l)).as_ref().err()
    }
    fn answer(self: Box<Self>, not_committed: Option<&str>) {
        let result = match (not_committed, self.outcome) {
            (Some(msg), _) => Err(LedgerError::Writer(msg.to_string())),
            (None, Some(outcome)) => outcome,
            (None, None) => Err(LedgerError::Writer("the write was never run".into())),
        };
        *lock(&self.reply) = Some(result);
    }
}

/// A write's result, once its job has been answered.
pub(super) struct Answer<R>(Slot<R>);

impl<R> Answer<R> {
    /// The result, if the job was answered (taken: `None` the second time).
    pub(super) fn recv(&self) -> Option<Result<R>> {
        lock(&self.0).take()
    }
}

/// `f` as a job for the writer, and where its result will come.
pub(super) fn submission<R: Send + 'static>(
    f: impl FnOnce(&Ledger) -> Result<R> + Send + 'static,
) -> (Box<dyn Job>, Answer<R>) {
    let slot: Slot<R> = Arc::new(Mutex::new(None));
    let job = Submission {
        statement: Some(Box::new(f) as Statement<R>),
        outcome: None,
        reply: Arc::clone(&slot),
    };
    (Box::new(job), Answer(slot))
}

/// A mutex's guard, poisoned or not (nothing here is left half-changed by a panic).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The writes waiting for the next batch.
struct Queue {
    jobs: Vec<Box<dyn Job>>,
    /// The generation of the next batch the writer takes.
    next: u64,
    /// The writer waits for `work` (so a submitter must wake it).
    writer_idle: bool,
    /// No more writes: the `Writer` was dropped, or the writer thread ended.
    closed: bool,
}

/// What the writer thread and the submitters share.
struct Shared {
    queue: Mutex<Queue>,
    /// Signalled when a write is queued while the writer is idle, or the queue is closed.
    work: Condvar,
    /// Batches of every generation below this one are answered (`u64::MAX`: the writer
    /// thread has ended; whatever is unanswered never will be).
    done: Mutex<u64>,
    /// The submitters of generation `g` wait on `answered[g % 2]`.
    answered: [Condvar; 2],
}

impl Shared {
    /// Marks generations below `upto` answered and wakes their submitters at once.
    fn finish(&self, upto: u64) {
        *lock(&self.done) = upto;
        if upto == u64::MAX {
            self.answered.iter().for_each(Condvar::notify_all);
        } else if let Some(g) = upto.checked_sub(1) {
            self.answered[(g % 2) as usize].notify_all();
        }
    }
}

/// Group commit: one thread owns the ledger's write connection and runs the writes of many
/// connection threads in one transaction and one fsync. Each write is still its own guarded
/// statement whose row count decides, and each waiting thread is released only after the
/// commit that holds its statement. Batches form by themselves: whatever queued while the
/// previous commit was syncing goes into the next one.
pub struct Writer {
    shared: Arc<Shared>,
    /// The write connection's durability, read on that connection when it was opened.
    pub(super) durability: Durability,
}

impl Writer {
    /// Opens the write connection and starts the writer thread; it ends when the `Writer`
    /// is dropped.
    pub fn start(path: &Path, who: &str) -> Result<Writer> {
        let ledger = Ledger::open(path)?.acting_as(who);
        // Checkpoints are the checkpointer thread's (`checkpoint`); this is the backstop.
        ledger
            .connection()
            .pragma_update(
                None,
                "wal_autocheckpoint",
                super::checkpoint::WRITER_AUTOCHECKPOINT,
            )
            .map_err(LedgerError::from)?;
        let durability = ledger.durability()?;
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue {
                jobs: Vec::new(),
                next: 0,
                writer_idle: false,
                closed: false,
            }),
            work: Condvar::new(),
            done: Mutex::new(0),
            answered: [Condvar::new(), Condvar::new()],
        });
        let theirs = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("ledger-writer".into())
            .spawn(move || {
                let _ended = Ended(&theirs);
                write_loop(&ledger, &theirs);
            })
            .map_err(|e| LedgerError::Writer(format!("cannot start the writer thread: {e}")))?;
        Ok(Writer { shared, durability })
    }

    /// Runs the write `f` in the next batch; its result once that batch is committed.
    pub fn submit<R: Send + 'static>(
        &self,
        f: impl FnOnce(&Ledger) -> Result<R> + Send + 'static,
    ) -> Result<R> {
        let (job, answer) = submission(f);
        let generation = {
            let mut q = lock(&self.shared.queue);
            if q.closed {
                return Err(writer_gone());
            }
            // The writer takes at most MAX_BATCH a batch, oldest first.
            let generation = q.next + (q.jobs.len() / MAX_BATCH) as u64;
            q.jobs.push(job);
            if std::mem::take(&mut q.writer_idle) {
                self.shared.work.notify_one();
            }
            generation
        };
        let cv = &self.shared.answered[(generation % 2) as usize];
        let mut done = lock(&self.shared.done);
        while *done <= generation {
            done = cv.wait(done).unwrap_or_else(|e| e.into_inner());
        }
        drop(done);
        answer.recv().unwrap_or_else(|| Err(writer_gone()))
    }
}

impl Drop for Writer {
    /// The writer thread commits what is queued, then ends.
    fn drop(&mut self) {
        lock(&self.shared.queue).closed = true;
        self.shared.work.notify_one();
    }
}

/// Set as the writer thread ends, however it ends (a statement that panicked included):
/// the queue is closed and every submitter still waiting is released (with `writer_gone`).
struct Ended<'a>(&'a Shared);

impl Drop for Ended<'_> {
    fn drop(&mut self) {
        let mut q = lock(&self.0.queue);
        q.closed = true;
        let unanswered = std::mem::take(&mut q.jobs);
        drop(q);
        drop(unanswered);
        self.0.finish(u64::MAX);
    }
}

fn write_loop(ledger: &Ledger, shared: &Shared) {
    // The batch's vector goes back and forth with the queue's: no allocation per batch.
    let mut batch: Vec<Box<dyn Job>> = Vec::new();
    loop {
        let generation = {
            let mut q = lock(&shared.queue);
            while q.jobs.is_empty() {
                if q.closed {
                    return;
                }
                q.writer_idle = true;
                q = shared.work.wait(q).unwrap_or_else(|e| e.into_inner());
            }
            q.writer_idle = false;
            if q.jobs.len() > MAX_BATCH {
                batch.extend(q.jobs.drain(..MAX_BATCH));
            } else {
                std::mem::swap(&mut q.jobs, &mut batch);
            }
            q.next += 1;
            q.next - 1
        };
        commit_batch(ledger, &mut batch);
        shared.finish(generation + 1);
    }
}

/// Runs `batch` in one transaction, reports the commit, then answers each of its writes
/// (`batch` is left empty).
pub(super) fn commit_batch(ledger: &Ledger, batch: &mut Vec<Box<dyn Job>>) {
    let started = Instant::now();
    let not_committed = run_batch(ledger, batch).err();
    crate::observe::commit(batch.len(), started.elapsed());
    for job in batch.drain(..) {
        job.answer(not_committed.as_deref());
    }
}

fn writer_gone() -> LedgerError {
    LedgerError::Writer("the writer thread has stopped".into())
}
/// Runs `jobs` in one transaction. A statement's own error fails only that statement, unless
/// SQLite rolled the whole transaction back (busy, I/O, full disk): then, as when the commit
/// fails, every statement of the batch fails, since none of them is durable (the error
/// returned is what each is told).
fn run_batch(l: &Ledger, jobs: &mut [Box<dyn Job>]) -> std::result::Result<(), String> {
    let conn = l.connection();
    let not_committed = |e: &dyn Display| format!("transaction not committed: {e}");
    l.begin_batch().map_err(|e| not_committed(&e))?;
    for job in jobs.iter_mut() {
        if let Some(e) = job.run(l)
            && conn.is_autocommit()
        {
            l.abandon_batch();
            return Err(not_committed(e));
        }
    }
    let commit = l.end_batch().and_then(|()| {
        conn.prepare_cached("COMMIT")
            .and_then(|mut st| st.execute([]))
            .map_err(LedgerError::from)
    });
    if let Err(e) = commit {
        let _ = conn.execute_batch("ROLLBACK");
        return Err(not_committed(&e));
    }
    Ok(())
}
