//! `reconcile`'s read on PostgreSQL: one REPEATABLE READ, READ ONLY transaction, so that the
//! rows come from one snapshot however long the read takes and whatever the relays commit
//! meanwhile. The rows are fetched through a cursor in pages of `PAGE` and collected (the
//! connection lives on its own thread, see `pool`), then handed over one at a time.

use std::time::{Duration, Instant};

use super::PgStore;
use crate::error::Result;
use crate::reconcile::ReconcileRow;
use crate::state::State;

/// How long the whole read may take (a day of a large bank is millions of rows).
pub const SCAN_DEADLINE: Duration = Duration::from_secs(600);
const PAGE: i64 = 10_000;

impl PgStore {
    pub(super) fn pg_scan_for_reconcile(&self, f: &mut dyn FnMut(ReconcileRow)) -> Result<()> {
        let deadline = Instant::now() + SCAN_DEADLINE;
        let rows = self.pool.run_by("reading the ledger", deadline, |c| {
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
            let mut out = Vec::new();
            loop {
                let page = t.query(&format!("FETCH {PAGE} FROM reconcile_scan"), &[])?;
                if page.is_empty() {
                    break;
                }
                for r in &page {
                    let state: String = r.try_get(1)?;
                    out.push(ReconcileRow {
                        guid: r.try_get(0)?,
                        state: state.parse().unwrap_or(State::Received),
                        rsp_code: r.try_get(2)?,
                        response: r.try_get(3)?,
                        updated_at: r.try_get(4)?,
                    });
                }
            }
            t.commit()?;
            Ok(out)
        })?;
        rows.into_iter().for_each(f);
        Ok(())
    }
}
