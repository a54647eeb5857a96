//! The group commit's writer thread: it owns the ledger's write connection and runs the
//! writes of many connection threads in one transaction and one fsync. A write is submitted
//! as one closure over the `Ledger` with a reply channel of its own type, so what a write
//! comes to reaches its caller as it is.

use std::fmt::Display;
use std::path::Path;
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
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
    /// Answers the thread that submitted it: the statement's own result, or, if the batch was
    /// not committed, `not_committed`.
    fn answer(self: Box<Self>, not_committed: Option<&str>);
}

/// A write's statement.
type Statement<R> = Box<dyn FnOnce(&Ledger) -> Result<R> + Send>;

/// A write and the channel its result goes back on.
struct Submission<R> {
    statement: Option<Statement<R>>,
    outcome: Option<Result<R>>,
    reply: SyncSender<Result<R>>,
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
        let _ = self.reply.send(result);
    }
}

/// `f` as a job for the writer, and where its result will come.
pub(super) fn submission<R: Send + 'static>(
    f: impl FnOnce(&Ledger) -> Result<R> + Send + 'static,
) -> (Box<dyn Job>, Receiver<Result<R>>) {
    let (reply, answer) = mpsc::sync_channel(1);
    let job = Submission {
        statement: Some(Box::new(f) as Statement<R>),
        outcome: None,
        reply,
    };
    (Box::new(job), answer)
}

/// Group commit: one thread owns the ledger's write connection and runs the writes of many
/// connection threads in one transaction and one fsync. Each write is still its own guarded
/// statement whose row count decides, and each waiting thread is released only after the
/// commit that holds its statement. Batches form by themselves: whatever queued while the
/// previous commit was syncing goes into the next one.
pub struct Writer {
    queue: Sender<Box<dyn Job>>,
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
        let (tx, rx) = mpsc::channel::<Box<dyn Job>>();
        std::thread::Builder::new()
            .name("ledger-writer".into())
            .spawn(move || write_loop(&ledger, &rx))
            .map_err(|e| LedgerError::Writer(format!("cannot start the writer thread: {e}")))?;
        Ok(Writer {
            queue: tx,
            durability,
        })
    }

    /// Runs the write `f` in the next batch; its result once that batch is committed.
    pub fn submit<R: Send + 'static>(
        &self,
        f: impl FnOnce(&Ledger) -> Result<R> + Send + 'static,
    ) -> Result<R> {
        let (job, answer) = submission(f);
        if self.queue.send(job).is_err() {
            return Err(writer_gone());
        }
        answer.recv().unwrap_or_else(|_| Err(writer_gone()))
    }
}

fn write_loop(ledger: &Ledger, rx: &Receiver<Box<dyn Job>>) {
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        commit_batch(ledger, batch);
    }
}

/// Runs `batch` in one transaction, reports the commit, then answers each of its writes.
pub(super) fn commit_batch(ledger: &Ledger, mut batch: Vec<Box<dyn Job>>) {
    let started = Instant::now();
    let not_committed = run_batch(ledger, &mut batch).err();
    crate::observe::commit(batch.len(), started.elapsed());
    for job in batch {
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
