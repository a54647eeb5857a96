//! The PostgreSQL ledger (contract §7): the same statements and the same rules as SQLite's
//! (`sqlite`), for several relays and tools sharing one ledger. Every transition is one
//! autocommitted statement whose WHERE names the state it leaves; its row count decides.
//! Ages are compared against the server's clock.

mod pool;
mod tls;
pub mod url;

use std::time::{Duration, Instant};

use postgres::types::ToSql;

pub use pool::Settings;
use pool::{PgConn, Pool};
pub use url::{PgUrl, is_pg_url};

use crate::error::{LedgerError, Result};
use crate::state::{Change, Evidence, HistoryRow, Row, State};
use crate::store::{
    Durability, INQUIRY_BACKOFF_MAX_DOUBLINGS, InquiryRecord, Store, backoff_base_secs,
    backoff_cap_secs, last_error_text,
};

/// The schema, built into every binary.
pub const SCHEMA: &str = include_str!("../../../../schema.postgres.sql");

/// Tools starting together take this advisory lock to apply the schema one at a time.
pub const SCHEMA_LOCK: i64 = 0x7478_7265_6c61_7900; // "txrelay"

/// Bumped whenever `SCHEMA` changes; the table `ledger_schema` records what a ledger has
/// seen (the tools apply the schema only when it says less). 2: `TRUNCATE tx` refused.
const SCHEMA_VERSION: i32 = 2;

/// The schema version a ledger records (0: none yet).
fn schema_version(c: &mut postgres::Client) -> std::result::Result<i32, postgres::Error> {
    let exists: bool = c
        .query_one("SELECT to_regclass('ledger_schema') IS NOT NULL", &[])?
        .get(0);
    if !exists {
        return Ok(0);
    }
    let v: Option<i32> = c
        .query_one("SELECT max(version) FROM ledger_schema", &[])?
        .get(0);
    Ok(v.unwrap_or(0))
}

/// How long applying the schema may wait (behind another tool doing the same).
const SCHEMA_DEADLINE: Duration = Duration::from_secs(30);

/// Applies the schema under the advisory lock, unless another tool did while this one
/// waited for it; in one transaction with the version it records.
fn apply_schema(c: &mut postgres::Client) -> std::result::Result<(), postgres::Error> {
    c.execute("SELECT pg_advisory_lock($1)", &[&SCHEMA_LOCK])?;
    let applied = (|| {
        if schema_version(c)? >= SCHEMA_VERSION {
            return Ok(());
        }
        let mut t = c.transaction()?;
        t.batch_execute(SCHEMA)?;
        t.batch_execute(&format!(
            "CREATE TABLE IF NOT EXISTS ledger_schema (version INTEGER NOT NULL); \
             INSERT INTO ledger_schema (version) VALUES ({SCHEMA_VERSION})"
        ))?;
        t.commit()
    })();
    let unlocked = c.execute("SELECT pg_advisory_unlock($1)", &[&SCHEMA_LOCK]);
    applied.and(unlocked.map(drop))
}

/// A row's columns, `updated_at` in SQLite's text form (UTC, `YYYY-MM-DD HH:MM:SS`).
macro_rules! select {
    ($rest:literal) => {
        concat!(
            "SELECT guid, tx_code, state, rsp_code, request, response, attempts, \
             to_char(updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS') FROM tx ",
            $rest
        )
    };
}

const CLAIM_NEW: &str = "\
    INSERT INTO tx (guid, tx_code, state, request, attempts, updated_at) \
    VALUES ($1, $2, 'SENT', $3, 1, now()) \
    ON CONFLICT (guid) DO NOTHING";
const RECLAIM_FAILED: &str = "\
    UPDATE tx SET state = 'SENT', attempts = attempts + 1, updated_at = now() \
    WHERE guid = $1 AND state = 'FAILED' AND request = $2 \
    RETURNING attempts";
const RECLAIM_FOR_RESEND: &str = "\
    UPDATE tx SET state = 'SENT', attempts = attempts + 1, updated_at = now() \
    WHERE guid = $1 AND state = 'FAILED' AND rsp_code = 'E902' AND attempts < $2 \
    RETURNING attempts";
