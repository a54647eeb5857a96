//! Settlement requests on PostgreSQL (see `crate::settle_request`), as they are read; making
//! and deciding one are writes (`crate::writes`). Who acts is the session's role: the
//! schema's trigger writes `session_user` as the maker and the checker, whatever a statement
//! says, and refuses a decision by the maker.

use super::PgStore;
use crate::error::Result;
use crate::settle_request::{Listed, SettleRequest, Status, Undecided};
use crate::state::State;

macro_rules! columns {
    () => {
        concat!(
            "id, guid, seen_state, seen_attempts, outcome, to_state, rsp_code, response, \
             evidence, forced, min_age_secs, reason, maker, ",
            utc!("made_at"),
            ", ",
            utc!("expires_at"),
            ", status, checker, ",
            utc!("decided_at"),
            ", decision_reason, (status = 'pending' AND expires_at <= now())"
        )
    };
}

const HAS_TABLE: &str = "SELECT to_regclass('settle_request') IS NOT NULL";
const ONE: &str = concat!("SELECT ", columns!(), " FROM settle_request WHERE id = $1");
const PENDING: &str = concat!(
    "SELECT ",
    columns!(),
    " FROM settle_request WHERE status = 'pending' AND expires_at > now() ORDER BY id LIMIT $1"
);
const ALL: &str = concat!(
    "SELECT * FROM (SELECT ",
    columns!(),
    " FROM settle_request ORDER BY id DESC LIMIT $1) r ORDER BY id"
);
const OF_GUID: &str = concat!(
    "SELECT ",
    columns!(),
    " FROM settle_request WHERE guid = $2 ORDER BY id LIMIT $1"
);
const UNDECIDED: &str = "\
    SELECT count(*) FILTER (WHERE expires_at > now()), \
           EXTRACT(EPOCH FROM now() - min(made_at) FILTER (WHERE expires_at > now()))::float8, \
           count(*) FILTER (WHERE expires_at <= now()) \
    FROM settle_request WHERE status = 'pending'";

fn request(r: &postgres::Row) -> std::result::Result<SettleRequest, postgres::Error> {
    let state = |i: usize| -> std::result::Result<State, postgres::Error> {
        let s: String = r.try_get(i)?;
        Ok(s.parse().unwrap_or(State::Unknown))
    };
    let stored: String = r.try_get(15)?;
    Ok(SettleRequest {
        id: r.try_get(0)?,
        guid: r.try_get(1)?,
        seen_state: state(2)?,
        seen_attempts: r.try_get::<_, i32>(3)?.into(),
        outcome: r.try_get(4)?,
        to_state: state(5)?,
        rsp_code: r.try_get(6)?,
        response: r.try_get(7)?,
        evidence: r.try_get(8)?,
        forced: r.try_get(9)?,
        min_age_secs: r.try_get::<_, Option<i32>>(10)?.map(|s| s.max(0) as u64),
        reason: r.try_get(11)?,
        maker: r.try_get(12)?,
        made_at: r.try_get(13)?,
        expires_at: r.try_get(14)?,
        status: Status::of(&stored, r.try_get(19)?),
        checker: r.try_get(16)?,
        decided_at: r.try_get(17)?,
        decision_reason: r.try_get(18)?,
    })
}

impl PgStore {
    pub(crate) fn request(&self, id: i64) -> Result<Option<SettleRequest>> {
        self.pool.run("reading a settlement request", move |c| {
            let has = c.prepared(HAS_TABLE)?;
            if !c.client.query_one(&has, &[])?.get::<_, bool>(0) {
                return Ok(None);
            }
            let st = c.prepared(ONE)?;
            c.client
                .query_opt(&st, &[&id])?
                .as_ref()
                .map(request)
                .transpose()
        })
    }

    pub(super) fn requests(&self, which: Listed<'_>, limit: u64) -> Result<Vec<SettleRequest>> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let (sql, guid) = match which {
            Listed::Pending => (PENDING, None),
            Listed::All => (ALL, None),
            Listed::Of(g) => (OF_GUID, Some(g.to_string())),
        };
        self.pool.run("reading settlement requests", move |c| {
            let has = c.prepared(HAS_TABLE)?;
            if !c.client.query_one(&has, &[])?.get::<_, bool>(0) {
                return Ok(Vec::new());
            }
            let st = c.prepared(sql)?;
            let rows = match &guid {
                Some(g) => c.client.query(&st, &[&limit, g])?,
                None => c.client.query(&st, &[&limit])?,
            };
            rows.iter().map(request).collect()
        })
    }

    pub(super) fn undecided(&self) -> Result<Undecided> {
        self.pool
            .run("counting undecided settlement requests", move |c| {
                let has = c.prepared(HAS_TABLE)?;
                if !c.client.query_one(&has, &[])?.get::<_, bool>(0) {
                    return Ok(Undecided::default());
                }
                let st = c.prepared(UNDECIDED)?;
                let r = c.client.query_one(&st, &[])?;
                Ok(Undecided {
                    pending: r.try_get::<_, i64>(0)?.max(0) as u64,
                    oldest_pending_secs: r.try_get::<_, Option<f64>>(1)?.map(|s| s.max(0.0)),
                    expired: r.try_get::<_, i64>(2)?.max(0) as u64,
                })
            })
    }

    pub(crate) fn session_user(&self) -> Result<String> {
        self.pool.run("reading the session's role", move |c| {
            Ok(c.client.query_one("SELECT session_user::text", &[])?.get(0))
        })
    }
}
