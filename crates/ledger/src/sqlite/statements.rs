//! The Ledger's statements: every state change and selection, each one SQL statement.
//! Changes run as their actor (`as_actor`): in the caller's transaction or in one of their
//! own.

use rusqlite::{OptionalExtension, params};

use super::Ledger;
use super::decode::lenient_text;
use super::sql::*;
use crate::error::{LedgerError, Result};
use crate::state::{Change, Evidence, HistoryRow, Row, State};
use crate::store::{
    HEALTH_PROBE_GUID, InquiryRecord, backoff_base_secs, backoff_cap_secs, last_error_text,
};

impl Ledger {
    /// Step 1 of the relay: the GUID is ours iff this inserts the row (attempt 1), naming
    /// the `channel` that claims it.
    pub fn claim_new(
        &self,
        guid: &str,
        tx_code: &str,
        request: &[u8],
        channel: Option<&str>,
    ) -> Result<bool> {
        self.as_actor(None, None, || {
            let n = self
                .conn
                .prepare_cached(CLAIM_NEW)?
                .execute(params![guid, tx_code, request, channel])?;
            Ok(n == 1)
        })
    }

    /// The relay's re-claim of a GUID whose earlier send provably never left, for the very
    /// request stored with it (the row was read before; this makes the read irrelevant).
    /// Returns the attempt claimed, if the row was ours to claim: `channel`'s own, or one
    /// with no channel (which then becomes `channel`'s).
    pub fn reclaim_failed(
        &self,
        guid: &str,
        request: &[u8],
        channel: Option<&str>,
    ) -> Result<Option<i64>> {
        self.claim_returning(RECLAIM_FAILED, params![guid, request, channel])
    }

    /// reprocess's re-claim: the same move, but only for rows its selection rule admits, so
    /// that a row changed since it was listed (or listed by a buggy caller) is never resent.
    pub fn reclaim_for_resend(&self, guid: &str, max_attempts: i64) -> Result<Option<i64>> {
        self.claim_returning(RECLAIM_FOR_RESEND, params![guid, max_attempts])
    }

    /// A guarded UPDATE with `RETURNING attempts`: a row back means the claim was won (SQLite
    /// makes the whole change in the first step).
    fn claim_returning(&self, sql: &str, p: impl rusqlite::Params) -> Result<Option<i64>> {
        self.as_actor(None, None, || {
            Ok(self
                .conn
                .prepare_cached(sql)?
                .query_row(p, |r| r.get::<_, i64>(0))
                .optional()?)
        })
    }

    /// Makes `change` iff the row is still in its `from` state (and on its attempt, when it
    /// names one). Used for the relay's result (from SENT) and resolve's settlements (from
    /// UNKNOWN, or from SENT with --stale-sent).
    pub fn transition(&self, c: &Change) -> Result<bool> {
        self.as_actor(c.who.as_deref(), c.reason.as_deref(), || {
            let n = self.conn.prepare_cached(TRANSITION)?.execute(params![
                c.guid,
                c.from,
                c.to,
                c.code_str(),
                c.response,
                c.attempt,
                c.min_age_secs.map(|s| age_modifier(s, "seconds")),
            ])?;
            Ok(n == 1)
        })
    }

    /// The row for `guid`, if any.
    pub fn get(&self, guid: &str) -> Result<Option<Row>> {
        let sql = format!("SELECT {ROW_COLUMNS} FROM tx WHERE guid = ?1");
        Ok(self
            .conn
            .prepare_cached(&sql)?
            .query_row(params![guid], Row::from_sql)
            .optional()?)
    }

    /// resolve's selection: UNKNOWN rows (or, with `State::Sent`, orphaned SENT rows) whose
    /// last change is at least `min_age_secs` old, oldest first.
    pub fn select_aged(&self, state: State, min_age_secs: u64) -> Result<Vec<Row>> {
        let sql = format!(
            "SELECT {ROW_COLUMNS} FROM tx WHERE state = ?1 \
             AND updated_at <= datetime('now', ?2) ORDER BY updated_at, guid"
        );
        self.rows(&sql, params![state, age_modifier(min_age_secs, "seconds")])
    }

    /// resolve's selection with its backoff: rows as `select_aged` finds them, less those
    /// whose next inquiry is not due yet and those it has given up on (`max_inquiries`
    /// failures or more).
    pub fn select_due(
        &self,
        state: State,
        min_age_secs: u64,
        max_inquiries: u32,
    ) -> Result<Vec<Row>> {
        let sql = format!(
            "SELECT {TX_COLUMNS} FROM tx LEFT JOIN tx_inquiry i ON i.guid = tx.guid \
             WHERE tx.state = ?1 AND tx.updated_at <= datetime('now', ?2) \
             AND (i.guid IS NULL OR (i.failures < ?3 AND i.next_at <= datetime('now'))) \
             ORDER BY tx.updated_at, tx.guid"
        );
        self.rows(
            &sql,
            params![
                state,
                age_modifier(min_age_secs, "seconds"),
                i64::from(max_inquiries)
            ],
        )
    }