const TRANSITION: &str = "\
    UPDATE tx SET state = $3, rsp_code = $4, response = $5, updated_at = now() \
    WHERE guid = $1 AND state = $2 AND ($6::integer IS NULL OR attempts = $6::integer) \
    AND ($7::float8 IS NULL OR updated_at <= now() - make_interval(secs => $7::float8))";
/// Who and why, for the history trigger, for this transaction only.
const ACTOR: &str = "SELECT set_config('txrelay.who', $1, true), \
    set_config('txrelay.reason', coalesce($2, ''), true)";
const COPY_ROW: &str = "\
    INSERT INTO tx (guid, tx_code, state, rsp_code, request, response, attempts, updated_at) \
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8::text::timestamp AT TIME ZONE 'UTC') \
    ON CONFLICT (guid) DO NOTHING";
const HISTORY: &str = "\
    SELECT id, guid, from_state, to_state, rsp_code, attempts, \
    to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.MS'), who, reason \
    FROM tx_history WHERE guid = $1 ORDER BY id";
/// Evidence, not a change (see `Evidence`): from- and to-state are the row's state as it is.
const RECORD_EVIDENCE: &str = "\
    INSERT INTO tx_history (guid, from_state, to_state, rsp_code, attempts, who, reason) \
    VALUES ($1, (SELECT state FROM tx WHERE guid = $1), (SELECT state FROM tx WHERE guid = $1), \
            $2, $3, $4, $5)";
/// Old history, only of GUIDs no longer in doubt (as SQLite's).
const PURGE_HISTORY_CHUNK: &str = "\
    DELETE FROM tx_history WHERE id IN ( \
        SELECT id FROM tx_history h WHERE at < now() - make_interval(days => $1) \
        AND NOT EXISTS (SELECT 1 FROM tx WHERE tx.guid = h.guid \
            AND NOT (tx.state = 'DONE' AND tx.updated_at < now() - make_interval(days => $3))) \
        ORDER BY id LIMIT $2) \
    AND NOT EXISTS (SELECT 1 FROM tx WHERE tx.guid = tx_history.guid \
        AND NOT (tx.state = 'DONE' AND tx.updated_at < now() - make_interval(days => $3)))";
/// `/healthz`'s probe of the claim path (see the SQLite twin): always rolled back.
const HEALTH_PROBE: &str = "\
    INSERT INTO tx (guid, tx_code, state, request, attempts, updated_at) \
    VALUES ($1, 'TRNF', 'SENT', ''::bytea, 1, now())";
const TOUCH_HEALTH: &str = "\
    INSERT INTO relay_health (id, at) VALUES (1, now()) \
    ON CONFLICT (id) DO UPDATE SET at = excluded.at";
const READ_HEALTH: &str = "\
    SELECT to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS') FROM relay_health WHERE id = 1";
const OLDEST_AGE: &str = "\
    SELECT extract(epoch FROM now() - min(updated_at))::float8 FROM tx WHERE state = $1";
const PURGE_CHUNK: &str = "\
    DELETE FROM tx WHERE guid IN ( \
        SELECT guid FROM tx WHERE state = 'DONE' \
        AND updated_at < now() - make_interval(days => $1) \
        ORDER BY updated_at LIMIT $2) \
    AND state = 'DONE' AND updated_at < now() - make_interval(days => $1)";

// The side table of failed inquiries (see the SQLite twin): the n-th failure of a GUID sets
// its next inquiry to now + min(min_age × 2^(n-1), cap) by the server's clock. $3 is
// --min-age (at most the cap), $4 the cap, $5 the largest shift.
const RECORD_INQUIRY_FAILURE: &str = "\
    INSERT INTO tx_inquiry AS i (guid, failures, last_error, next_at) \
    VALUES ($1, 1, $2, now() + make_interval(secs => $3::bigint)) \
    ON CONFLICT (guid) DO UPDATE SET \
        failures = i.failures + 1, \
        last_error = excluded.last_error, \
        next_at = now() + make_interval(secs => \
            LEAST($3::bigint << GREATEST(0, LEAST(i.failures, $5::integer)), $4::bigint)) \
    RETURNING guid, failures, last_error, \
        to_char(next_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS')";
