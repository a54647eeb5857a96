//! The Ledger's selections and reads, each one SQL statement, and the health probe. Its
//! state changes are in `crate::writes` (one file each, with the PostgreSQL twin); they run
//! as their actor (`as_actor`): in the caller's transaction or in one of their own.

use rusqlite::{OptionalExtension, params};

use super::decode::lenient_text;
use super::sql::*;
use super::{Ledger, age_modifier};
use crate::error::{LedgerError, Result};
use crate::state::{HistoryRow, Row, State};
use crate::store::{HEALTH_PROBE_GUID, InquiryRecord};

impl Ledger {
    /// A guarded UPDATE with `RETURNING attempts`: a row back means the claim was won (SQLite
    /// makes the whole change in the first step).
    pub(crate) fn claim_returning(
        &self,
        sql: &str,
        p: impl rusqlite::Params,
    ) -> Result<Option<i64>> {
        self.as_actor(None, None, || {
            Ok(self
                .conn
                .prepare_cached(sql)?
                .query_row(p, |r| r.get::<_, i64>(0))
                .optional()?)
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

    /// resolve's selection with its backoff: rows in `state` (UNKNOWN, or orphaned SENT rows)
    /// unchanged for at least `min_age_secs`, oldest first, less those whose next inquiry is
    /// not due yet and those it has given up on (`max_inquiries` failures or more).
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
