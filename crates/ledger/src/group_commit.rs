//! The relay's ledger: one writer thread that commits the guarded statements of many
//! connection threads together (group commit), and a bounded pool of read connections.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::error::{LedgerError, Result};
use crate::sqlite::{BUSY_TIMEOUT, Ledger, health_read_back};
use crate::state::{Change, Evidence, HistoryRow, Row, State};
use crate::store::{Durability, InquiryRecord, Store};

/// One write waiting for the writer thread.
enum Op {
    Claim {
        guid: String,
        tx_code: String,
        request: Vec<u8>,
    },
    ReclaimFailed {
        guid: String,
        request: Vec<u8>,
    },
    ReclaimForResend {
        guid: String,
        max_attempts: i64,
    },
    Transition(Change),
    PurgeChunk {
        days: u64,
        limit: usize,
    },
    InquiryFailed {
        guid: String,
        error: String,
        min_age_secs: u64,
    },
    ClearInquiry {
        guid: String,
    },
    PruneInquiries,
    PurgeHistoryChunk {
        days: u64,
        tx_days: u64,
        limit: usize,
    },
    Evidence(Evidence),
    /// `/healthz`'s write: the probe row into `tx`, rolled back to a savepoint of its own
    /// (the batch's other statements untouched), then the `relay_health` row.
    TouchHealth,
}

/// What a write came to.
enum Written {
    /// Whether it changed the row and, for a re-claim, the attempt won (for a purge or a
    /// prune, how many rows went).
    Count(Option<i64>),
    /// A failed inquiry's record as it now is.
    Record(InquiryRecord),
}

type Outcome = Result<Written>;

impl Op {
    fn run(&self, l: &Ledger) -> Outcome {
        let count = match self {
            Op::Claim {
                guid,
                tx_code,
                request,
            } => l.claim_new(guid, tx_code, request)?.then_some(1),
            Op::ReclaimFailed { guid, request } => l.reclaim_failed(guid, request)?,
            Op::ReclaimForResend { guid, max_attempts } => {
                l.reclaim_for_resend(guid, *max_attempts)?
            }
            Op::Transition(c) => l.transition(c)?.then_some(0),
            Op::PurgeChunk { days, limit } => Some(l.purge_chunk(*days, *limit)? as i64),
            Op::InquiryFailed {
                guid,
                error,
                min_age_secs,
            } => {
                return Ok(Written::Record(l.record_inquiry_failure(
                    guid,
                    error,
                    *min_age_secs,
                )?));
            }
            Op::ClearInquiry { guid } => l.clear_inquiry(guid)?.then_some(1),
            Op::PruneInquiries => Some(l.prune_inquiries()? as i64),
            Op::PurgeHistoryChunk {
                days,
                tx_days,
                limit,
            } => Some(l.purge_history_chunk(*days, *tx_days, *limit)? as i64),
            Op::TouchHealth => l.touch_health().map(|()| Some(0))?,
            Op::Evidence(e) => l.record_evidence(e).map(|()| Some(1))?,
        };
        Ok(Written::Count(count))
    }
}

type Reply = SyncSender<Outcome>;

/// Most statements one commit carries; bounds how long the first waiter waits for the rest.
const MAX_BATCH: usize = 1024;

/// Group commit: one thread owns the ledger's write connection and runs the writes of many
/// connection threads in one transaction and one fsync. Each write is still its own guarded
/// statement whose row count decides, and each waiting thread is released only after the
/// commit that holds its statement. Batches form by themselves: whatever queued while the
/// previous commit was syncing goes into the next one.
pub struct Writer {
    queue: Sender<(Op, Reply)>,
    /// The write connection's durability, read on that connection when it was opened.
    durability: Durability,
}

impl Writer {
    /// Opens the write connection and starts the writer thread; it ends when the `Writer`
    /// is dropped.
    pub fn start(path: &Path, who: &str) -> Result<Writer> {
        let ledger = Ledger::open(path)?.acting_as(who);
        let durability = ledger.durability()?;
        let (tx, rx) = mpsc::channel::<(Op, Reply)>();
        std::thread::Builder::new()
            .name("ledger-writer".into())
            .spawn(move || write_loop(&ledger, &rx))
            .map_err(|e| LedgerError::Writer(format!("cannot start the writer thread: {e}")))?;
        Ok(Writer {
            queue: tx,
            durability,
        })
    }

