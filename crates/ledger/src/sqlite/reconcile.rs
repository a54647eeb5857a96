//! `reconcile`'s read on SQLite: one SELECT, stepped row by row. A single statement reads
//! one snapshot (WAL), so a relay writing meanwhile is never seen half-way.

use super::Ledger;
use super::decode::lenient_text;
use crate::error::Result;
use crate::reconcile::ReconcileRow;
use crate::state::State;
use rusqlite::types::ValueRef;

const SCAN: &str = "SELECT guid, state, rsp_code, response, updated_at FROM tx";

impl Ledger {
    /// Hands every row to `f`, one at a time, from one snapshot.
    pub fn scan_for_reconcile(&self, f: &mut dyn FnMut(ReconcileRow)) -> Result<()> {
        let mut stmt = self.conn.prepare(SCAN)?;
        let mut rows = stmt.query([])?;
        while let Some(r) = rows.next()? {
            let state: String = r.get(1)?;
            let response = match r.get_ref(3)? {
                ValueRef::Text(b) | ValueRef::Blob(b) => Some(b.to_vec()),
                _ => None,
            };
            f(ReconcileRow {
                guid: lenient_text(r.get_ref(0)?).unwrap_or_default(),
                // The CHECK constraint admits only the five states.
                state: state.parse().unwrap_or(State::Received),
                rsp_code: lenient_text(r.get_ref(2)?),
                response,
                updated_at: lenient_text(r.get_ref(4)?).unwrap_or_default(),
            });
        }
        Ok(())
    }
}