const CLEAR_INQUIRY: &str = "DELETE FROM tx_inquiry WHERE guid = $1";
const PRUNE_INQUIRIES: &str = "\
    DELETE FROM tx_inquiry i WHERE NOT EXISTS ( \
        SELECT 1 FROM tx WHERE tx.guid = i.guid AND tx.state IN ('UNKNOWN', 'SENT'))";
const SELECT_DUE: &str = "\
    SELECT tx.guid, tx.tx_code, tx.state, tx.rsp_code, tx.request, tx.response, tx.attempts, \
        to_char(tx.updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS') \
    FROM tx LEFT JOIN tx_inquiry i ON i.guid = tx.guid \
    WHERE tx.state = $1 AND tx.updated_at <= now() - make_interval(secs => $2) \
    AND (i.guid IS NULL OR (i.failures < $3 AND i.next_at <= now())) \
    ORDER BY tx.updated_at, tx.guid";
const NEEDS_OPERATOR: &str = "\
    SELECT i.guid, i.failures, i.last_error, \
        to_char(i.next_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS') \
    FROM tx_inquiry i JOIN tx ON tx.guid = i.guid \
    WHERE i.failures >= $1 AND tx.state IN ('UNKNOWN', 'SENT') ORDER BY i.guid";
const INQUIRY_RECORDS: &str = "\
    SELECT guid, failures, last_error, \
        to_char(next_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS') \
    FROM tx_inquiry ORDER BY guid";
/// `inspect` opens a ledger as it is: the side table may not exist yet.
const HAS_INQUIRY_TABLE: &str = "SELECT to_regclass('tx_inquiry') IS NOT NULL";

/// Owned statement parameters, moved to the connection's thread.
struct Params(Vec<Box<dyn ToSql + Sync + Send>>);

impl Params {
    fn refs(&self) -> Vec<&(dyn ToSql + Sync)> {
        self.0
            .iter()
            .map(|p| p.as_ref() as &(dyn ToSql + Sync))
            .collect()
    }
}

macro_rules! params {
    ($($p:expr),* $(,)?) => {
        Params(vec![$(Box::new($p) as Box<dyn ToSql + Sync + Send>),*])
    };
}

/// The ledger on a PostgreSQL server.
pub struct PgStore {
    pool: Pool,
    url: PgUrl,
}

impl PgStore {
    /// Connects (checking that commits are durable) and, unless `read_only`, applies the
    /// schema under the advisory lock.
    pub fn open(url: PgUrl, settings: Settings) -> Result<PgStore> {
        let tls = tls::connector(&url).map_err(|why| LedgerError::PgOpen {
            url: url.to_string(),
            why,
        })?;
        let read_only = settings.read_only;
        let store = PgStore {
            pool: Pool::new(url.clone(), tls, settings),
            url,
        };
        let opened = if read_only {
            store.pool.run("connecting", |_| Ok(()))
        } else {
            let op_deadline = store.pool.op_deadline();
            store.pool.run_by(
                "applying the schema",
                Instant::now() + SCHEMA_DEADLINE,
                move |c| {
                    // Applied once per schema version: DDL on a ledger in use would queue
                    // behind any open write transaction (CREATE INDEX IF NOT EXISTS takes a
                    // table lock even when the index exists) and hold every claim back.
                    if schema_version(&mut c.client)? >= SCHEMA_VERSION {
                        return Ok(());
                    }
                    // Waiting for the lock and applying may take as long as the deadline
                    // allows; then the session gets the pool's own timeouts back.
                    c.client.batch_execute(&pool::timeouts(SCHEMA_DEADLINE))?;
                    let applied = apply_schema(&mut c.client);
                    let restored = c.client.batch_execute(&pool::timeouts(op_deadline));
                    applied.and(restored)
                },
            )
        };
        opened.map_err(|e| LedgerError::PgOpen {
            url: store.url.to_string(),
            why: e.to_string(),
        })?;
        Ok(store)
    }

