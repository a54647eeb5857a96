//! Dual control (contract §12): a settlement request, made by the person this process acts
//! for (the ledger's trigger writes the maker: `txrelay_identity()` on SQLite, `session_user`
//! on PostgreSQL, whatever the statement says).

use crate::error::Result;
use crate::postgres::PgStore;
use crate::settle_request::NewRequest;
use crate::sqlite::{Hold, Ledger};

const SQLITE: &str = "\
    INSERT INTO settle_request (guid, seen_state, seen_attempts, outcome, to_state, rsp_code, \
        response, evidence, forced, min_age_secs, reason, maker, expires_at) \
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, txrelay_identity(), \
        strftime('%Y-%m-%dT%H:%M:%SZ', 'now', ?12)) \
    RETURNING id";
const POSTGRES: &str = "\
    INSERT INTO settle_request (guid, seen_state, seen_attempts, outcome, to_state, rsp_code, \
        response, evidence, forced, min_age_secs, reason, expires_at) \
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, \
        now() + make_interval(secs => $12::float8)) \
    RETURNING id";

pub trait MakeSettleRequest {
    /// Records a settlement request (contract §12) made by the person this process acts
    /// for (the system's identity: `session_user` on PostgreSQL); its id.
    fn make_settle_request(&self, request: &NewRequest) -> Result<i64>;
}

impl Ledger {
    /// Records a settlement request made by the person this process acts for; its id.
    pub fn make_settle_request(&self, n: &NewRequest) -> Result<i64> {
        Ok(self.conn.prepare_cached(SQLITE)?.query_row(
            rusqlite::params![
                n.guid,
                n.seen_state,
                n.seen_attempts,
                n.outcome,
                n.to,
                n.rsp_code,
                n.response,
                n.evidence,
                n.forced,
                n.min_age_secs.map(|s| s as i64),
                n.reason,
                format!("+{} seconds", n.expires_in_secs),
            ],
            |r| r.get(0),
        )?)
    }
}

impl<H: Hold> MakeSettleRequest for H {
    fn make_settle_request(&self, request: &NewRequest) -> Result<i64> {
        let request = request.clone();
        self.write_with(move |l| l.make_settle_request(&request))
    }
}

impl MakeSettleRequest for PgStore {
    fn make_settle_request(&self, n: &NewRequest) -> Result<i64> {
        let n = n.clone();
        self.pool.run("recording a settlement request", move |c| {
            let st = c.prepared(POSTGRES)?;
            let attempts = i32::try_from(n.seen_attempts).unwrap_or(i32::MAX);
            let min_age = n.min_age_secs.map(|s| i32::try_from(s).unwrap_or(i32::MAX));
            let expires = n.expires_in_secs as f64;
            c.client
                .query_one(
                    &st,
                    &[
                        &n.guid,
                        &n.seen_state.as_str(),
                        &attempts,
                        &n.outcome,
                        &n.to.as_str(),
                        &n.rsp_code,
                        &n.response,
                        &n.evidence,
                        &n.forced,
                        &min_age,
                        &n.reason,
                        &expires,
                    ],
                )?
                .try_get(0)
        })
    }
}
