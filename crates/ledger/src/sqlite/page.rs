//! The SQLite ledger's bounded reads for a ledger of any size (see `crate::page`): one
//! state's page after a cursor, the counts `inspect` shows and one GUID's age and record, each on the index
//! `tx_state_updated (state, updated_at)` (its rows in `updated_at` order; the GUIDs of one
//! `updated_at` are sorted among themselves) or a `count(*)`, never every row.

use rusqlite::types::Value;
use rusqlite::{OptionalExtension, params, params_from_iter};

use super::Ledger;
use super::sql::{INQUIRY_COLUMNS, ROW_COLUMNS};
use crate::error::Result;
use crate::page::{Counted, Cursor, sql_limit};
use crate::state::{Row, State};
use crate::store::InquiryRecord;

/// The WHERE of one state's rows unchanged for at least the given age (if any), and its
/// parameters after the state's.
fn aged(older_than_secs: Option<u64>, args: &mut Vec<Value>) -> &'static str {
    match older_than_secs {
        None => "",
        Some(s) => {
            args.push(Value::Text(format!("-{s} seconds")));
            " AND updated_at <= datetime('now', ?2)"
        }
    }
}

const AT_CAP: &str = "state = 'FAILED' AND rsp_code = 'E902' AND attempts >= ?1";
const GIVEN_UP: &str = "FROM tx_inquiry i JOIN tx ON tx.guid = i.guid \
    WHERE i.failures >= ?1 AND tx.state IN ('UNKNOWN', 'SENT')";

impl Ledger {
    /// Rows in `state` (unchanged for at least `older_than_secs`), after `after` by
    /// `(updated_at, guid)`, at most `limit`, each with its key.
    pub fn state_page(
        &self,
        state: State,
        older_than_secs: Option<u64>,
        after: Option<&Cursor>,
        limit: u64,
    ) -> Result<Vec<(Cursor, Row)>> {
        let mut args = vec![Value::Text(state.as_str().into())];
        let age = aged(older_than_secs, &mut args);
        let mut keyset = String::new();
        if let Some(c) = after {
            let (at, guid) = (args.len() + 1, args.len() + 2);
            // `updated_at >= ?` bounds the index range; the OR keeps ties after the GUID.
            keyset = format!(" AND updated_at >= ?{at} AND (updated_at > ?{at} OR guid > ?{guid})");
            args.push(Value::Text(c.at.clone()));
            args.push(Value::Text(c.guid.clone()));
        }
        let sql = format!(
            "SELECT {ROW_COLUMNS} FROM tx WHERE state = ?1{age}{keyset} \
             ORDER BY updated_at, guid LIMIT ?{}",
            args.len() + 1
        );
        args.push(Value::Integer(sql_limit(limit)));
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let rows = stmt.query_map(params_from_iter(args), Row::from_sql)?;
        rows.map(|r| {
            let r = r?;
            let key = Cursor {
                at: r.updated_at.clone(),
                guid: r.guid.clone(),
            };
            Ok((key, r))
        })
        .collect()
    }

    /// Seconds since `guid`'s row last changed, by the database's clock.
    pub fn row_age_secs(&self, guid: &str) -> Result<Option<f64>> {
        Ok(self
            .conn
            .prepare_cached(
                "SELECT (julianday('now') - julianday(updated_at)) * 86400.0 FROM tx \
                 WHERE guid = ?1",
            )?
            .query_row(params![guid], |r| r.get::<_, Option<f64>>(0))
            .optional()?
            .flatten())
    }

    /// `guid`'s failure record, if any.
    pub fn inquiry_record(&self, guid: &str) -> Result<Option<InquiryRecord>> {
        if !self.has_inquiry_table()? {
            return Ok(None);
        }
        let sql = format!("SELECT {INQUIRY_COLUMNS} FROM tx_inquiry i WHERE i.guid = ?1");
        Ok(self
            .conn
            .prepare_cached(&sql)?
            .query_row(params![guid], InquiryRecord::from_sql)
            .optional()?)
    }

    /// How many rows are in `state` (unchanged for at least `older_than_secs`).
    pub fn count_aged(&self, state: State, older_than_secs: Option<u64>) -> Result<i64> {
        let mut args = vec![Value::Text(state.as_str().into())];
        let age = aged(older_than_secs, &mut args);
        let sql = format!("SELECT count(*) FROM tx WHERE state = ?1{age}");
        Ok(self
            .conn
            .prepare_cached(&sql)?
            .query_row(params_from_iter(args), |r| r.get(0))?)
    }

    /// FAILED/E902 rows with at least `max_attempts` attempts: how many, and the oldest
    /// `limit`.
    pub fn at_attempt_cap(&self, max_attempts: i64, limit: u64) -> Result<Counted<Row>> {
        let total = self
            .conn
            .prepare_cached(&format!("SELECT count(*) FROM tx WHERE {AT_CAP}"))?
            .query_row(params![max_attempts], |r| r.get(0))?;
        let sql = format!(
            "SELECT {ROW_COLUMNS} FROM tx WHERE {AT_CAP} ORDER BY updated_at, guid LIMIT ?2"
        );
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let first = stmt
            .query_map(params![max_attempts, sql_limit(limit)], Row::from_sql)?
            .collect::<rusqlite::Result<_>>()?;
        Ok(Counted { total, first })
    }

    /// The GUIDs resolve gave up on (as `needs_operator`): how many, and the first `limit`
    /// by GUID.
    pub fn needs_operator_first(
        &self,
        max_inquiries: u32,
        limit: u64,
    ) -> Result<Counted<InquiryRecord>> {
        if !self.has_inquiry_table()? {
            return Ok(Counted {
                total: 0,
                first: Vec::new(),
            });
        }
        let max = i64::from(max_inquiries);
        let total = self
            .conn
            .prepare_cached(&format!("SELECT count(*) {GIVEN_UP}"))?
            .query_row(params![max], |r| r.get(0))?;
        let sql = format!("SELECT {INQUIRY_COLUMNS} {GIVEN_UP} ORDER BY i.guid LIMIT ?2");
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let first = stmt
            .query_map(params![max, sql_limit(limit)], InquiryRecord::from_sql)?
            .collect::<rusqlite::Result<_>>()?;
        Ok(Counted { total, first })
    }
}
