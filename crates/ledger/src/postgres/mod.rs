//! The PostgreSQL ledger (contract §7): the same statements and the same rules as SQLite's
//! (`sqlite`), for several relays and tools sharing one ledger. Every transition is one
//! autocommitted statement whose WHERE names the state it leaves; its row count decides.
//! Ages are compared against the server's clock. `sql` holds the reads (the writes, each with
//! its SQLite twin, are `crate::writes`), `claims`, `results` and `reclaims` the group commit
//! of the relay's writes, `schema` how the schema is applied, `store` the `Store` that runs
//! the reads on the pool.

/// An instant as the ledger shows it: RFC 3339, UTC, to the second.
macro_rules! utc {
    ($col:literal) => {
        concat!(
            "to_char(",
            $col,
            " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')"
        )
    };
}
pub(crate) use utc;

mod batch;
pub(crate) mod claims;
mod hosts;
mod page;
mod pool;
pub(crate) mod reclaims;
mod reconcile;
pub(crate) mod recovery;
pub(crate) mod results;
mod schema;
mod session;
mod settle_request;
mod sql;
mod store;
mod sync_wait;
mod tls;
pub mod url;

use std::sync::Arc;
use std::time::Instant;

use postgres::types::ToSql;

pub use pool::Settings;
use pool::{Plans, Pool};
pub use schema::{SCHEMA, SCHEMA_LOCK, SCHEMA_VERSION, create_at_version};
use sql::{ACTOR, COPY_ROW, HAS_INQUIRY_TABLE};
pub use url::{PgUrl, is_pg_url};

use crate::error::{LedgerError, Result};
use crate::state::{Row, State};
use crate::store::InquiryRecord;

/// Owned statement parameters, moved to the connection's thread.
pub(crate) struct Params(pub(crate) Vec<Box<dyn ToSql + Sync + Send>>);

impl Params {
    pub(crate) fn refs(&self) -> Vec<&(dyn ToSql + Sync)> {
        self.0
            .iter()
            .map(|p| p.as_ref() as &(dyn ToSql + Sync))
            .collect()
    }
}

macro_rules! params {
    ($($p:expr),* $(,)?) => {
        $crate::postgres::Params(vec![
            $(Box::new($p) as Box<dyn ::postgres::types::ToSql + Sync + Send>),*
        ])
    };
}
pub(crate) use params;

/// The ledger on a PostgreSQL server.
pub struct PgStore {
    pub(crate) pool: Arc<Pool>,
    url: PgUrl,
    /// Claims of new GUIDs, results and re-claims, each group-committed (`batch`); none when
    /// read-only.
    writes: Option<Writes>,
}

/// The writer threads of a store that writes.
struct Writes {
    claims: batch::Batcher<claims::Claim, bool>,
    results: batch::Batcher<crate::state::Change, bool>,
    reclaims: batch::Batcher<reclaims::Reclaim, Option<i64>>,
}

/// Writer threads per kind of write: while one commits, the next batch gathers in another.
const WRITERS: usize = 2;

