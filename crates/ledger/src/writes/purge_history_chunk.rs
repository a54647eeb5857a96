//! History has its own retention: old history rows go in chunks, like purge's rows, but only
//! those of GUIDs no longer in doubt (the row gone, or DONE past purge's own retention of
//! rows); the guard is in the subselect and again on the rows deleted.

use crate::error::Result;
use crate::postgres::{PgStore, int, params};
use crate::sqlite::{Hold, Ledger, age_modifier};

/// ?1 the history's retention, ?2 the chunk, ?3 purge's retention of rows.
const SQLITE: &str = "\
    DELETE FROM tx_history WHERE id IN ( \
        SELECT id FROM tx_history h \
        WHERE at < strftime('%Y-%m-%d %H:%M:%f', 'now', ?1) \
        AND NOT EXISTS (SELECT 1 FROM tx WHERE tx.guid = h.guid \
            AND NOT (tx.state = 'DONE' AND tx.updated_at < datetime('now', ?3))) \
        ORDER BY id LIMIT ?2) \
    AND NOT EXISTS (SELECT 1 FROM tx WHERE tx.guid = tx_history.guid \
        AND NOT (tx.state = 'DONE' AND tx.updated_at < datetime('now', ?3)))";
const POSTGRES: &str = "\
    DELETE FROM tx_history WHERE id IN ( \
        SELECT id FROM tx_history h WHERE at < now() - make_interval(days => $1) \
        AND NOT EXISTS (SELECT 1 FROM tx WHERE tx.guid = h.guid \
            AND NOT (tx.state = 'DONE' AND tx.updated_at < now() - make_interval(days => $3))) \
        ORDER BY id LIMIT $2) \
    AND NOT EXISTS (SELECT 1 FROM tx WHERE tx.guid = tx_history.guid \
        AND NOT (tx.state = 'DONE' AND tx.updated_at < now() - make_interval(days => $3)))";

pub trait PurgeHistoryChunk {
    /// Deletes at most `limit` history rows older than `days` (its own retention), only of
    /// GUIDs no longer in doubt: whose row is gone (purged) or DONE and older than `tx_days`
    /// (purge's retention of rows). A row in doubt (UNKNOWN, SENT, FAILED, RECEIVED) and a
    /// DONE row still kept keep all their history, whatever its age.
    fn purge_history_chunk(&self, days: u64, tx_days: u64, limit: usize) -> Result<usize>;
}

impl Ledger {
    /// Deletes at most `limit` history rows older than `days` of GUIDs whose row is gone or
    /// DONE past `tx_days`.
    pub fn purge_history_chunk(&self, days: u64, tx_days: u64, limit: usize) -> Result<usize> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        Ok(self
            .conn
            .prepare_cached(SQLITE)?
            .execute(rusqlite::params![
                age_modifier(days, "days"),
                limit,
                age_modifier(tx_days, "days")
            ])?)
    }
}

impl<H: Hold> PurgeHistoryChunk for H {
    fn purge_history_chunk(&self, days: u64, tx_days: u64, limit: usize) -> Result<usize> {
        self.write_with(move |l| l.purge_history_chunk(days, tx_days, limit))
    }
}

impl PurgeHistoryChunk for PgStore {
    fn purge_history_chunk(&self, days: u64, tx_days: u64, lim: usize) -> Result<usize> {
        let p = params![
            int(days),
            i64::try_from(lim).unwrap_or(i64::MAX),
            int(tx_days)
        ];
        let n = self.execute("purging history", POSTGRES, p)?;
        Ok(usize::try_from(n).unwrap_or(usize::MAX))
    }
}
