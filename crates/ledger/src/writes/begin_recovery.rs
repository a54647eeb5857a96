//! Recovery mode (contract §11): marks the ledger recovering since an instant, with the
//! ledger's event saying who and why, together. A mark already there keeps the earlier
//! `since`: the ledger may have forgotten claims since whichever instant is older.

use crate::error::Result;
use crate::postgres::PgStore;
use crate::postgres::recovery::mark as pg_mark;
use crate::postgres::utc;
use crate::recovery::{Recovery, stored_since};
use crate::sqlite::recovery::mark;
use crate::sqlite::{Hold, Ledger};
use crate::writes::record_ledger_event::SQLITE as SQLITE_EVENT;

/// With the event (`SQLITE_EVENT`), in one transaction.
const SQLITE: &str = "\
    INSERT INTO ledger_recovery (id, since, who, at) \
    VALUES (1, ?1, ?2, strftime('%Y-%m-%dT%H:%M:%SZ', 'now')) \
    ON CONFLICT (id) DO UPDATE SET since = min(since, excluded.since), who = excluded.who, \
        at = excluded.at \
    RETURNING since, who, at";

/// The mark and its event, one statement (a data-modifying WITH).
const POSTGRES: &str = concat!(
    "WITH m AS (INSERT INTO ledger_recovery (id, since, who, at) \
         VALUES (1, $1::text::timestamptz, $2, now()) \
         ON CONFLICT (id) DO UPDATE SET since = least(ledger_recovery.since, excluded.since), \
             who = excluded.who, at = excluded.at \
         RETURNING since, who, at), \
     e AS (INSERT INTO ledger_events (who, event, detail) \
         SELECT $2, 'recovery begun', 'recovering since ' || ",
    utc!("m.since"),
    " || ': ' || $3::text FROM m) \
     SELECT ",
    utc!("since"),
    ", who, ",
    utc!("at"),
    " FROM m"
);

pub trait BeginRecovery {
    /// Marks the ledger recovering since `since` (RFC 3339 UTC; an older mark's `since` is
    /// kept), recording `who` and `detail` in the ledger's events; the mark as it now is.
    fn begin_recovery(&self, since: &str, who: &str, detail: &str) -> Result<Recovery>;
}

impl Ledger {
    /// Marks the ledger recovering since `since` (RFC 3339 UTC; an earlier mark's `since` is
    /// kept if older), and records who did it and why in the ledger's events, in one
    /// transaction.
    pub fn begin_recovery(&self, since: &str, who: &str, detail: &str) -> Result<Recovery> {
        let since = stored_since(since)?;
        self.in_transaction(|| {
            let m = self
                .conn
                .prepare_cached(SQLITE)?
                .query_row(rusqlite::params![since, who], mark)?;
            self.conn
                .prepare_cached(SQLITE_EVENT)?
                .execute(rusqlite::params![
                    who,
                    "recovery begun",
                    format!("recovering since {}: {detail}", m.since)
                ])?;
            Ok(m)
        })
    }
}

impl<H: Hold> BeginRecovery for H {
    fn begin_recovery(&self, since: &str, who: &str, detail: &str) -> Result<Recovery> {
        let (since, who, detail) = (since.to_string(), who.to_string(), detail.to_string());
        self.write_with(move |l| l.begin_recovery(&since, &who, &detail))
    }
}

impl BeginRecovery for PgStore {
    fn begin_recovery(&self, since: &str, who: &str, detail: &str) -> Result<Recovery> {
        let since = stored_since(since)?;
        let (who, detail) = (who.to_string(), detail.to_string());
        self.pool.run("marking the ledger recovering", move |c| {
            let st = c.prepared(POSTGRES)?;
            pg_mark(&c.client.query_one(&st, &[&since, &who, &detail])?)
        })
    }
}