impl Writes {
    /// Claims and results on a pool of their own, `writing` (`Plans::GenericByKey`: each of
    /// its sessions plans the two statements once); re-claims, rare, on the store's `pool`.
    fn start(pool: &Arc<Pool>, writing: Pool) -> Result<Writes> {
        let writing = Arc::new(writing);
        let (p, q, r) = (Arc::clone(&writing), writing, Arc::clone(pool));
        Ok(Writes {
            claims: batch::Batcher::start("ledger-pg-claims", "claiming", WRITERS, move |b| {
                claims::run(&p, b)
            })?,
            results: batch::Batcher::start(
                "ledger-pg-results",
                "recording a result",
                WRITERS,
                move |b| results::run(&q, b),
            )?,
            // Rare on the relay (a resend of a FAILED GUID); reprocess --parallel's path.
            reclaims: batch::Batcher::start("ledger-pg-reclaims", "re-claiming", 1, move |b| {
                reclaims::run(&r, b)
            })?,
        })
    }
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
        // One connection per writer thread of claims and of results, taken from the
        // `settings.max` the store may open in all (a read-only store writes nothing).
        let writers = if read_only { 0 } else { 2 * WRITERS };
        let writing = Settings {
            max: writers,
            ..settings.clone()
        };
        let writing = Pool::new(url.clone(), tls.clone(), writing, Plans::GenericByKey);
        let rest = Settings {
            max: settings.max.saturating_sub(writers).max(1),
            ..settings
        };
        let mut store = PgStore {
            pool: Arc::new(Pool::new(url.clone(), tls, rest, Plans::Custom)),
            url,
            writes: None,
        };
        let v = store
            .pool
            .run("connecting", |c| schema::schema_version(&mut c.client))
            .map_err(|e| store.open_error(e))?;
        if v > schema::SCHEMA_VERSION {
            return Err(LedgerError::NewerSchema {
                ledger: store.url.to_string(),
                found: v.into(),
                known: schema::SCHEMA_VERSION.into(),
            });
        }
        if read_only {
            // Read as it is, never upgraded: a ledger older than the columns we read is
            // refused with the reason (any other tool's start upgrades it).
            if (1..schema::SCHEMA_VERSION).contains(&v) {
                return Err(LedgerError::PgOpen {
                    url: store.url.to_string(),
                    why: format!(
                        "its schema is version {v}, older than this tool reads ({}); a \
                         read-only tool never upgrades a ledger: start the relay (or run \
                         resolve or purge) of this version once, which upgrades it in place",
                        schema::SCHEMA_VERSION
                    ),
                });
            }
        } else {
            let op_deadline = store.pool.op_deadline();
            let upgraded = store
                .pool
                .run_by(
                    "applying the schema",
                    Instant::now() + schema::SCHEMA_DEADLINE,
                    move |c| schema::bring_up_to_date(c, op_deadline),
                )
                .map_err(|e| store.open_error(e))?;
            // None: up to date already, or a new ledger, created rather than upgraded.
            if let Some(from) = upgraded {
                log::info!(
                    "ledger {}: schema upgraded from version {from} to {}",
                    store.url,
                    schema::SCHEMA_VERSION
                );
            }
            store.writes = Some(Writes::start(&store.pool, writing)?);
        }
        Ok(store)
    }

    /// The store's group-committed writes; a read-only store has none.
    fn writes(&self) -> Result<&Writes> {
        self.writes
            .as_ref()
            .ok_or_else(|| LedgerError::Unavailable("this tool opened the ledger read-only".into()))
    }

    /// A claim of a new GUID, group-committed with the others waiting (`claims`).
    pub(crate) fn claim(&self, c: claims::Claim) -> Result<bool> {
        self.writes()?.claims.submit(c, self.pool.deadline())
    }

    /// A re-claim, group-committed with the others waiting (`reclaims`).
    pub(crate) fn reclaim(&self, r: reclaims::Reclaim) -> Result<Option<i64>> {
        self.writes()?.reclaims.submit(r, self.pool.deadline())
    }

    /// A guarded transition, group-committed with the others waiting (`results`).
    pub(crate) fn change(&self, c: crate::state::Change) -> Result<bool> {
        self.writes()?.results.submit(c, self.pool.deadline())
    }

    /// `e`, met while opening, as the error that names the ledger.
    fn open_error(&self, e: impl std::fmt::Display) -> LedgerError {
        LedgerError::PgOpen {
            url: self.url.to_string(),
            why: e.to_string(),
        }
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
            r.channel.clone(),
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
    pub(crate) fn execute(
        &self,
        what: &'static str,
        sql: &'static str,
        params: Params,
    ) -> Result<u64> {
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
    pub(crate) fn execute_as(
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
}

pub(crate) fn record(r: &postgres::Row) -> std::result::Result<InquiryRecord, postgres::Error> {
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
        channel: r.try_get(8)?,
    })
}

pub(crate) fn int(n: u64) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

pub(crate) fn attempts(n: i64) -> i32 {
    i32::try_from(n).unwrap_or(if n < 0 { i32::MIN } else { i32::MAX })
}

fn limit(n: Option<u64>) -> Option<i64> {
    n.map(|l| i64::try_from(l).unwrap_or(i64::MAX))
}
