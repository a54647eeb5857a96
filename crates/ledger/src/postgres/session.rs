//! A new session's settings: durable commits, the server-side timeouts, read-only if asked,
//! and how its statements are planned.

use postgres::Client;

use super::pool::{PgConn, Plans, Settings, timeouts};
use super::sync_wait::Watch;
use crate::error::{LedgerError, Result};
use crate::store::{DURABLE_COMMIT, Durability};

/// A new session: commits durable whatever the role, the database or the server says
/// (`synchronous_commit` set to `on` unless it is one of `DURABLE_COMMIT` already, then read
/// back and checked), server-side timeouts as a backstop to ours, read-only if asked, and
/// its statements planned as `plans` says.
///
/// `Plans::Custom` (`plan_cache_mode = force_custom_plan`): the session's prepared
/// statements are planned for each execution, with its parameters and the table as it is
/// then. PostgreSQL's default may settle, after five executions, on one generic plan for
/// the life of the session, made for the table as it was: on a new ledger (a few rows) that
/// plan finds a result's row by scanning the whole `tx` table, and keeps doing so as the
/// table grows, until autovacuum's next ANALYZE.
///
/// `Plans::GenericByKey` (`force_generic_plan` and `enable_seqscan = off`): planning a batch
/// statement cost more than running it (about 0.1 ms of the server's CPU per statement here,
/// see docs/performance.md), so the batch writers' sessions plan each statement once. Such a
/// plan is made for whatever the table was then, and is safe only because no plan of those
/// statements can read more of `tx` than the rows it names: the claim's insert finds its
/// conflicts through the primary key, the result's update names its rows in
/// `tx.guid = ANY($1)`, which leaves the planner the primary key (or a bitmap of it) as
/// the only way into `tx` once sequential scans are ruled out.
pub(super) fn set_up(
    mut client: Client,
    s: &Settings,
    plans: Plans,
    watch: Watch,
) -> Result<PgConn> {
    let mut sql = timeouts(s.op_deadline);
    sql.push_str("SET client_min_messages = warning;");
    sql.push_str(match plans {
        Plans::Custom => "SET plan_cache_mode = force_custom_plan;",
        Plans::GenericByKey => {
            "SET plan_cache_mode = force_generic_plan; SET enable_seqscan = off;"
        }
    });
    if s.read_only {
        sql.push_str("SET default_transaction_read_only = on;");
    }
    client.batch_execute(&sql).map_err(LedgerError::Pg)?;
    client
        .execute("SELECT set_config('txrelay.who', $1, false)", &[&s.who])
        .map_err(LedgerError::Pg)?;
    let show = |c: &mut Client| -> Result<String> {
        c.query_one("SHOW synchronous_commit", &[])
            .and_then(|r| r.try_get::<_, String>(0))
            .map_err(LedgerError::Pg)
    };
    let mut sync = show(&mut client)?;
    if !DURABLE_COMMIT.contains(&sync.as_str()) {
        client
            .batch_execute("SET synchronous_commit = on")
            .map_err(LedgerError::Pg)?;
        sync = show(&mut client)?;
    }
    Ok(PgConn::new(client, durable(sync)?, s.who.clone(), watch))
}

/// The session's durability as `synchronous_commit` was read back, refused unless durable.
fn durable(synchronous_commit: String) -> Result<Durability> {
    let durability = Durability::Postgres { synchronous_commit };
    if !durability.is_durable() {
        return Err(LedgerError::NotDurable(format!("{durability:?}")));
    }
    Ok(durability)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a session reads back after the SET: `on` and `remote_apply` serve, anything
    /// else (a server that ignored the SET) is refused.
    #[test]
    fn only_on_and_remote_apply_are_durable() {
        for ok in ["on", "remote_apply"] {
            assert!(durable(ok.into()).is_ok(), "{ok}");
        }
        for weak in ["off", "local", "remote_write", "ON", ""] {
            let e = durable(weak.into()).expect_err(weak);
            assert!(matches!(e, LedgerError::NotDurable(_)), "{weak}: {e:?}");
            assert!(e.to_string().contains("would not be durable"), "{e}");
        }
    }
}
