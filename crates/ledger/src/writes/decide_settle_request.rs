//! Dual control (contract §12): a decision on a settlement request by a person other than
//! its maker (the ledger's trigger refuses the maker). An approval marks the request
//! approved (pending and not expired only) and makes its change by one guarded UPDATE from
//! the state and attempts the request saw, in one transaction: both, or neither. A rejection
//! closes it (an expired one too) and changes no row.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::error::Result;
use crate::postgres::PgStore;
use crate::settle_request::{Decided, SettleRequest, Status, approval_reason};
use crate::sqlite::{Hold, Ledger};

/// The decision (?2 `approved` or `rejected`), as the person `txrelay_identity()` names.
const SQLITE_DECIDE: &str = "\
    UPDATE settle_request SET status = ?2, checker = txrelay_identity(), \
        decided_at = strftime('%Y-%m-%dT%H:%M:%SZ', 'now'), decision_reason = ?3 \
    WHERE id = ?1 AND status = 'pending' \
        AND (?2 = 'rejected' OR expires_at > strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))";

/// The approved change: one guarded UPDATE from the state and attempts the request saw (as
/// PostgreSQL's `txrelay_approve`).
const SQLITE_CHANGE: &str = "\
    UPDATE tx SET state = r.to_state, rsp_code = r.rsp_code, response = r.response, \
        updated_at = datetime('now') \
    FROM settle_request r \
    WHERE r.id = ?1 AND tx.guid = r.guid AND tx.state = r.seen_state \
        AND tx.attempts = r.seen_attempts \
        AND (r.min_age_secs IS NULL \
             OR tx.updated_at <= datetime('now', '-' || r.min_age_secs || ' seconds'))";

/// A rejection, by the ledger's own function (schema version 7, `txrelay_reject`, SECURITY
/// DEFINER: the operator's role needs no UPDATE on settle_request); the trigger writes the
/// checker (session_user) and the decision's time. An expired request can still be rejected
/// (closed), never approved.
const POSTGRES_REJECT: &str = "SELECT txrelay_reject($1, $2)";
/// An approval and its change, by the ledger's own function (`txrelay_approve`, SECURITY
/// DEFINER: the operator's role needs no UPDATE on tx): the decision, then one guarded UPDATE
/// from the state and attempts the request saw.
const POSTGRES_APPROVE: &str = "SELECT txrelay_approve($1, $2, $3)";
/// The SQLSTATE `txrelay_approve` raises when the row moved on (its decision undone too).
const ROW_CHANGED: &str = "TXR01";

pub trait ApproveSettleRequest {
    /// Approves request `id` as the person this process acts for, and makes its change by
    /// one guarded UPDATE from the state and attempts it recorded, in one transaction: both,
    /// or neither. The ledger refuses it if that person made the request (an error).
    fn approve_settle_request(&self, id: i64, why: Option<&str>) -> Result<Decided>;
}

pub trait RejectSettleRequest {
    /// Rejects request `id` as the person this process acts for (not its maker), pending or
    /// expired: closed without a change.
    fn reject_settle_request(&self, id: i64, why: &str) -> Result<Decided>;
}

impl Ledger {
    /// Carries out request `id` as the person this process acts for: in one transaction the
    /// request is marked approved (if pending and not expired) and its change made by one
    /// guarded UPDATE from the state and attempts it recorded; if either finds nothing, both
    /// are undone.
    pub fn approve_settle_request(&self, id: i64, why: Option<&str>) -> Result<Decided> {
        self.decide(id, "approved", why, |r| {
            let me = crate::identity::operator();
            let reason = approval_reason(r, &me, why);
            self.as_actor(Some(&format!("operator:{me}")), Some(&reason), || {
                Ok(self.conn.prepare_cached(SQLITE_CHANGE)?.execute([id])? == 1)
            })
        })
    }

    /// Closes request `id` without a change, as the person this process acts for (an expired
    /// request too: closing it changes nothing).
    pub fn reject_settle_request(&self, id: i64, why: &str) -> Result<Decided> {
        self.decide(id, "rejected", Some(why), |_| Ok(true))
    }

    fn decide(
        &self,
        id: i64,
        status: &str,
        why: Option<&str>,
        change: impl FnOnce(&SettleRequest) -> Result<bool>,
    ) -> Result<Decided> {
        let Some(before) = self.settle_request(id)? else {
            return Ok(Decided::NoSuchRequest);
        };
        self.conn.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
        let outcome = (|| -> Result<Option<Decided>> {
            if self
                .conn
                .prepare_cached(SQLITE_DECIDE)?
                .execute(rusqlite::params![id, status, why])?
                != 1
            {
                return Ok(Some(Decided::NotPending(before.clone())));
            }
            if !change(&before)? {
                return Ok(Some(Decided::RowChanged(before.clone())));
            }
            Ok(None)
        })();
        let end = if matches!(outcome, Ok(None)) {
            "COMMIT"
        } else {
            "ROLLBACK"
        };
        if let Err(e) = self.conn.execute_batch(end) {
            let _ = self.conn.execute_batch("ROLLBACK");
            return Err(e.into());
        }
        match outcome? {
            Some(Decided::NotPending(_)) => Ok(Decided::NotPending(
                self.settle_request(id)?.unwrap_or(before),
            )),
            Some(refused) => Ok(refused),
            None => Ok(self
                .settle_request(id)?
                .map_or(Decided::NoSuchRequest, Decided::Done)),
        }
    }
}

