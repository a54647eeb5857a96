//! A guarded transition: `change` is made iff the row is still in the state it leaves (and
//! on its attempt, and unchanged for long enough, when the change says so). The relay's
//! result (from SENT), resolve's settlements (from UNKNOWN, or from SENT with
//! --stale-sent), recovery's verdicts.

use rusqlite::params;

use crate::error::Result;
use crate::postgres::PgStore;
use crate::sqlite::{Hold, Ledger, age_modifier};
use crate::state::Change;

const SQLITE: &str = "\
    UPDATE tx SET state = ?3, rsp_code = ?4, response = ?5, updated_at = datetime('now') \
    WHERE guid = ?1 AND state = ?2 AND (?6 IS NULL OR attempts = ?6) \
    AND (?7 IS NULL OR updated_at <= datetime('now', ?7))";

/// Guarded transitions, batched (`postgres::results`): one row per change, each GUID once:
/// $1 GUID, $2 the state it leaves, $3 the state it enters, $4 code, $5 reply, $6 the
/// attempt it must be on (NULL: any), $7 how long it must have been unchanged (seconds;
/// NULL: no matter); the GUIDs returned are the changes made. `tx.guid = ANY($1)` says again
/// what the join says, for the planner: it bounds every plan's way into `tx` to the rows
/// named, which is what lets the batch writers plan the statement once
/// (`pool::Plans::GenericByKey`).
pub(crate) const POSTGRES_BATCH: &str = "\
    UPDATE tx SET state = v.to_state, rsp_code = v.rsp_code, response = v.response, \
        updated_at = now() \
    FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bytea[], $6::integer[], \
                $7::float8[]) AS v(guid, from_state, to_state, rsp_code, response, attempts, \
                                   min_age) \
    WHERE tx.guid = v.guid AND tx.guid = ANY($1) AND tx.state = v.from_state \
    AND (v.attempts IS NULL OR tx.attempts = v.attempts) \
    AND (v.min_age IS NULL OR tx.updated_at <= now() - make_interval(secs => v.min_age)) \
    RETURNING tx.guid";

pub trait Transition {
    /// Makes `change` iff the row is still in its `from` state (and on its attempt).
    fn transition(&self, change: &Change) -> Result<bool>;
}

impl Ledger {
    /// Makes `c` iff the row is still in its `from` state (and on its attempt, when it
    /// names one), named in the history after `c.who` and `c.reason`.
    pub fn transition(&self, c: &Change) -> Result<bool> {
        self.as_actor(c.who.as_deref(), c.reason.as_deref(), || {
            let n = self.conn.prepare_cached(SQLITE)?.execute(params![
                c.guid,
                c.from,
                c.to,
                c.code_str(),
                c.response,
                c.attempt,
                c.min_age_secs.map(|s| age_modifier(s, "seconds")),
            ])?;
            Ok(n == 1)
        })
    }
}

impl<H: Hold> Transition for H {
    fn transition(&self, change: &Change) -> Result<bool> {
        let change = change.clone();
        self.write_with(move |l| l.transition(&change))
    }
}

impl Transition for PgStore {
    fn transition(&self, c: &Change) -> Result<bool> {
        self.change(c.clone())
    }
}