    /// One more failed inquiry about `guid`, and when the next one is due (one statement).
    pub fn record_inquiry_failure(
        &self,
        guid: &str,
        error: &str,
        min_age_secs: u64,
    ) -> Result<InquiryRecord> {
        Ok(self
            .conn
            .prepare_cached(RECORD_INQUIRY_FAILURE)?
            .query_row(
                params![
                    guid,
                    last_error_text(error),
                    backoff_base_secs(min_age_secs),
                    backoff_cap_secs(),
                    crate::store::INQUIRY_BACKOFF_MAX_DOUBLINGS
                ],
                InquiryRecord::from_sql,
            )?)
    }

    /// Forgets `guid`'s failed inquiries. True iff it had a record.
    pub fn clear_inquiry(&self, guid: &str) -> Result<bool> {
        Ok(self
            .conn
            .prepare_cached(CLEAR_INQUIRY)?
            .execute(params![guid])?
            == 1)
    }

    /// Forgets the failed inquiries of GUIDs no longer in doubt.
    pub fn prune_inquiries(&self) -> Result<usize> {
        Ok(self.conn.prepare_cached(PRUNE_INQUIRIES)?.execute([])?)
    }

    /// The GUIDs still in doubt with at least `max_inquiries` failed inquiries, by GUID.
    pub fn needs_operator(&self, max_inquiries: u32) -> Result<Vec<InquiryRecord>> {
        if !self.has_inquiry_table()? {
            return Ok(Vec::new());
        }
        let sql = format!(
            "SELECT {INQUIRY_COLUMNS} FROM tx_inquiry i JOIN tx ON tx.guid = i.guid \
             WHERE i.failures >= ?1 AND tx.state IN ('UNKNOWN', 'SENT') ORDER BY i.guid"
        );
        self.records(&sql, params![i64::from(max_inquiries)])
    }

    /// Every failure record, by GUID.
    pub fn inquiry_records(&self) -> Result<Vec<InquiryRecord>> {
        if !self.has_inquiry_table()? {
            return Ok(Vec::new());
        }
        let sql = format!("SELECT {INQUIRY_COLUMNS} FROM tx_inquiry i ORDER BY i.guid");
        self.records(&sql, [])
    }

    /// A ledger opened as it is (`inspect`) may predate the side table.
    pub(super) fn has_inquiry_table(&self) -> Result<bool> {
        Ok(self
            .conn
            .prepare_cached(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'tx_inquiry'",
            )?
            .query_row([], |r| r.get::<_, i64>(0))?
            > 0)
    }

    fn records(&self, sql: &str, params: impl rusqlite::Params) -> Result<Vec<InquiryRecord>> {
        let mut stmt = self.conn.prepare_cached(sql)?;
        let rows = stmt.query_map(params, InquiryRecord::from_sql)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// reprocess's selection: only what the ledger proves was never sent, below the attempt
    /// cap, oldest first, at most `limit` rows.
    pub fn select_resendable(&self, max_attempts: i64, limit: Option<u64>) -> Result<Vec<Row>> {
        let sql = format!(
            "SELECT {ROW_COLUMNS} FROM tx WHERE state = 'FAILED' AND rsp_code = 'E902' \
             AND attempts < ?1 ORDER BY updated_at, guid LIMIT ?2"
        );
        let limit = limit.map_or(-1, |l| i64::try_from(l).unwrap_or(i64::MAX));
        self.rows(&sql, params![max_attempts, limit])
    }

    /// purge's selection, for --dry-run: DONE rows older than `days`.
    pub fn select_purgeable(&self, days: u64) -> Result<Vec<Row>> {
        let sql = format!(
            "SELECT {ROW_COLUMNS} FROM tx WHERE state = 'DONE' \
             AND updated_at < datetime('now', ?1) ORDER BY updated_at, guid"
        );
        self.rows(&sql, params![age_modifier(days, "days")])
    }

    /// Deletes at most `limit` DONE rows older than `days`, in one short transaction; no
    /// other state is ever deleted. Returns how many went.
    pub fn purge_chunk(&self, days: u64, limit: usize) -> Result<usize> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let reason = format!("retention {days} days");
        self.as_actor(None, Some(&reason), || {
            Ok(self
                .conn
                .prepare_cached(PURGE_CHUNK_SQL)?
                .execute(params![age_modifier(days, "days"), limit])?)
        })
    }

