//! The PostgreSQL ledger's bounded reads (see `crate::page` and the SQLite twin): one
//! state's page after a cursor on the index `tx_state_updated (state, updated_at)`, and the
//! counts `inspect` shows. A page's key is `updated_at` to the microsecond (the row shows it
//! to the second) and the GUID compared byte by byte (`COLLATE "C"`), as the merge of pages
//! of several states compares them.

use super::{PgStore, attempts, params, record, row};
use crate::error::Result;
use crate::page::{Counted, Cursor, sql_limit};
use crate::state::{Row, State};
use crate::store::InquiryRecord;

/// A row's columns (as `sql::select!`'s), then its key's `updated_at`.
macro_rules! keyed {
    ($($rest:tt)*) => {
        concat!(
            "SELECT guid, tx_code, state, rsp_code, request, response, attempts, \
             to_char(updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS'), channel, \
             to_char(updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US') \
             FROM tx WHERE state = $1 ",
            $($rest)*,
            " ORDER BY updated_at, guid COLLATE \"C\""
        )
    };
}

/// `updated_at >= cursor` bounds the index range; the OR keeps ties after the GUID.
macro_rules! after {
    ($at:literal, $guid:literal) => {
        concat!(
            "AND updated_at >= ($",
            $at,
            "::text::timestamp AT TIME ZONE 'UTC') \
             AND (updated_at > ($",
            $at,
            "::text::timestamp AT TIME ZONE 'UTC') OR guid COLLATE \"C\" > $",
            $guid,
            ")"
        )
    };
}

const FIRST: &str = concat!(keyed!(""), " LIMIT $2");
const FIRST_AGED: &str = concat!(
    keyed!("AND updated_at <= now() - make_interval(secs => $2)"),
    " LIMIT $3"
);
const AFTER: &str = concat!(keyed!(after!("2", "3")), " LIMIT $4");
const AFTER_AGED: &str = concat!(
    keyed!(concat!(
        "AND updated_at <= now() - make_interval(secs => $2) ",
        after!("3", "4")
    )),
    " LIMIT $5"
);
const COUNT: &str = "SELECT count(*) FROM tx WHERE state = $1";
const COUNT_AGED: &str = "SELECT count(*) FROM tx WHERE state = $1 \
    AND updated_at <= now() - make_interval(secs => $2)";
const AT_CAP_COUNT: &str = "SELECT count(*) FROM tx \
    WHERE state = 'FAILED' AND rsp_code = 'E902' AND attempts >= $1";
const AT_CAP_FIRST: &str = "\
    SELECT guid, tx_code, state, rsp_code, request, response, attempts, \
        to_char(updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS'), channel FROM tx \
    WHERE state = 'FAILED' AND rsp_code = 'E902' AND attempts >= $1 \
    ORDER BY updated_at, guid LIMIT $2";
const GIVEN_UP_COUNT: &str = "SELECT count(*) FROM tx_inquiry i JOIN tx ON tx.guid = i.guid \
    WHERE i.failures >= $1 AND tx.state IN ('UNKNOWN', 'SENT')";
const GIVEN_UP_FIRST: &str = "\
    SELECT i.guid, i.failures, i.last_error, \
        to_char(i.next_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS') \
    FROM tx_inquiry i JOIN tx ON tx.guid = i.guid \
    WHERE i.failures >= $1 AND tx.state IN ('UNKNOWN', 'SENT') ORDER BY i.guid LIMIT $2";
const HAS_INQUIRY_TABLE: &str = super::sql::HAS_INQUIRY_TABLE;
const ROW_AGE: &str = "SELECT extract(epoch FROM now() - updated_at)::float8 FROM tx \
    WHERE guid = $1";
const INQUIRY_RECORD: &str = "\
    SELECT guid, failures, last_error, \
        to_char(next_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS') \
    FROM tx_inquiry WHERE guid = $1";