    fn submit(&self, op: Op) -> Outcome {
        let (reply, answer) = mpsc::sync_channel(1);
        if self.queue.send((op, reply)).is_err() {
            return Err(writer_gone());
        }
        answer.recv().unwrap_or_else(|_| Err(writer_gone()))
    }

    /// A write whose outcome is a count (every write but a failed inquiry's record).
    fn count(&self, op: Op) -> Result<Option<i64>> {
        match self.submit(op)? {
            Written::Count(n) => Ok(n),
            Written::Record(_) => Err(LedgerError::Writer("a record for a count".into())),
        }
    }
}

fn write_loop(ledger: &Ledger, rx: &Receiver<(Op, Reply)>) {
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        let ops: Vec<&Op> = batch.iter().map(|(op, _)| op).collect();
        let started = Instant::now();
        let results = run_batch(ledger, &ops);
        crate::observe::commit(ops.len(), started.elapsed());
        for ((_, reply), result) in batch.into_iter().zip(results) {
            let _ = reply.send(result);
        }
    }
}

fn writer_gone() -> LedgerError {
    LedgerError::Writer("the writer thread has stopped".into())
}

/// Runs `ops` in one transaction. A statement's own error fails only that statement, unless
/// SQLite rolled the whole transaction back (busy, I/O, full disk): then, as when the commit
/// fails, every statement of the batch fails, since none of them is durable.
fn run_batch(l: &Ledger, ops: &[&Op]) -> Vec<Outcome> {
    let conn = l.connection();
    let all_fail = |e: &dyn std::fmt::Display| {
        let msg = format!("transaction not committed: {e}");
        ops.iter()
            .map(|_| Err(LedgerError::Writer(msg.clone())))
            .collect()
    };
    if let Err(e) = l.begin_batch() {
        return all_fail(&e);
    }
    let mut results = Vec::with_capacity(ops.len());
    for op in ops {
        let r = op.run(l);
        if let Err(e) = &r
            && conn.is_autocommit()
        {
            l.abandon_batch();
            return all_fail(e);
        }
        results.push(r);
    }
    let commit = l.end_batch().and_then(|()| {
        conn.prepare_cached("COMMIT")
            .and_then(|mut st| st.execute([]))
            .map_err(LedgerError::from)
    });
    if let Err(e) = commit {
        let _ = conn.execute_batch("ROLLBACK");
        return all_fail(&e);
    }
    results
}

/// The relay's store: reads never queue behind writes, writes share commits.
pub struct GroupCommit {
    writer: Writer,
    reads: Pool,
}

impl GroupCommit {
    /// Opens (creating if needed) the ledger at `path`: the relay's.
    /// `who` names the writer's changes in the history.
    pub fn open(path: &Path, who: &str) -> Result<GroupCommit> {
        Ok(GroupCommit {
            reads: Pool::open(path)?,
            writer: Writer::start(path, who)?,
        })
    }

    /// Opens a ledger that must already exist: for the batch tools that work on several
    /// rows at once.
    pub fn open_existing(path: &Path, who: &str) -> Result<GroupCommit> {
        drop(Ledger::open_existing(path)?);
        GroupCommit::open(path, who)
    }
}

