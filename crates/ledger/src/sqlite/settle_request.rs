//! Settlement requests on SQLite (see `crate::settle_request`). Who acts is
//! [`crate::identity::operator`], given to the schema's triggers as `txrelay_identity()` on
//! every read-write connection of ours ([`register_identity`]).

use rusqlite::functions::FunctionFlags;
use rusqlite::{Connection, OptionalExtension, params};

use super::Ledger;
use crate::error::Result;
use crate::settle_request::{
    Decided, Listed, NewRequest, SQLITE_IDENTITY_FUNCTION, SettleRequest, Status, Undecided,
    approval_reason,
};
use crate::state::State;

const NOW: &str = "strftime('%Y-%m-%dT%H:%M:%SZ', 'now')";

const COLUMNS: &str = "id, guid, seen_state, seen_attempts, outcome, to_state, rsp_code, \
    response, evidence, forced, min_age_secs, reason, maker, made_at, expires_at, status, \
    checker, decided_at, decision_reason, \
    (status = 'pending' AND expires_at <= strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))";

const MAKE: &str = "\
    INSERT INTO settle_request (guid, seen_state, seen_attempts, outcome, to_state, rsp_code, \
        response, evidence, forced, min_age_secs, reason, maker, expires_at) \
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, txrelay_identity(), \
        strftime('%Y-%m-%dT%H:%M:%SZ', 'now', ?12)) \
    RETURNING id";

/// The approved change: one guarded UPDATE from the state and attempts the request saw (as
/// PostgreSQL's).
const CHANGE: &str = "\
    UPDATE tx SET state = r.to_state, rsp_code = r.rsp_code, response = r.response, \
        updated_at = datetime('now') \
    FROM settle_request r \
    WHERE r.id = ?1 AND tx.guid = r.guid AND tx.state = r.seen_state \
        AND tx.attempts = r.seen_attempts \
        AND (r.min_age_secs IS NULL \
             OR tx.updated_at <= datetime('now', '-' || r.min_age_secs || ' seconds'))";

/// Gives this connection's SQL the person the process acts for (see schema.sql, version 9).
pub(super) fn register_identity(conn: &Connection) -> rusqlite::Result<()> {
    let me = crate::identity::operator();
    conn.create_scalar_function(
        SQLITE_IDENTITY_FUNCTION,
        0,
        FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC,
        move |_| Ok(me.clone()),
    )
}

fn request(r: &rusqlite::Row<'_>) -> rusqlite::Result<SettleRequest> {
    let state = |i: usize| -> rusqlite::Result<State> {
        let s: String = r.get(i)?;
        s.parse().map_err(|_| {
            rusqlite::Error::FromSqlConversionFailure(
                i,
                rusqlite::types::Type::Text,
                format!("unknown state {s}").into(),
            )
        })
    };
    let stored: String = r.get(15)?;
    Ok(SettleRequest {
        id: r.get(0)?,
        guid: r.get(1)?,
        seen_state: state(2)?,
        seen_attempts: r.get(3)?,
        outcome: r.get(4)?,
        to_state: state(5)?,
        rsp_code: r.get(6)?,
        response: r.get(7)?,
        evidence: r.get(8)?,
        forced: r.get(9)?,
        min_age_secs: r.get::<_, Option<i64>>(10)?.map(|s| s.max(0) as u64),
        reason: r.get(11)?,
        maker: r.get(12)?,
        made_at: r.get(13)?,
        expires_at: r.get(14)?,
        status: Status::of(&stored, r.get(19)?),
        checker: r.get(16)?,
        decided_at: r.get(17)?,
        decision_reason: r.get(18)?,
    })
}

