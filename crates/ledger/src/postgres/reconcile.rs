//! `reconcile`'s read on PostgreSQL: one REPEATABLE READ, READ ONLY transaction, so that the
//! rows come from one snapshot however long the read takes and whatever the relays commit
//! meanwhile. The rows are fetched through a cursor in pages of `PAGE` on the pool's thread
//! for the connection and handed over page by page through a bounded channel, so that at most
//! a few pages are held at once, never the whole ledger.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use super::PgStore;
use crate::error::{LedgerError, Result};
use crate::reconcile::ReconcileRow;
use crate::state::State;

/// How long the whole read may take (a day of a large bank is millions of rows).
pub const SCAN_DEADLINE: Duration = Duration::from_secs(600);
const PAGE: i64 = 10_000;

impl PgStore {
    pub(super) fn pg_scan_for_reconcile(&self, f: &mut dyn FnMut(ReconcileRow)) -> Result<()> {
        let deadline = Instant::now() + SCAN_DEADLINE;
        let (tx, rx) = mpsc::sync_channel::<Vec<ReconcileRow>>(2);
        // The pool runs an operation a second time on a new connection when the first broke;
        // once pages have gone out that would hand the same rows over twice.
        let started = Arc::new(AtomicBool::new(false));
        std::thread::scope(|s| {
            let reader = s.spawn(move || {
                self.pool.run_by("reading the ledger", deadline, move |c| {
                    if started.swap(true, Ordering::SeqCst) {
                        return Ok(false);
                    }
                    let mut t = c
                        .client
                        .build_transaction()
                        .isolation_level(postgres::IsolationLevel::RepeatableRead)
                        .read_only(true)
                        .start()?;
                    t.batch_execute(&format!(
                        "SET LOCAL statement_timeout = {ms}; \
                         DECLARE reconcile_scan NO SCROLL CURSOR FOR \
                         SELECT guid, state, rsp_code, response, \
                         to_char(updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS') FROM tx",
                        ms = SCAN_DEADLINE.as_millis()
                    ))?;
                    loop {
                        let page = t.query(&format!("FETCH {PAGE} FROM reconcile_scan"), &[])?;
                        if page.is_empty() {
                            break;
                        }
                        let mut rows = Vec::with_capacity(page.len());
                        for r in &page {
                            let state: String = r.try_get(1)?;
                            rows.push(ReconcileRow {
                                guid: r.try_get(0)?,
                                state: state.parse().unwrap_or(State::Received),
                                rsp_code: r.try_get(2)?,
                                response: r.try_get(3)?,
                                updated_at: r.try_get(4)?,
                            });
                        }
                        if tx.send(rows).is_err() {
                            break; // the caller has gone
                        }
                    }
                    t.commit()?;
                    Ok(true)
                })
            });
            // Until the read has ended: a read past its deadline is abandoned by the pool,
            // and its connection may still hold the sending end.
            loop {
                match rx.recv_timeout(Duration::from_millis(100)) {
                    Ok(page) => page.into_iter().for_each(&mut *f),
                    Err(RecvTimeoutError::Timeout) if !reader.is_finished() => {}
                    Err(_) => break,
                }
            }
            let read = reader.join().unwrap_or_else(|_| {
                Err(LedgerError::Unavailable(
                    "the ledger reader panicked".into(),
                ))
            })?;
            if read {
                while let Ok(page) = rx.try_recv() {
                    page.into_iter().for_each(&mut *f);
                }
                Ok(())
            } else {
                Err(LedgerError::Unavailable(
                    "reading the ledger: the connection broke during the read".into(),
                ))
            }
        })
    }
}
