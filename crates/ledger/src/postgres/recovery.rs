//! The recovery mark and the ledger's own events on PostgreSQL (see `crate::recovery`), as
//! they are read; the writes (recovery begun and ended, a booking, an event) are in
//! `crate::writes`.

use super::PgStore;
use crate::error::Result;
use crate::recovery::{LedgerEvent, Recovery};

const MARK: &str = concat!(
    "SELECT ",
    utc!("since"),
    ", who, ",
    utc!("at"),
    " FROM ledger_recovery WHERE id = 1"
);
const EVENTS: &str = concat!(
    "SELECT ",
    utc!("at"),
    ", who || CASE WHEN who = db_user THEN '' ELSE ' (database role ' || db_user || ')' END, \
     event, detail FROM (SELECT * FROM ledger_events ORDER BY id DESC LIMIT $1) e ORDER BY id"
);

pub(crate) fn mark(r: &postgres::Row) -> std::result::Result<Recovery, postgres::Error> {
    Ok(Recovery {
        since: r.try_get(0)?,
        who: r.try_get(1)?,
        at: r.try_get(2)?,
    })
}

impl PgStore {
    pub(super) fn recovery_mark(&self) -> Result<Option<Recovery>> {
        self.pool.run("reading the recovery mark", |c| {
            let st = c.prepared(MARK)?;
            c.client.query_opt(&st, &[])?.as_ref().map(mark).transpose()
        })
    }

    pub(super) fn events(&self, limit: u64) -> Result<Vec<LedgerEvent>> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.pool.run("reading the ledger's events", move |c| {
            let st = c.prepared(EVENTS)?;
            c.client
                .query(&st, &[&limit])?
                .iter()
                .map(|r| {
                    Ok(LedgerEvent {
                        at: r.try_get(0)?,
                        who: r.try_get(1)?,
                        event: r.try_get(2)?,
                        detail: r.try_get(3)?,
                    })
                })
                .collect()
        })
    }
}