impl Ledger {
    /// Records a settlement request made by the person this process acts for; its id.
    pub fn make_settle_request(&self, n: &NewRequest) -> Result<i64> {
        Ok(self.conn.prepare_cached(MAKE)?.query_row(
            params![
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

    /// One request by id.
    pub fn settle_request(&self, id: i64) -> Result<Option<SettleRequest>> {
        if !self.has_settle_requests()? {
            return Ok(None);
        }
        let sql = format!("SELECT {COLUMNS} FROM settle_request WHERE id = ?1");
        Ok(self
            .conn
            .prepare_cached(&sql)?
            .query_row([id], request)
            .optional()?)
    }

    /// The requests `which` names, at most `limit` of them (see [`Listed`]).
    pub fn settle_requests(&self, which: Listed<'_>, limit: u64) -> Result<Vec<SettleRequest>> {
        if !self.has_settle_requests()? {
            return Ok(Vec::new());
        }
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let (sql, guid) = match which {
            Listed::All => (
                format!(
                    "SELECT * FROM (SELECT {COLUMNS} FROM settle_request ORDER BY id DESC \
                     LIMIT ?1) ORDER BY id"
                ),
                None,
            ),
            Listed::Pending => (
                format!(
                    "SELECT {COLUMNS} FROM settle_request WHERE status = 'pending' \
                     AND expires_at > {NOW} ORDER BY id LIMIT ?1"
                ),
                None,
            ),
            Listed::Of(guid) => (
                format!(
                    "SELECT {COLUMNS} FROM settle_request WHERE guid = ?2 ORDER BY id LIMIT ?1"
                ),
                Some(guid),
            ),
        };
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let rows = match guid {
            Some(g) => stmt.query_map(params![limit, g], request)?,
            None => stmt.query_map([limit], request)?,
        };
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// The undecided requests: how many pending, the oldest's age, how many expired.
    pub fn undecided_settle_requests(&self) -> Result<Undecided> {
        if !self.has_settle_requests()? {
            return Ok(Undecided::default());
        }
        let sql = format!(
            "SELECT count(*) FILTER (WHERE expires_at > {NOW}), \
                    (julianday('now') - julianday(min(made_at) FILTER (WHERE expires_at > {NOW}))) \
                        * 86400.0, \
                    count(*) FILTER (WHERE expires_at <= {NOW}) \
             FROM settle_request WHERE status = 'pending'"
        );
        Ok(self.conn.prepare_cached(&sql)?.query_row([], |r| {
            Ok(Undecided {
                pending: r.get::<_, i64>(0)?.max(0) as u64,
                oldest_pending_secs: r.get::<_, Option<f64>>(1)?.map(|s| s.max(0.0)),
                expired: r.get::<_, i64>(2)?.max(0) as u64,
            })
        })?)
    }

    /// Carries out request `id` as the person this process acts for: in one transaction the
    /// request is marked approved (if pending and not expired) and its change made by one
    /// guarded UPDATE from the state and attempts it recorded; if either finds nothing, both
    /// are undone.
    pub fn approve_settle_request(&self, id: i64, why: Option<&str>) -> Result<Decided> {
        self.decide(id, "approved", why, |r| {
            let me = crate::identity::operator();
            let reason = approval_reason(r, &me, why);
            self.as_actor(Some(&format!("operator:{me}")), Some(&reason), || {
                Ok(self.conn.prepare_cached(CHANGE)?.execute([id])? == 1)
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
        let decide = format!(
            "UPDATE settle_request SET status = ?2, checker = txrelay_identity(), \
             decided_at = {NOW}, decision_reason = ?3 \
             WHERE id = ?1 AND status = 'pending' AND (?2 = 'rejected' OR expires_at > {NOW})"
        );
        self.conn.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
        let outcome = (|| -> Result<Option<Decided>> {
            if self
                .conn
                .prepare_cached(&decide)?
                .execute(params![id, status, why])?
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

    fn has_settle_requests(&self) -> Result<bool> {
        let n: i64 = self.conn.prepare_cached(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'settle_request'",
        )?
        .query_row([], |r| r.get(0))?;
        Ok(n == 1)
    }
}