impl PgStore {
    pub(super) fn pg_state_page(
        &self,
        state: State,
        older_than_secs: Option<u64>,
        after: Option<&Cursor>,
        limit: u64,
    ) -> Result<Vec<(Cursor, Row)>> {
        let (s, n) = (state.as_str(), sql_limit(limit));
        let age = older_than_secs.map(|a| a as f64);
        let cursor = after.map(|c| (c.at.clone(), c.guid.clone()));
        let (sql, p) = match (age, cursor) {
            (None, None) => (FIRST, params![s, n]),
            (Some(a), None) => (FIRST_AGED, params![s, a, n]),
            (None, Some((at, g))) => (AFTER, params![s, at, g, n]),
            (Some(a), Some((at, g))) => (AFTER_AGED, params![s, a, at, g, n]),
        };
        self.pool.run("reading a page of rows", move |c| {
            let st = c.prepared(sql)?;
            c.client
                .query(&st, &p.refs())?
                .iter()
                .map(|r| {
                    let row = row(r)?;
                    let key = Cursor {
                        at: r.try_get(9)?,
                        guid: row.guid.clone(),
                    };
                    Ok((key, row))
                })
                .collect()
        })
    }

    pub(super) fn pg_count_aged(&self, state: State, older_than_secs: Option<u64>) -> Result<i64> {
        let s = state.as_str();
        let (sql, p) = match older_than_secs {
            None => (COUNT, params![s]),
            Some(a) => (COUNT_AGED, params![s, a as f64]),
        };
        self.count("counting rows", sql, p)
    }

    pub(super) fn pg_at_attempt_cap(&self, max_attempts: i64, limit: u64) -> Result<Counted<Row>> {
        let max = attempts(max_attempts);
        let total = self.count("counting rows", AT_CAP_COUNT, params![max])?;
        let first = self.rows(
            "selecting rows",
            AT_CAP_FIRST,
            params![max, sql_limit(limit)],
        )?;
        Ok(Counted { total, first })
    }

    pub(super) fn pg_needs_operator_first(
        &self,
        max_inquiries: u32,
        limit: u64,
    ) -> Result<Counted<InquiryRecord>> {
        let max = i32::try_from(max_inquiries).unwrap_or(i32::MAX);
        let lim = sql_limit(limit);
        self.pool.run("reading failed inquiries", move |c| {
            let has = c.prepared(HAS_INQUIRY_TABLE)?;
            if !c.client.query_one(&has, &[])?.get::<_, bool>(0) {
                return Ok(Counted {
                    total: 0,
                    first: Vec::new(),
                });
            }
            let (count, first) = (c.prepared(GIVEN_UP_COUNT)?, c.prepared(GIVEN_UP_FIRST)?);
            let total = c.client.query_one(&count, &[&max])?.try_get(0)?;
            let first = c
                .client
                .query(&first, &[&max, &lim])?
                .iter()
                .map(record)
                .collect::<std::result::Result<_, _>>()?;
            Ok(Counted { total, first })
        })
    }

    pub(super) fn pg_row_age_secs(&self, guid: &str) -> Result<Option<f64>> {
        let guid = guid.to_string();
        self.pool.run("reading a row's age", move |c| {
            let st = c.prepared(ROW_AGE)?;
            c.client
                .query_opt(&st, &[&guid])?
                .map(|r| r.try_get(0))
                .transpose()
        })
    }

    pub(super) fn pg_inquiry_record(&self, guid: &str) -> Result<Option<InquiryRecord>> {
        Ok(self
            .records(INQUIRY_RECORD, params![guid.to_string()])?
            .pop())
    }

    fn count(&self, what: &'static str, sql: &'static str, p: super::Params) -> Result<i64> {
        self.pool.run(what, move |c| {
            let st = c.prepared(sql)?;
            c.client.query_one(&st, &p.refs())?.try_get(0)
        })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_statements_bind_what_they_number() {
        assert!(super::FIRST_AGED.ends_with("LIMIT $3"));
        assert!(super::AFTER.contains("$3") && super::AFTER.ends_with("LIMIT $4"));
        assert!(super::AFTER_AGED.contains("$4") && super::AFTER_AGED.ends_with("LIMIT $5"));
    }
}
