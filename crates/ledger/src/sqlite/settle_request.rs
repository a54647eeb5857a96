//! Settlement requests on SQLite (see `crate::settle_request`), as they are read; making and
//! deciding one are writes (`crate::writes`). Who acts is
//! [`crate::identity::operator`], given to the schema's triggers as `txrelay_identity()` on
//! every read-write connection of ours ([`register_identity`]).

use rusqlite::functions::FunctionFlags;
use rusqlite::{Connection, OptionalExtension, params};

use super::Ledger;
use crate::error::Result;
use crate::settle_request::{Listed, SQLITE_IDENTITY_FUNCTION, SettleRequest, Status, Undecided};
use crate::state::State;

const NOW: &str = "strftime('%Y-%m-%dT%H:%M:%SZ', 'now')";

const COLUMNS: &str = "id, guid, seen_state, seen_attempts, outcome, to_state, rsp_code, \
    response, evidence, forced, min_age_secs, reason, maker, made_at, expires_at, status, \
    checker, decided_at, decision_reason, \
    (status = 'pending' AND expires_at <= strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))";

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

    fn has_settle_requests(&self) -> Result<bool> {
        let n: i64 = self.conn.prepare_cached(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'settle_request'",
        )?
        .query_row([], |r| r.get(0))?;
        Ok(n == 1)
    }
}