impl Store for GroupCommit {
    fn read(&self, guid: &str) -> Result<Option<Row>> {
        self.reads.get()?.get(guid)
    }
    fn claim_new(&self, guid: &str, tx_code: &str, request: &[u8]) -> Result<bool> {
        let won = self.writer.count(Op::Claim {
            guid: guid.to_string(),
            tx_code: tx_code.to_string(),
            request: request.to_vec(),
        })?;
        Ok(won.is_some())
    }
    fn reclaim_failed(&self, guid: &str, request: &[u8]) -> Result<Option<i64>> {
        self.writer.count(Op::ReclaimFailed {
            guid: guid.to_string(),
            request: request.to_vec(),
        })
    }
    fn reclaim_for_resend(&self, guid: &str, max_attempts: i64) -> Result<Option<i64>> {
        self.writer.count(Op::ReclaimForResend {
            guid: guid.to_string(),
            max_attempts,
        })
    }
    fn transition(&self, change: &Change) -> Result<bool> {
        Ok(self.writer.count(Op::Transition(change.clone()))?.is_some())
    }
    fn select_aged(&self, state: State, min_age_secs: u64) -> Result<Vec<Row>> {
        self.reads.get()?.select_aged(state, min_age_secs)
    }
    fn select_resendable(&self, max_attempts: i64, limit: Option<u64>) -> Result<Vec<Row>> {
        self.reads.get()?.select_resendable(max_attempts, limit)
    }
    fn select_due(&self, state: State, min_age_secs: u64, max_inquiries: u32) -> Result<Vec<Row>> {
        self.reads
            .get()?
            .select_due(state, min_age_secs, max_inquiries)
    }
    fn record_inquiry_failure(
        &self,
        guid: &str,
        error: &str,
        min_age_secs: u64,
    ) -> Result<InquiryRecord> {
        match self.writer.submit(Op::InquiryFailed {
            guid: guid.to_string(),
            error: error.to_string(),
            min_age_secs,
        })? {
            Written::Record(r) => Ok(r),
            Written::Count(_) => Err(LedgerError::Writer("a count for a record".into())),
        }
    }
    fn clear_inquiry(&self, guid: &str) -> Result<bool> {
        Ok(self
            .writer
            .count(Op::ClearInquiry {
                guid: guid.to_string(),
            })?
            .is_some())
    }
    fn prune_inquiries(&self) -> Result<usize> {
        let n = self.writer.count(Op::PruneInquiries)?;
        Ok(n.map_or(0, |n| usize::try_from(n).unwrap_or(0)))
    }
    fn needs_operator(&self, max_inquiries: u32) -> Result<Vec<InquiryRecord>> {
        self.reads.get()?.needs_operator(max_inquiries)
    }
    fn inquiry_records(&self) -> Result<Vec<InquiryRecord>> {
        self.reads.get()?.inquiry_records()
    }
    fn select_purgeable(&self, days: u64) -> Result<Vec<Row>> {
        self.reads.get()?.select_purgeable(days)
    }
    fn purge_chunk(&self, days: u64, limit: usize) -> Result<usize> {
        let n = self.writer.count(Op::PurgeChunk { days, limit })?;
        Ok(n.map_or(0, |n| usize::try_from(n).unwrap_or(0)))
    }
    fn recent_bookings(&self, limit: usize) -> Result<Vec<Row>> {
        self.reads.get()?.recent_bookings(limit)
    }
    fn all_rows(&self) -> Result<Vec<Row>> {
        self.reads.get()?.all_rows()
    }
    fn history(&self, guid: &str) -> Result<Vec<HistoryRow>> {
        self.reads.get()?.history(guid)
    }
    fn record_evidence(&self, e: &Evidence) -> Result<()> {
        self.writer.count(Op::Evidence(e.clone())).map(|_| ())
    }
    fn purge_history_chunk(&self, days: u64, tx_days: u64, limit: usize) -> Result<usize> {
        let n = self.writer.count(Op::PurgeHistoryChunk {
            days,
            tx_days,
            limit,
        })?;
        Ok(n.map_or(0, |n| usize::try_from(n).unwrap_or(0)))
    }
    fn oldest_age_secs(&self, state: State) -> Result<Option<f64>> {
        self.reads.get()?.oldest_age_secs(state)
    }
    /// Written through the writer thread (a commit like any claim's), read on the pool.
    fn health_round_trip(&self) -> Result<()> {
        self.writer.count(Op::TouchHealth)?;
        health_read_back(self.reads.get()?.read_health()?)
    }
    fn count_by_state(&self) -> Result<Vec<(State, i64)>> {
        self.reads.get()?.count_by_state()
    }
    /// The writer's, then each pooled reader's (all of them, opened at once if need be).
    fn durability(&self) -> Result<Vec<Durability>> {
        let mut all = vec![self.writer.durability.clone()];
        all.extend(self.reads.durability_of_all()?);
        Ok(all)
    }
}

/// Read connections shared by the relay's connection threads: each request borrows one and
/// gives it back, so a thousand idle channel connections do not hold a thousand files. At
/// most `POOL_MAX` exist (each holds three descriptors: the file, its WAL and its shared
/// memory); a request that finds them all lent waits up to the busy timeout, then fails as
/// any ledger error does (E905, before any claim).
pub struct Pool {
    path: PathBuf,
    slots: Mutex<Slots>,
    returned: Condvar,
}

/// Most read connections the relay opens.
pub const POOL_MAX: usize = 16;

