//! One more failed inquiry about a GUID, and when the next one is due, in one statement: the
//! record of a GUID's n-th failure says its next inquiry is due at now + min(min_age ×
//! 2^(n-1), cap), by the database's clock.

use crate::error::Result;
use crate::postgres::{PgStore, params, record};
use crate::sqlite::{Hold, Ledger};
use crate::store::{
    INQUIRY_BACKOFF_MAX_DOUBLINGS, InquiryRecord, backoff_base_secs, backoff_cap_secs,
    last_error_text,
};

/// In the DO UPDATE, `tx_inquiry.failures` is the count before this failure, n-1. ?3 is
/// --min-age (at most the cap, so that the shift cannot overflow), ?4 the cap, ?5 the
/// largest shift.
const SQLITE: &str = "\
    INSERT INTO tx_inquiry (guid, failures, last_error, next_at) \
    VALUES (?1, 1, ?2, datetime('now', '+' || ?3 || ' seconds')) \
    ON CONFLICT (guid) DO UPDATE SET \
        failures = tx_inquiry.failures + 1, \
        last_error = excluded.last_error, \
        next_at = datetime('now', '+' || \
            min(?3 << max(0, min(tx_inquiry.failures, ?5)), ?4) || ' seconds') \
    RETURNING guid, failures, last_error, next_at";

/// As SQLite's: $3 is --min-age (at most the cap), $4 the cap, $5 the largest shift.
const POSTGRES: &str = "\
    INSERT INTO tx_inquiry AS i (guid, failures, last_error, next_at) \
    VALUES ($1, 1, $2, now() + make_interval(secs => $3::bigint)) \
    ON CONFLICT (guid) DO UPDATE SET \
        failures = i.failures + 1, \
        last_error = excluded.last_error, \
        next_at = now() + make_interval(secs => \
            LEAST($3::bigint << GREATEST(0, LEAST(i.failures, $5::integer)), $4::bigint)) \
    RETURNING guid, failures, last_error, \
        to_char(next_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS')";

pub trait RecordInquiryFailure {
    /// Counts one more failed inquiry about `guid` (creating its record at 1) with `error`,
    /// and sets its next inquiry `min(min_age × 2^(failures-1), INQUIRY_BACKOFF_CAP)` from
    /// now by the database's clock; one statement. Returns the record as it now is.
    fn record_inquiry_failure(
        &self,
        guid: &str,
        error: &str,
        min_age_secs: u64,
    ) -> Result<InquiryRecord>;
}

impl Ledger {
    /// One more failed inquiry about `guid`, and when the next one is due (one statement).
    pub fn record_inquiry_failure(
        &self,
        guid: &str,
        error: &str,
        min_age_secs: u64,
    ) -> Result<InquiryRecord> {
        Ok(self.conn.prepare_cached(SQLITE)?.query_row(
            rusqlite::params![
                guid,
                last_error_text(error),
                backoff_base_secs(min_age_secs),
                backoff_cap_secs(),
                INQUIRY_BACKOFF_MAX_DOUBLINGS
            ],
            InquiryRecord::from_sql,
        )?)
    }
}

impl<H: Hold> RecordInquiryFailure for H {
    fn record_inquiry_failure(
        &self,
        guid: &str,
        error: &str,
        min_age_secs: u64,
    ) -> Result<InquiryRecord> {
        let (guid, error) = (guid.to_string(), error.to_string());
        self.write_with(move |l| l.record_inquiry_failure(&guid, &error, min_age_secs))
    }
}

impl RecordInquiryFailure for PgStore {
    fn record_inquiry_failure(
        &self,
        guid: &str,
        error: &str,
        min_age_secs: u64,
    ) -> Result<InquiryRecord> {
        let p = params![
            guid.to_string(),
            last_error_text(error).to_string(),
            backoff_base_secs(min_age_secs),
            backoff_cap_secs(),
            INQUIRY_BACKOFF_MAX_DOUBLINGS as i32,
        ];
        self.pool.run("recording a failed inquiry", move |c| {
            let st = c.prepared(POSTGRES)?;
            record(&c.client.query_one(&st, &p.refs())?)
        })
    }
}
