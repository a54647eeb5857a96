//! Settlement requests on PostgreSQL (see `crate::settle_request`). Who acts is the
//! session's role: the schema's trigger writes `session_user` as the maker and the checker,
//! whatever a statement says, and refuses a decision by the maker.

use super::PgStore;
use crate::error::Result;
use crate::settle_request::{
    Decided, Listed, NewRequest, SettleRequest, Status, Undecided, approval_reason,
};
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
const MAKE: &str = "\
    INSERT INTO settle_request (guid, seen_state, seen_attempts, outcome, to_state, rsp_code, \
        response, evidence, forced, min_age_secs, reason, expires_at) \
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, \
        now() + make_interval(secs => $12::float8)) \
    RETURNING id";
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
/// A rejection, by the ledger's own function (schema version 7, `txrelay_reject`, SECURITY
/// DEFINER: the operator's role needs no UPDATE on settle_request); the trigger writes the
/// checker (session_user) and the decision's time. An expired request can still be rejected
/// (closed), never approved.
const REJECT: &str = "SELECT txrelay_reject($1, $2)";
/// An approval and its change, by the ledger's own function (`txrelay_approve`, SECURITY
/// DEFINER: the operator's role needs no UPDATE on tx): the decision, then one guarded UPDATE
/// from the state and attempts the request saw.
const APPROVE: &str = "SELECT txrelay_approve($1, $2, $3)";
/// The SQLSTATE `txrelay_approve` raises when the row moved on (its decision undone too).
const ROW_CHANGED: &str = "TXR01";

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
    pub(super) fn make_request(&self, n: &NewRequest) -> Result<i64> {
        let n = n.clone();
        self.pool.run("recording a settlement request", move |c| {
            let st = c.prepared(MAKE)?;
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

    pub(super) fn request(&self, id: i64) -> Result<Option<SettleRequest>> {
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

    pub(super) fn session_user(&self) -> Result<String> {
        self.pool.run("reading the session's role", move |c| {
            Ok(c.client.query_one("SELECT session_user::text", &[])?.get(0))
        })
    }

    /// Decides request `id` (`approved`: and makes its change) in one transaction: both, or
    /// neither.
    pub(super) fn decide(
        &self,
        id: i64,
        status: &'static str,
        why: Option<&str>,
    ) -> Result<Decided> {
        let Some(before) = self.request(id)? else {
            return Ok(Decided::NoSuchRequest);
        };
        let why = why.map(str::to_string);
        let approve = status == "approved";
        let b = before.clone();
        let deciding = "deciding a settlement request";
        let (outcome, rerun) =
            self.pool
                .run_noting_rerun(deciding, self.pool.deadline(), move |c| {
                    if !approve {
                        let reject = c.prepared(REJECT)?;
                        let said: String = c.client.query_one(&reject, &[&id, &why])?.try_get(0)?;
                        return Ok((said != "rejected").then(|| Decided::NotPending(b.clone())));
                    }
                    let me: String = c.client.query_one("SELECT session_user::text", &[])?.get(0);
                    let reason = approval_reason(&b, &me, why.as_deref());
                    let approve = c.prepared(APPROVE)?;
                    match c.client.query_one(&approve, &[&id, &why, &reason]) {
                        Ok(r) if r.try_get::<_, String>(0)? == "approved" => Ok(None),
                        Ok(_) => Ok(Some(Decided::NotPending(b.clone()))),
                        Err(e) if e.code().is_some_and(|s| s.code() == ROW_CHANGED) => {
                            Ok(Some(Decided::RowChanged(b.clone())))
                        }
                        Err(e) => Err(e),
                    }
                })?;
        match outcome {
            Some(Decided::NotPending(_)) => {
                let now = self.request(id)?.unwrap_or(before);
                let asked = if approve {
                    Status::Approved
                } else {
                    Status::Rejected
                };
                if rerun && decided_by(&now, asked, &self.session_user()?) {
                    // The first run's commit reached the server, its answer did not.
                    Ok(Decided::Done(now))
                } else {
                    Ok(Decided::NotPending(now))
                }
            }
            Some(refused) => Ok(refused),
            None => Ok(self
                .request(id)?
                .map_or(Decided::NoSuchRequest, Decided::Done)),
        }
    }
}

/// Whether `r` is decided as `asked` by `me`: what a decision run a second time (its first
/// run's answer lost with its connection) finds when the first run's commit went through.
/// Only then is "not pending" read as done: without a second run, the request was decided
/// before this decision began (by this person too, in another run: not this one's doing).
fn decided_by(r: &SettleRequest, asked: Status, me: &str) -> bool {
    r.status == asked && r.checker.as_deref() == Some(me)
}