struct Slots {
    idle: Vec<Ledger>,
    /// Connections that exist, idle or lent.
    open: usize,
}

impl Pool {
    /// Opens one connection at once, so that a bad path or pragma fails at start-up.
    pub fn open(path: &Path) -> Result<Pool> {
        let first = Ledger::open(path)?;
        Ok(Pool {
            path: path.to_path_buf(),
            slots: Mutex::new(Slots {
                idle: vec![first],
                open: 1,
            }),
            returned: Condvar::new(),
        })
    }

    fn slots(&self) -> std::sync::MutexGuard<'_, Slots> {
        self.slots.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn get(&self) -> Result<Pooled<'_>> {
        let deadline = Instant::now() + BUSY_TIMEOUT;
        let mut slots = self.slots();
        loop {
            if let Some(l) = slots.idle.pop() {
                return Ok(self.lend(l));
            }
            if slots.open < POOL_MAX {
                slots.open += 1;
                drop(slots);
                return match Ledger::open(&self.path) {
                    Ok(l) => Ok(self.lend(l)),
                    Err(e) => {
                        self.slots().open -= 1;
                        self.returned.notify_one();
                        Err(e)
                    }
                };
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(LedgerError::PoolExhausted);
            }
            slots = self
                .returned
                .wait_timeout(slots, left.min(Duration::from_millis(100)))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    fn lend(&self, ledger: Ledger) -> Pooled<'_> {
        Pooled {
            pool: self,
            ledger: Some(ledger),
        }
    }

    /// Borrows every connection the pool may hold at once and reads each one's durability.
    pub fn durability_of_all(&self) -> Result<Vec<Durability>> {
        let lent: Vec<Pooled<'_>> = (0..POOL_MAX).map(|_| self.get()).collect::<Result<_>>()?;
        lent.iter().map(|l| l.durability()).collect()
    }
}

/// A borrowed connection; returns to the pool when dropped.
pub struct Pooled<'a> {
    pool: &'a Pool,
    ledger: Option<Ledger>,
}

impl std::ops::Deref for Pooled<'_> {
    type Target = Ledger;
    fn deref(&self) -> &Ledger {
        self.ledger.as_ref().expect("present until drop")
    }
}