    /// A setting of a pooled session as the server holds it (`pg_settings.setting`: in the
    /// setting's base unit, milliseconds for the timeouts), for tests and diagnostics.
    pub fn session_setting(&self, name: &str) -> Result<String> {
        let name = name.to_string();
        self.pool.run("reading a setting", move |c| {
            c.client
                .query_one("SELECT setting FROM pg_settings WHERE name = $1", &[&name])?
                .try_get(0)
        })
    }

    /// Inserts `r` as it is, `updated_at` included, unless its GUID is there already
    /// (`migrate`). True iff inserted.
    pub fn copy_row(&self, r: &Row) -> Result<bool> {
        let p = params![
            r.guid.clone(),
            r.tx_code.clone(),
            r.state.as_str(),
            r.rsp_code.clone(),
            r.request.clone(),
            r.response.clone(),
            r.attempts.map(attempts),
            r.updated_at.clone(),
        ];
        Ok(self.execute("copying a row", COPY_ROW, p)? == 1)
    }

    fn rows(&self, what: &'static str, sql: &'static str, params: Params) -> Result<Vec<Row>> {
        self.pool.run(what, move |c| {
            let st = c.prepared(sql)?;
            let refs = params.refs();
            c.client
                .query(&st, &refs)?
                .iter()
                .map(row)
                .collect::<std::result::Result<Vec<Row>, postgres::Error>>()
        })
    }

    /// A write: each is its own commit, recorded in the metrics as a batch of one.
    fn execute(&self, what: &'static str, sql: &'static str, params: Params) -> Result<u64> {
        let started = Instant::now();
        let n = self.pool.run(what, move |c| {
            let st = c.prepared(sql)?;
            c.client.execute(&st, &params.refs())
        })?;
        crate::observe::commit(1, started.elapsed());
        Ok(n)
    }

    /// `sql` in a transaction of its own that tells the history who made the change and why
    /// (the session's name otherwise).
    fn execute_as(
        &self,
        what: &'static str,
        who: Option<String>,
        reason: Option<String>,
        sql: &'static str,
        params: Params,
    ) -> Result<u64> {
        self.pool.run(what, move |c| {
            let st = c.prepared(sql)?;
            let actor = c.prepared(ACTOR)?;
            let who = who.clone().unwrap_or_else(|| c.who.clone());
            let mut t = c.client.transaction()?;
            t.execute(&actor, &[&who, &reason])?;
            let n = t.execute(&st, &params.refs())?;
            t.commit()?;
            Ok(n)
        })
    }

    /// Failure records, unless the side table does not exist (a ledger opened read-only).
    fn records(&self, sql: &'static str, params: Params) -> Result<Vec<InquiryRecord>> {
        self.pool.run("reading failed inquiries", move |c| {
            let has = c.prepared(HAS_INQUIRY_TABLE)?;
            if !c.client.query_one(&has, &[])?.get::<_, bool>(0) {
                return Ok(Vec::new());
            }
            let st = c.prepared(sql)?;
            c.client
                .query(&st, &params.refs())?
                .iter()
                .map(record)
                .collect()
        })
    }

    /// A guarded UPDATE … RETURNING attempts: the attempt won, if any.
    fn claim_returning(
        &self,
        what: &'static str,
        sql: &'static str,
        params: Params,
    ) -> Result<Option<i64>> {
        self.claim(what, move |c| {
            let st = c.prepared(sql)?;
            Ok(c.client
                .query_opt(&st, &params.refs())?
                .map(|r| r.get::<_, i32>(0).into()))
        })
    }

