//! Evidence, not a change (see `Evidence`): one history row for its GUID, the `tx` row
//! untouched; from- and to-state are the row's state as it is (NULL if there is no row).

use rusqlite::params;

use crate::error::Result;
use crate::postgres::{PgStore, attempts};
use crate::sqlite::{Hold, Ledger};
use crate::state::Evidence;

const SQLITE: &str = "\
    INSERT INTO tx_history (guid, from_state, to_state, rsp_code, attempts, who, reason, \
                            channel) \
    VALUES (?1, (SELECT state FROM tx WHERE guid = ?1), (SELECT state FROM tx WHERE guid = ?1), \
            ?2, ?3, ?4, ?5, (SELECT channel FROM tx WHERE guid = ?1))";

const POSTGRES: &str = "\
    INSERT INTO tx_history (guid, from_state, to_state, rsp_code, attempts, who, reason, \
                            channel) \
    VALUES ($1, (SELECT state FROM tx WHERE guid = $1), (SELECT state FROM tx WHERE guid = $1), \
            $2, $3, $4, $5, (SELECT channel FROM tx WHERE guid = $1))";

pub trait RecordEvidence {
    /// Adds `evidence` to its GUID's history (one row, the `tx` row untouched), named after
    /// this store's tool.
    fn record_evidence(&self, evidence: &Evidence) -> Result<()>;
}

impl Ledger {
    /// Adds `e` to its GUID's history, the `tx` row untouched (see `Evidence`).
    pub fn record_evidence(&self, e: &Evidence) -> Result<()> {
        self.conn
            .prepare_cached(SQLITE)?
            .execute(params![e.guid, e.rsp_code, e.attempt, self.who, e.reason])?;
        Ok(())
    }
}

impl<H: Hold> RecordEvidence for H {
    fn record_evidence(&self, evidence: &Evidence) -> Result<()> {
        let evidence = evidence.clone();
        self.write_with(move |l| l.record_evidence(&evidence))
    }
}

impl RecordEvidence for PgStore {
    fn record_evidence(&self, e: &Evidence) -> Result<()> {
        let (guid, code, attempt, reason) = (
            e.guid.clone(),
            e.rsp_code.clone(),
            attempts(e.attempt),
            e.reason.clone(),
        );
        self.pool.run("recording evidence", move |c| {
            let st = c.prepared(POSTGRES)?;
            let who = c.who.clone();
            c.client
                .execute(&st, &[&guid, &code, &attempt, &who, &reason])
                .map(|_| ())
        })
    }
}