    /// The most recent DONE/0000 rows, newest first: `resolve`'s canary candidates.
    pub fn recent_bookings(&self, limit: usize) -> Result<Vec<Row>> {
        let sql = format!(
            "SELECT {ROW_COLUMNS} FROM tx WHERE state = 'DONE' AND rsp_code = '0000' \
             ORDER BY updated_at DESC, guid DESC LIMIT ?1"
        );
        self.rows(&sql, params![i64::try_from(limit).unwrap_or(i64::MAX)])
    }

    /// Every row, oldest change first (the chaos run's checks; `inspect` reads pages, see
    /// `crate::page`).
    pub fn all_rows(&self) -> Result<Vec<Row>> {
        let sql = format!("SELECT {ROW_COLUMNS} FROM tx ORDER BY updated_at, guid");
        self.rows(&sql, [])
    }

    /// The history of `guid`, oldest first.
    pub fn history(&self, guid: &str) -> Result<Vec<HistoryRow>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT id, guid, from_state, to_state, rsp_code, attempts, at, who, reason, \
             channel FROM tx_history WHERE guid = ?1 ORDER BY id",
        )?;
        let rows = stmt.query_map(params![guid], |r| {
            Ok(HistoryRow {
                id: r.get(0)?,
                guid: r.get(1)?,
                from_state: r.get(2)?,
                to_state: r.get(3)?,
                rsp_code: lenient_text(r.get_ref(4)?),
                attempts: r.get_ref(5)?.as_i64().ok(),
                at: r.get(6)?,
                who: r.get(7)?,
                reason: r.get(8)?,
                channel: lenient_text(r.get_ref(9)?),
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Adds `e` to its GUID's history, the `tx` row untouched (see `Evidence`).
    pub fn record_evidence(&self, e: &Evidence) -> Result<()> {
        self.conn
            .prepare_cached(RECORD_EVIDENCE)?
            .execute(params![e.guid, e.rsp_code, e.attempt, self.who, e.reason])?;
        Ok(())
    }

    /// Deletes at most `limit` history rows older than `days` of GUIDs whose row is gone or
    /// DONE past `tx_days`.
    pub fn purge_history_chunk(&self, days: u64, tx_days: u64, limit: usize) -> Result<usize> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        Ok(self
            .conn
            .prepare_cached(PURGE_HISTORY_CHUNK)?
            .execute(params![
                format!("-{days} days"),
                limit,
                format!("-{tx_days} days")
            ])?)
    }

    /// Row counts by state, for summaries and checks.
    pub fn count_by_state(&self) -> Result<Vec<(State, i64)>> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT state, count(*) FROM tx GROUP BY state ORDER BY state")?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Seconds since the oldest row in `state` last changed; `None` if there is none.
    pub fn oldest_age_secs(&self, state: State) -> Result<Option<f64>> {
        Ok(self
            .conn
            .prepare_cached(OLDEST_AGE)?
            .query_row(params![state], |r| r.get::<_, Option<f64>>(0))?)
    }

    /// `/healthz`'s write: the probe row inserted into `tx` as a claim is (its triggers,
    /// the history's among them, fire) and rolled back at once to a savepoint of its own, so
    /// that it works alone or inside the group commit's batch, whose other statements it
    /// leaves as they are; then the one `relay_health` row stamped (committed with the rest).
    /// An error that rolled the whole transaction back is returned as it is (the group commit
    /// then fails its batch).
    pub fn touch_health(&self) -> Result<()> {
        self.conn.execute_batch("SAVEPOINT health_probe")?;
        let probed = self.as_actor(None, None, || {
            self.conn
                .prepare_cached(HEALTH_PROBE)?
                .execute([HEALTH_PROBE_GUID])?;
            Ok(())
        });
        if self.conn.is_autocommit() {
            return probed;
        }
        let undone = self
            .conn
            .execute_batch("ROLLBACK TO health_probe; RELEASE health_probe");
        probed.and(undone.map_err(LedgerError::from))?;
        self.conn.prepare_cached(TOUCH_HEALTH)?.execute([])?;
        Ok(())
    }

    /// `/healthz`'s read: the `relay_health` row's stamp, if it was ever written.
    pub fn read_health(&self) -> Result<Option<String>> {
        Ok(self
            .conn
            .prepare_cached(READ_HEALTH)?
            .query_row([], |r| r.get(0))
            .optional()?)
    }

    fn rows(&self, sql: &str, params: impl rusqlite::Params) -> Result<Vec<Row>> {
        let mut stmt = self.conn.prepare_cached(sql)?;
        let rows = stmt.query_map(params, Row::from_sql)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }
}

/// A `datetime('now', ?)` modifier, bound as a parameter: no SQL is built from input.
fn age_modifier(n: u64, unit: &str) -> String {
    format!("-{n} {unit}")
}