    /// A claim (`f` says what it won, if anything). If the connection broke during its
    /// first run, the statement runs again on a new connection; but if it then wins nothing,
    /// the first run's COMMIT may have been the one that won, and nobody can know: such a
    /// claim counts as not won and as a ledger error (E905, no core call; contract §7).
    fn claim<T: Send + 'static>(
        &self,
        what: &'static str,
        f: impl Fn(&mut PgConn) -> std::result::Result<Option<T>, postgres::Error>
        + Send
        + Sync
        + 'static,
    ) -> Result<Option<T>> {
        let started = Instant::now();
        let (won, reran) = self.pool.run_noting_rerun(what, self.pool.deadline(), f)?;
        crate::observe::commit(1, started.elapsed());
        if reran && won.is_none() {
            return Err(LedgerError::Unavailable(format!(
                "{what}: the connection broke while the claim was committed, and its \
                 second run found the row taken: the first may have won; not claimed"
            )));
        }
        Ok(won)
    }
}

fn record(r: &postgres::Row) -> std::result::Result<InquiryRecord, postgres::Error> {
    Ok(InquiryRecord {
        guid: r.try_get(0)?,
        failures: r.try_get::<_, i32>(1)?.into(),
        last_error: r.try_get(2)?,
        next_at: r.try_get(3)?,
    })
}

fn row(r: &postgres::Row) -> std::result::Result<Row, postgres::Error> {
    let state: String = r.try_get(2)?;
    Ok(Row {
        guid: r.try_get(0)?,
        tx_code: r.try_get(1)?,
        // The CHECK constraint admits only the five states.
        state: state.parse().unwrap_or(State::Received),
        rsp_code: r.try_get(3)?,
        request: r.try_get(4)?,
        response: r.try_get(5)?,
        attempts: Some(r.try_get::<_, i32>(6)?.into()),
        updated_at: r.try_get(7)?,
    })
}

fn int(n: u64) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

fn attempts(n: i64) -> i32 {
    i32::try_from(n).unwrap_or(if n < 0 { i32::MIN } else { i32::MAX })
}

fn limit(n: Option<u64>) -> Option<i64> {
    n.map(|l| i64::try_from(l).unwrap_or(i64::MAX))
}

impl Store for PgStore {
    fn read(&self, guid: &str) -> Result<Option<Row>> {
        let sql = select!("WHERE guid = $1");
        Ok(self
            .rows("reading a row", sql, params![guid.to_string()])?
            .pop())
    }

    fn claim_new(&self, guid: &str, tx_code: &str, request: &[u8]) -> Result<bool> {
        let p = params![guid.to_string(), tx_code.to_string(), request.to_vec()];
        let won = self.claim("claiming", move |c| {
            let st = c.prepared(CLAIM_NEW)?;
            Ok((c.client.execute(&st, &p.refs())? == 1).then_some(()))
        })?;
        Ok(won.is_some())
    }

    fn reclaim_failed(&self, guid: &str, request: &[u8]) -> Result<Option<i64>> {
        let p = params![guid.to_string(), request.to_vec()];
        self.claim_returning("re-claiming", RECLAIM_FAILED, p)
    }

    fn reclaim_for_resend(&self, guid: &str, max_attempts: i64) -> Result<Option<i64>> {
        let p = params![guid.to_string(), attempts(max_attempts)];
        self.claim_returning("re-claiming", RECLAIM_FOR_RESEND, p)
    }

    fn transition(&self, c: &Change) -> Result<bool> {
        let p = params![
            c.guid.clone(),
            c.from.as_str(),
            c.to.as_str(),
            c.code_str().to_string(),
            c.response.clone(),
            c.attempt.map(attempts),
            c.min_age_secs.map(|s| s as f64),
        ];
        let n = if c.who.is_none() && c.reason.is_none() {
            self.execute("recording a result", TRANSITION, p)?
        } else {
            let (who, why) = (c.who.clone(), c.reason.clone());
            self.execute_as("recording a result", who, why, TRANSITION, p)?
        };
        Ok(n == 1)
    }

    fn select_aged(&self, state: State, min_age_secs: u64) -> Result<Vec<Row>> {
        let sql = select!(
            "WHERE state = $1 AND updated_at <= now() - make_interval(secs => $2) \
             ORDER BY updated_at, guid"
        );
        self.rows(
            "selecting rows",
            sql,
            params![state.as_str(), min_age_secs as f64],
        )
    }