impl Drop for Pooled<'_> {
    fn drop(&mut self) {
        if let Some(l) = self.ledger.take() {
            self.pool.slots().idle.push(l);
            self.pool.returned.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::HEALTH_PROBE_GUID;

    /// A power loss must not forget a claim whose POST reached the core: every connection
    /// the relay writes or reads with runs in WAL mode with synchronous=FULL.
    #[test]
    fn every_connection_of_the_relay_is_wal_and_full() {
        let dir = tempfile::tempdir().unwrap();
        let store = GroupCommit::open(&dir.path().join("l.db"), "test").unwrap();
        let all = store.durability().unwrap();
        assert_eq!(all.len(), 1 + POOL_MAX, "the writer and every reader");
        for d in all {
            assert!(d.is_durable(), "{d:?}");
        }
    }

    /// A COMMIT that fails for real: a deferred foreign key, checked by SQLite only at
    /// COMMIT, that every claimed row violates (test-only tables and trigger on the writer's
    /// own connection; nothing in the relay's code path is stubbed). Every statement of the
    /// batch ran and said "won", yet none is durable: every one must fail (the relay answers
    /// E905 and calls the core for none), and the ledger must hold none of them.
    #[test]
    fn a_commit_that_fails_fails_every_statement_of_the_batch() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("l.db");
        let l = Ledger::open(&path).unwrap().acting_as("relay");
        l.connection()
            .execute_batch(
                "PRAGMA foreign_keys = ON;
                 CREATE TEMP TABLE parent (id TEXT PRIMARY KEY);
                 CREATE TEMP TABLE child (
                     id TEXT REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED);
                 CREATE TEMP TRIGGER claim_violates_at_commit AFTER INSERT ON main.tx BEGIN
                     INSERT INTO child (id) VALUES (NEW.guid);
                 END;",
            )
            .unwrap();
        let guids = ["G-C1", "G-C2", "G-C3"];
        let claims: Vec<Op> = guids
            .iter()
            .map(|g| Op::Claim {
                guid: g.to_string(),
                tx_code: "TRNF".into(),
                request: g.as_bytes().to_vec(),
            })
            .collect();
        let ops: Vec<&Op> = claims.iter().collect();

        let results = run_batch(&l, &ops);

        assert_eq!(results.len(), guids.len());
        for (g, r) in guids.iter().zip(&results) {
            match r {
                Err(LedgerError::Writer(msg)) => {
                    assert!(msg.starts_with("transaction not committed: "), "{g}: {msg}");
                    assert!(msg.contains("FOREIGN KEY"), "{g}: {msg}");
                }
                Err(e) => panic!("{g}: another error than the commit's: {e}"),
                Ok(_) => panic!("{g}: reported written although its COMMIT failed"),
            }
        }
        assert!(l.connection().is_autocommit(), "the batch was rolled back");
        let other = Ledger::open(&path).unwrap();
        assert_eq!(
            other.count_by_state().unwrap(),
            vec![],
            "no claim is durable"
        );
        for g in guids {
            assert!(
                other.history(g).unwrap().is_empty(),
                "{g}: no history either"
            );
        }
        assert_eq!(
            other
                .connection()
                .query_row("SELECT count(*) FROM tx_actor", [], |r| r.get::<_, i64>(0))
                .unwrap(),
            0,
            "no actor row is left behind"
        );
        // The writer's connection is usable again: the next batch commits.
        l.connection()
            .execute_batch("DROP TRIGGER temp.claim_violates_at_commit")
            .unwrap();
        let again = run_batch(&l, &ops);
        assert!(again.iter().all(Result::is_ok));
        assert_eq!(other.count_by_state().unwrap(), vec![(State::Sent, 3)]);
    }

    /// `/healthz`'s probe shares a batch with claims: its row into `tx` is rolled back to its
    /// own savepoint, the claims beside it commit; a probe that fails (a `tx` trigger that
    /// refuses it) fails alone, and the claims still commit.
    #[test]
    fn the_health_probe_leaves_the_claims_of_its_batch_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("l.db");
        let l = Ledger::open(&path).unwrap().acting_as("relay");
        let claim = |g: &str| Op::Claim {
            guid: g.into(),
            tx_code: "TRNF".into(),
            request: g.as_bytes().to_vec(),
        };
        let batch = [claim("G-H1"), Op::TouchHealth, claim("G-H2")];
        let ops: Vec<&Op> = batch.iter().collect();
        assert!(run_batch(&l, &ops).iter().all(Result::is_ok));

        l.connection()
            .execute_batch(&format!(
                "CREATE TEMP TRIGGER refuse_the_probe BEFORE INSERT ON main.tx \
                 WHEN NEW.guid = '{HEALTH_PROBE_GUID}' BEGIN SELECT RAISE(ABORT, 'refused'); END"
            ))
            .unwrap();
        let batch = [claim("G-H3"), Op::TouchHealth, claim("G-H4")];
        let ops: Vec<&Op> = batch.iter().collect();
        let results = run_batch(&l, &ops);
        assert!(results[0].is_ok() && results[2].is_ok());
        match &results[1] {
            Err(e) => assert!(e.to_string().contains("refused"), "{e}"),
            Ok(_) => panic!("the refused probe reported healthy"),
        }

        let other = Ledger::open(&path).unwrap();
        assert_eq!(other.count_by_state().unwrap(), vec![(State::Sent, 4)]);
        assert!(other.get(HEALTH_PROBE_GUID).unwrap().is_none());
        assert!(other.history(HEALTH_PROBE_GUID).unwrap().is_empty());
        for g in ["G-H1", "G-H2", "G-H3", "G-H4"] {
            let h = other.history(g).unwrap();
            assert_eq!(h.len(), 1, "{g}: {h:?}");
            assert_eq!(h[0].who, "relay", "{g}: {h:?}");
        }
        assert!(other.read_health().unwrap().is_some());
    }

    #[test]
    fn the_read_pool_is_bounded_and_waits_for_a_return() {
        let dir = tempfile::tempdir().unwrap();
        let pool = Pool::open(&dir.path().join("l.db")).unwrap();
        let lent: Vec<_> = (0..POOL_MAX).map(|_| pool.get().unwrap()).collect();
        std::thread::scope(|s| {
            let waiter = s.spawn(|| pool.get().map(|_| ()));
            std::thread::sleep(Duration::from_millis(50));
            drop(lent);
            assert!(waiter.join().unwrap().is_ok());
        });
        assert_eq!(pool.slots().open, POOL_MAX);
    }
}