impl<H: Hold> ApproveSettleRequest for H {
    fn approve_settle_request(&self, id: i64, why: Option<&str>) -> Result<Decided> {
        let why = why.map(str::to_string);
        self.write_with(move |l| l.approve_settle_request(id, why.as_deref()))
    }
}

impl<H: Hold> RejectSettleRequest for H {
    fn reject_settle_request(&self, id: i64, why: &str) -> Result<Decided> {
        let why = why.to_string();
        self.write_with(move |l| l.reject_settle_request(id, &why))
    }
}

impl ApproveSettleRequest for PgStore {
    fn approve_settle_request(&self, id: i64, why: Option<&str>) -> Result<Decided> {
        decide(self, id, Status::Approved, why)
    }
}

impl RejectSettleRequest for PgStore {
    fn reject_settle_request(&self, id: i64, why: &str) -> Result<Decided> {
        decide(self, id, Status::Rejected, Some(why))
    }
}

/// Decides request `id` on PostgreSQL (`Approved`: and makes its change) in one
/// transaction: both, or neither.
fn decide(store: &PgStore, id: i64, asked: Status, why: Option<&str>) -> Result<Decided> {
    let Some(before) = store.request(id)? else {
        return Ok(Decided::NoSuchRequest);
    };
    let why = why.map(str::to_string);
    let approve = asked == Status::Approved;
    let b = before.clone();
    let deciding = "deciding a settlement request";
    let pool = &store.pool;
    // How many runs sent the decision to the server: a second run finds the first's
    // commit only if the first got as far as sending it.
    let sent = Arc::new(AtomicU32::new(0));
    let sends = Arc::clone(&sent);
    let (outcome, rerun) = pool.run_noting_rerun(deciding, pool.deadline(), move |c| {
        if !approve {
            let reject = c.prepared(POSTGRES_REJECT)?;
            sends.fetch_add(1, Ordering::SeqCst);
            let said: String = c.client.query_one(&reject, &[&id, &why])?.try_get(0)?;
            return Ok((said != "rejected").then(|| Decided::NotPending(b.clone())));
        }
        let me: String = c.client.query_one("SELECT session_user::text", &[])?.get(0);
        let reason = approval_reason(&b, &me, why.as_deref());
        let approve = c.prepared(POSTGRES_APPROVE)?;
        sends.fetch_add(1, Ordering::SeqCst);
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
            let now = store.request(id)?.unwrap_or(before);
            let first_sent = rerun && sent.load(Ordering::SeqCst) > 1;
            if first_sent && decided_by(&now, asked, &store.session_user()?) {
                // The first run's commit reached the server, its answer did not.
                Ok(Decided::Done(now))
            } else {
                Ok(Decided::NotPending(now))
            }
        }
        Some(refused) => Ok(refused),
        None => Ok(store
            .request(id)?
            .map_or(Decided::NoSuchRequest, Decided::Done)),
    }
}

/// Whether `r` is decided as `asked` by `me`: what a decision run a second time finds when
/// the first run sent the decision, lost its connection before the answer came back, and
/// its commit went through. Only then is "not pending" read as done: without a second run,
/// or when the first broke before sending the decision, the request was decided before
/// this decision began (by this person too, in another run: not this one's doing).
fn decided_by(r: &SettleRequest, asked: Status, me: &str) -> bool {
    r.status == asked && r.checker.as_deref() == Some(me)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::State;

    fn request(status: Status, checker: Option<&str>) -> SettleRequest {
        SettleRequest {
            id: 1,
            guid: "G".into(),
            seen_state: State::Unknown,
            seen_attempts: 1,
            outcome: "booked".into(),
            to_state: State::Done,
            rsp_code: "0000".into(),
            response: Vec::new(),
            evidence: String::new(),
            forced: false,
            min_age_secs: None,
            reason: String::new(),
            maker: "alice".into(),
            made_at: String::new(),
            expires_at: String::new(),
            status,
            checker: checker.map(str::to_string),
            decided_at: None,
            decision_reason: None,
        }
    }

    #[test]
    fn only_a_decision_as_asked_by_this_person_is_read_as_this_ones() {
        let me = "bob";
        assert!(decided_by(
            &request(Status::Approved, Some(me)),
            Status::Approved,
            me
        ));
        assert!(decided_by(
            &request(Status::Rejected, Some(me)),
            Status::Rejected,
            me
        ));
        // Someone else's decision, the other decision, or none (expired, still pending).
        assert!(!decided_by(
            &request(Status::Approved, Some("carol")),
            Status::Approved,
            me
        ));
        assert!(!decided_by(
            &request(Status::Rejected, Some(me)),
            Status::Approved,
            me
        ));
        assert!(!decided_by(
            &request(Status::Approved, Some(me)),
            Status::Rejected,
            me
        ));
        assert!(!decided_by(
            &request(Status::Expired, None),
            Status::Approved,
            me
        ));
        assert!(!decided_by(
            &request(Status::Pending, None),
            Status::Rejected,
            me
        ));
    }
}
