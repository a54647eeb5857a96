//! The PostgreSQL ledger's schema: applied once per version, under an advisory lock, by
//! whichever tool or relay opens the ledger first. Its versions are a list, as the SQLite
//! ledger's are (`sqlite::migrations`): `STEPS[v - 1]` is the SQL that version `v` added,
//! frozen once shipped (`migrations/vN.sql`), each harmless when run twice. A ledger older
//! than the tools gets its missing steps and then schema.postgres.sql, in one transaction; a
//! new one gets schema.postgres.sql alone; [`create_at_version`] rebuilds any old schema for
//! the tests of upgrades. A test holds the steps from an empty database equal to the schema.

use std::time::Duration;

use super::pool::{self, PgConn};

/// The schema, built into every binary.
pub const SCHEMA: &str = include_str!("../../../../schema.postgres.sql");

/// Tools starting together take this advisory lock to apply the schema one at a time.
pub const SCHEMA_LOCK: i64 = 0x7478_7265_6c61_7900; // "txrelay"

/// Version by version, what the tools added to the schema.
const STEPS: [&str; 7] = [
    include_str!("migrations/v1.sql"),
    include_str!("migrations/v2.sql"),
    include_str!("migrations/v3.sql"),
    include_str!("migrations/v4.sql"),
    include_str!("migrations/v5.sql"),
    include_str!("migrations/v6.sql"),
    include_str!("migrations/v7.sql"),
];

/// The schema version of these tools, which the table `ledger_schema` records (the tools apply
/// the schema only when it says less): the number of steps.
pub const SCHEMA_VERSION: i32 = STEPS.len() as i32;

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
/// from, if it upgraded a ledger (not if it created one).
fn apply_schema(c: &mut postgres::Client) -> std::result::Result<Option<i32>, postgres::Error> {
    c.execute("SELECT pg_advisory_lock($1)", &[&SCHEMA_LOCK])?;
    let applied = (|| {
        let from = schema_version(c)?;
        if from >= SCHEMA_VERSION {
            return Ok(None);
        }
        let mut t = c.transaction()?;
        // Version 0 with no `tx` table: a new ledger, created rather than upgraded.
        let created = from == 0
            && !t
                .query_one("SELECT to_regclass('tx') IS NOT NULL", &[])?
                .get::<_, bool>(0);
        if !created {
            // The strongest lock first, as the old one-script upgrade took it (its ALTER
            // TABLE): a step's CREATE INDEX would otherwise take SHARE and a later ALTER
            // upgrade it, which can deadlock with a session that read tx and then writes.
            t.batch_execute("LOCK TABLE tx IN ACCESS EXCLUSIVE MODE")?;
            run_steps(&mut t, from, SCHEMA_VERSION)?;
        }
        t.batch_execute(SCHEMA)?;
        record_version(&mut t, SCHEMA_VERSION)?;
        t.commit().map(|()| (!created).then_some(from))
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

/// Gives an empty database the schema that version `version` of the tools made (0: none), as
/// it was: any old ledger, for a test of its upgrade. Not for a ledger in use.
///
/// # Panics
/// If `version` is not one of `0..=SCHEMA_VERSION`.
pub fn create_at_version(
    c: &mut postgres::Client,
    version: i32,
) -> std::result::Result<(), postgres::Error> {
    assert!(
        (0..=SCHEMA_VERSION).contains(&version),
        "no schema version {version}"
    );
    let mut t = c.transaction()?;
    run_steps(&mut t, 0, version)?;
    if version > 0 {
        record_version(&mut t, version)?;
    }
    t.commit()
}

/// Runs the steps to versions `from + 1 ..= to`, in order.
fn run_steps(
    t: &mut postgres::Transaction<'_>,
    from: i32,
    to: i32,
) -> std::result::Result<(), postgres::Error> {
    for step in &STEPS[from as usize..to as usize] {
        t.batch_execute(step)?;
    }
    Ok(())
}

fn record_version(
    t: &mut postgres::Transaction<'_>,
    version: i32,
) -> std::result::Result<(), postgres::Error> {
    t.batch_execute(&format!(
        "CREATE TABLE IF NOT EXISTS ledger_schema (version INTEGER NOT NULL); \
         INSERT INTO ledger_schema (version) VALUES ({version})"
    ))
}
