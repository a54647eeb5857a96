//! purge: deletes at most a chunk of `DONE` rows older than the retention, in one short
//! transaction; no other state is ever deleted (the guard is in the subselect and again on
//! the rows deleted).

use crate::error::Result;
use crate::postgres::{PgStore, int, params};
use crate::sqlite::{Hold, Ledger, age_modifier};

const SQLITE: &str = "\
    DELETE FROM tx WHERE guid IN ( \
        SELECT guid FROM tx WHERE state = 'DONE' AND updated_at < datetime('now', ?1) \
        ORDER BY updated_at LIMIT ?2) \
    AND state = 'DONE' AND updated_at < datetime('now', ?1)";
const POSTGRES: &str = "\
    DELETE FROM tx WHERE guid IN ( \
        SELECT guid FROM tx WHERE state = 'DONE' \
        AND updated_at < now() - make_interval(days => $1) \
        ORDER BY updated_at LIMIT $2) \
    AND state = 'DONE' AND updated_at < now() - make_interval(days => $1)";

pub trait PurgeChunk {
    /// Deletes at most `limit` `DONE` rows older than `days` in one short transaction.
    fn purge_chunk(&self, days: u64, limit: usize) -> Result<usize>;
}

impl Ledger {
    /// Deletes at most `limit` DONE rows older than `days`, in one short transaction, the
    /// history naming the retention as the reason. Returns how many went.
    pub fn purge_chunk(&self, days: u64, limit: usize) -> Result<usize> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let reason = format!("retention {days} days");
        self.as_actor(None, Some(&reason), || {
            Ok(self
                .conn
                .prepare_cached(SQLITE)?
                .execute(rusqlite::params![age_modifier(days, "days"), limit])?)
        })
    }
}

impl<H: Hold> PurgeChunk for H {
    fn purge_chunk(&self, days: u64, limit: usize) -> Result<usize> {
        self.write_with(move |l| l.purge_chunk(days, limit))
    }
}

impl PurgeChunk for PgStore {
    fn purge_chunk(&self, days: u64, lim: usize) -> Result<usize> {
        let p = params![int(days), i64::try_from(lim).unwrap_or(i64::MAX)];
        let why = Some(format!("retention {days} days"));
        let n = self.execute_as("purging", None, why, POSTGRES, p)?;
        Ok(usize::try_from(n).unwrap_or(usize::MAX))
    }
}
