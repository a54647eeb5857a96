//! The PostgreSQL ledger's schema: applied once per version, under an advisory lock, by
//! whichever tool or relay opens the ledger first.

use std::time::Duration;

use super::pool::{self, PgConn};

/// The schema, built into every binary.
pub const SCHEMA: &str = include_str!("../../../../schema.postgres.sql");

/// Tools starting together take this advisory lock to apply the schema one at a time.
pub const SCHEMA_LOCK: i64 = 0x7478_7265_6c61_7900; // "txrelay"

/// Bumped whenever `SCHEMA` changes; the table `ledger_schema` records what a ledger has
/// seen (the tools apply the schema only when it says less). 2: `TRUNCATE tx` refused; 3:
/// `tx.channel` and `tx_history.channel` (contract §8), recorded by the history trigger; 4:
/// the history written by statement-level triggers with transition tables (one `INSERT …
/// SELECT` per statement, however many rows it changed) in place of the row trigger; 5:
/// `ledger_recovery` and `ledger_events` (contract §11); 6: `settle_request` and its trigger
/// (contract §12, dual control).
pub(super) const SCHEMA_VERSION: i32 = 6;

/// The schema version a ledger records (0: none yet).
pub(super) fn schema_version(
    c: &mut postgres::Client,
) -> std::result::Result<i32, postgres::Error> {
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
pub(super) const SCHEMA_DEADLINE: Duration = Duration::from_secs(30);

/// Applies the schema under the advisory lock, unless another tool did while this one
/// waited for it; in one transaction with the version it records. The version it upgraded
/// from, if it did.
fn apply_schema(c: &mut postgres::Client) -> std::result::Result<Option<i32>, postgres::Error> {
    c.execute("SELECT pg_advisory_lock($1)", &[&SCHEMA_LOCK])?;
    let applied = (|| {
        let from = schema_version(c)?;
        if from >= SCHEMA_VERSION {
            return Ok(None);
        }
        let mut t = c.transaction()?;
        t.batch_execute(SCHEMA)?;
        t.batch_execute(&format!(
            "CREATE TABLE IF NOT EXISTS ledger_schema (version INTEGER NOT NULL); \
             INSERT INTO ledger_schema (version) VALUES ({SCHEMA_VERSION})"
        ))?;
        t.commit().map(|()| Some(from))
    })();
    let unlocked = c.execute("SELECT pg_advisory_unlock($1)", &[&SCHEMA_LOCK]);
    unlocked.and(applied)
}

/// Brings the ledger's schema up to date on `c`, unless it is already; the version it
/// upgraded from, if it did. (A ledger newer than `SCHEMA_VERSION` is left as it is: the
/// caller refuses it.)
pub(super) fn bring_up_to_date(
    c: &mut PgConn,
    op_deadline: Duration,
) -> std::result::Result<Option<i32>, postgres::Error> {
    // Applied once per schema version: DDL on a ledger in use would queue behind any open
    // write transaction (CREATE INDEX IF NOT EXISTS takes a table lock even when the index
    // exists) and hold every claim back.
    if schema_version(&mut c.client)? >= SCHEMA_VERSION {
        return Ok(None);
    }
    // Waiting for the lock and applying may take as long as the deadline allows; then the
    // session gets the pool's own timeouts back.
    c.client.batch_execute(&pool::timeouts(SCHEMA_DEADLINE))?;
    let applied = apply_schema(&mut c.client);
    let restored = c.client.batch_execute(&pool::timeouts(op_deadline));
    restored.and(applied)
}