    fn select_resendable(&self, max_attempts: i64, lim: Option<u64>) -> Result<Vec<Row>> {
        let sql = select!(
            "WHERE state = 'FAILED' AND rsp_code = 'E902' AND attempts < $1 \
             ORDER BY updated_at, guid LIMIT $2"
        );
        self.rows(
            "selecting rows",
            sql,
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
            let st = c.prepared(RECORD_INQUIRY_FAILURE)?;
            record(&c.client.query_one(&st, &p.refs())?)
        })
    }

    fn clear_inquiry(&self, guid: &str) -> Result<bool> {
        let p = params![guid.to_string()];
        Ok(self.execute("clearing failed inquiries", CLEAR_INQUIRY, p)? == 1)
    }

    fn prune_inquiries(&self) -> Result<usize> {
        let n = self.execute("pruning failed inquiries", PRUNE_INQUIRIES, params![])?;
        Ok(usize::try_from(n).unwrap_or(usize::MAX))
    }

    fn needs_operator(&self, max_inquiries: u32) -> Result<Vec<InquiryRecord>> {
        let max = i32::try_from(max_inquiries).unwrap_or(i32::MAX);
        self.records(NEEDS_OPERATOR, params![max])
    }

    fn inquiry_records(&self) -> Result<Vec<InquiryRecord>> {
        self.records(INQUIRY_RECORDS, params![])
    }

    fn select_purgeable(&self, days: u64) -> Result<Vec<Row>> {
        let sql = select!(
            "WHERE state = 'DONE' AND updated_at < now() - make_interval(days => $1) \
             ORDER BY updated_at, guid"
        );
        self.rows("selecting rows", sql, params![int(days)])
    }

    fn purge_chunk(&self, days: u64, lim: usize) -> Result<usize> {
        let p = params![int(days), i64::try_from(lim).unwrap_or(i64::MAX)];
        let why = Some(format!("retention {days} days"));
        let n = self.execute_as("purging", None, why, PURGE_CHUNK, p)?;
        Ok(usize::try_from(n).unwrap_or(usize::MAX))
    }

    fn recent_bookings(&self, lim: usize) -> Result<Vec<Row>> {
        let sql = select!(
            "WHERE state = 'DONE' AND rsp_code = '0000' \
             ORDER BY updated_at DESC, guid DESC LIMIT $1"
        );
        self.rows(
            "selecting rows",
            sql,
            params![i64::try_from(lim).unwrap_or(i64::MAX)],
        )
    }

    fn all_rows(&self) -> Result<Vec<Row>> {
        self.rows(
            "reading the ledger",
            select!("ORDER BY updated_at, guid"),
            params![],
        )
    }

    fn count_by_state(&self) -> Result<Vec<(State, i64)>> {
        self.pool.run("counting rows", |c| {
            let st = c.prepared("SELECT state, count(*) FROM tx GROUP BY state ORDER BY state")?;
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
        crate::sqlite::health_read_back(at)
    }

    fn claims_first(&self) -> bool {
        true
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
                    })
                })
                .collect()
        })
    }

    fn record_evidence(&self, e: &Evidence) -> Result<()> {
        let (guid, code, attempt, reason) = (
            e.guid.clone(),
            e.rsp_code.clone(),
            attempts(e.attempt),
            e.reason.clone(),
        );
        self.pool.run("recording evidence", move |c| {
            let st = c.prepared(RECORD_EVIDENCE)?;
            let who = c.who.clone();
            c.client
                .execute(&st, &[&guid, &code, &attempt, &who, &reason])
                .map(|_| ())
        })
    }

    fn purge_history_chunk(&self, days: u64, tx_days: u64, lim: usize) -> Result<usize> {
        let p = params![
            int(days),
            i64::try_from(lim).unwrap_or(i64::MAX),
            int(tx_days)
        ];
        let n = self.execute("purging history", PURGE_HISTORY_CHUNK, p)?;
        Ok(usize::try_from(n).unwrap_or(usize::MAX))
    }

    /// The setting of every connection the pool may hold (opened at once if need be).
    fn durability(&self) -> Result<Vec<Durability>> {
        self.pool.durability_of_all()
    }
}
