//! The PostgreSQL `Store`: each operation one statement on a pooled connection, under the
//! pool's client-side deadline.

use super::sql::*;
use super::{PgStore, attempts, int, limit, params};
use crate::error::Result;
use crate::page::{Counted, Cursor};
use crate::recovery::{LedgerEvent, Recovery};
use crate::settle_request::{Listed, SettleRequest, Undecided};
use crate::state::{HistoryRow, Row, State};
use crate::store::{
    Durability, Inquiries, InquiryRecord, Recovering, Reports, Retention, Settling, Transfers,
};

impl Transfers for PgStore {
    fn read(&self, guid: &str) -> Result<Option<Row>> {
        Ok(self
            .rows("reading a row", READ, params![guid.to_string()])?
            .pop())
    }

    fn claims_first(&self) -> bool {
        true
    }
}

impl Inquiries for PgStore {
    fn select_resendable(&self, max_attempts: i64, lim: Option<u64>) -> Result<Vec<Row>> {
        self.rows(
            "selecting rows",
            SELECT_RESENDABLE,
            params![attempts(max_attempts), limit(lim)],
        )
    }

    fn select_due(&self, state: State, min_age_secs: u64, max_inquiries: u32) -> Result<Vec<Row>> {
        self.rows(
            "selecting rows",
            SELECT_DUE,
            params![
                state.as_str(),
                min_age_secs as f64,
                i32::try_from(max_inquiries).unwrap_or(i32::MAX)
            ],
        )
    }

    fn needs_operator(&self, max_inquiries: u32) -> Result<Vec<InquiryRecord>> {
        let max = i32::try_from(max_inquiries).unwrap_or(i32::MAX);
        self.records(NEEDS_OPERATOR, params![max])
    }

    fn recent_bookings(&self, lim: usize) -> Result<Vec<Row>> {
        self.rows(
            "selecting rows",
            RECENT_BOOKINGS,
            params![i64::try_from(lim).unwrap_or(i64::MAX)],
        )
    }
}

impl Retention for PgStore {
    fn select_purgeable(&self, days: u64) -> Result<Vec<Row>> {
        self.rows("selecting rows", SELECT_PURGEABLE, params![int(days)])
    }
}

impl Reports for PgStore {
    fn all_rows(&self) -> Result<Vec<Row>> {
        self.rows("reading the ledger", ALL_ROWS, params![])
    }

    fn scan_for_reconcile(&self, f: &mut dyn FnMut(crate::reconcile::ReconcileRow)) -> Result<()> {
        self.pg_scan_for_reconcile(f)
    }

    fn state_page(
        &self,
        state: State,
        older_than_secs: Option<u64>,
        after: Option<&Cursor>,
        limit: u64,
    ) -> Result<Vec<(Cursor, Row)>> {
        self.pg_state_page(state, older_than_secs, after, limit)
    }

    fn row_age_secs(&self, guid: &str) -> Result<Option<f64>> {
        self.pg_row_age_secs(guid)
    }

    fn inquiry_record(&self, guid: &str) -> Result<Option<InquiryRecord>> {
        self.pg_inquiry_record(guid)
    }

    fn count_aged(&self, state: State, older_than_secs: Option<u64>) -> Result<i64> {
        self.pg_count_aged(state, older_than_secs)
    }

    fn at_attempt_cap(&self, max_attempts: i64, limit: u64) -> Result<Counted<Row>> {
        self.pg_at_attempt_cap(max_attempts, limit)
    }

    fn needs_operator_first(
        &self,
        max_inquiries: u32,
        limit: u64,
    ) -> Result<Counted<InquiryRecord>> {
        self.pg_needs_operator_first(max_inquiries, limit)
    }

    fn count_by_state(&self) -> Result<Vec<(State, i64)>> {
        self.pool.run("counting rows", |c| {
            let st = c.prepared(COUNT_BY_STATE)?;
            Ok(c.client
                .query(&st, &[])?
                .iter()
                .filter_map(|r| Some((r.get::<_, String>(0).parse().ok()?, r.get(1))))
                .collect())
        })
    }

    fn oldest_age_secs(&self, state: State) -> Result<Option<f64>> {
        self.pool.run("sampling the ledger", move |c| {
            let st = c.prepared(OLDEST_AGE)?;
            c.client.query_one(&st, &[&state.as_str()])?.try_get(0)
        })
    }

    /// The probe row inserted as a claim is, under the session's name, in a transaction that
    /// is rolled back (its triggers fired, nothing kept); then the health row stamped and
    /// read back.
    fn health_round_trip(&self) -> Result<()> {
        self.pool.run("probing the claim path", |c| {
            let (probe, actor) = (c.prepared(HEALTH_PROBE)?, c.prepared(ACTOR)?);
            let who = c.who.clone();
            let mut t = c.client.transaction()?;
            t.execute(&actor, &[&who, &None::<String>])?;
            t.execute(&probe, &[&crate::store::HEALTH_PROBE_GUID])?;
            t.rollback()
        })?;
        self.execute("writing the health row", TOUCH_HEALTH, params![])?;
        let at = self.pool.run("reading the health row", |c| {
            let st = c.prepared(READ_HEALTH)?;
            c.client
                .query_opt(&st, &[])?
                .map(|r| r.try_get(0))
                .transpose()
        })?;
        crate::store::health_read_back(at)
    }

    fn history(&self, guid: &str) -> Result<Vec<HistoryRow>> {
        let guid = guid.to_string();
        self.pool.run("reading the history", move |c| {
            let st = c.prepared(HISTORY)?;
            c.client
                .query(&st, &[&guid])?
                .iter()
                .map(|r| {
                    Ok(HistoryRow {
                        id: r.try_get(0)?,
                        guid: r.try_get(1)?,
                        from_state: r.try_get(2)?,
                        to_state: r.try_get(3)?,
                        rsp_code: r.try_get(4)?,
                        attempts: r.try_get::<_, Option<i32>>(5)?.map(i64::from),
                        at: r.try_get(6)?,
                        who: r.try_get(7)?,
                        reason: r.try_get(8)?,
                        channel: r.try_get(9)?,
                    })
                })
                .collect()
        })
    }

    /// The setting of every connection the pool may hold (opened at once if need be).
    fn durability(&self) -> Result<Vec<Durability>> {
        self.pool.durability_of_all()
    }
}

impl Recovering for PgStore {
    fn recovery(&self) -> Result<Option<Recovery>> {
        self.recovery_mark()
    }

    fn ledger_events(&self, limit: u64) -> Result<Vec<LedgerEvent>> {
        self.events(limit)
    }
}

impl Settling for PgStore {
    fn settle_request(&self, id: i64) -> Result<Option<SettleRequest>> {
        self.request(id)
    }

    fn settle_requests(&self, which: Listed<'_>, limit: u64) -> Result<Vec<SettleRequest>> {
        self.requests(which, limit)
    }

    fn undecided_settle_requests(&self) -> Result<Undecided> {
        self.undecided()
    }

    fn identity(&self) -> Result<String> {
        self.session_user()
    }
}
