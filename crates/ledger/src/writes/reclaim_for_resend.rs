//! reprocess's re-claim: the relay's move, but only for the rows its selection admits
//! (`FAILED`/`E902` below the attempt cap), so that a row changed since it was listed (or
//! listed by a buggy caller) is never resent.

use rusqlite::params;

use crate::error::Result;
use crate::postgres::reclaims::Reclaim;
use crate::postgres::{PgStore, attempts};
use crate::sqlite::{Hold, Ledger};

const SQLITE: &str = "\
    UPDATE tx SET state = 'SENT', attempts = attempts + 1, updated_at = datetime('now') \
    WHERE guid = ?1 AND state = 'FAILED' AND rsp_code = 'E902' AND attempts < ?2 \
    RETURNING attempts";

/// `reprocess`'s re-claims, batched (`postgres::reclaims`): $1 GUIDs (each once), $2 the
/// attempt cap of each; FAILED/E902 rows below the cap only.
pub(crate) const POSTGRES_BATCH: &str = "\
    UPDATE tx SET state = 'SENT', attempts = tx.attempts + 1, updated_at = now() \
    FROM unnest($1::text[], $2::integer[]) AS v(guid, max_attempts) \
    WHERE tx.guid = v.guid AND tx.state = 'FAILED' AND tx.rsp_code = 'E902' \
    AND tx.attempts < v.max_attempts \
    RETURNING tx.guid, tx.attempts";

pub trait ReclaimForResend {
    /// reprocess's re-claim: only a `FAILED`/`E902` row below `max_attempts`.
    fn reclaim_for_resend(&self, guid: &str, max_attempts: i64) -> Result<Option<i64>>;
}

impl Ledger {
    /// reprocess's re-claim: the attempt claimed, if the row was one to resend.
    pub fn reclaim_for_resend(&self, guid: &str, max_attempts: i64) -> Result<Option<i64>> {
        self.claim_returning(SQLITE, params![guid, max_attempts])
    }
}

impl<H: Hold> ReclaimForResend for H {
    fn reclaim_for_resend(&self, guid: &str, max_attempts: i64) -> Result<Option<i64>> {
        let guid = guid.to_string();
        self.write_with(move |l| l.reclaim_for_resend(&guid, max_attempts))
    }
}

impl ReclaimForResend for PgStore {
    fn reclaim_for_resend(&self, guid: &str, max_attempts: i64) -> Result<Option<i64>> {
        self.reclaim(Reclaim::ForResend {
            guid: guid.to_string(),
            max_attempts: attempts(max_attempts),
        })
    }
}
