//! The recovery mark and the ledger's own events on PostgreSQL (see `crate::recovery`): each
//! change one statement (the mark and its event written together by one data-modifying WITH).

use super::{PgStore, params};
use crate::error::Result;
use crate::recovery::{Booked, LedgerEvent, Recovery};

const MARK: &str = concat!(
    "SELECT ",
    utc!("since"),
    ", who, ",
    utc!("at"),
    " FROM ledger_recovery WHERE id = 1"
);
/// A mark already there keeps the earlier `since`.
const BEGIN: &str = concat!(
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
const END: &str = concat!(
    "WITH m AS (DELETE FROM ledger_recovery WHERE id = 1 RETURNING since, who, at), \
     e AS (INSERT INTO ledger_events (who, event, detail) \
         SELECT $1, 'recovery ended', 'had been recovering since ' || ",
    utc!("m.since"),
    " || ': ' || $2::text FROM m) \
     SELECT ",
    utc!("since"),
    ", who, ",
    utc!("at"),
    " FROM m"
);
const EVENTS: &str = concat!(
    "SELECT ",
    utc!("at"),
    ", who || CASE WHEN who = db_user THEN '' ELSE ' (database role ' || db_user || ')' END, \
     event, detail FROM (SELECT * FROM ledger_events ORDER BY id DESC LIMIT $1) e ORDER BY id"
);
const EVENT: &str = "INSERT INTO ledger_events (who, event, detail) VALUES ($1, $2, $3)";
/// A booking the core reports, written DONE/`0000` for a GUID without a row, never sent by
/// us (attempts 0).
const RECORD_BOOKED: &str = "\
    INSERT INTO tx (guid, tx_code, state, rsp_code, request, response, attempts, updated_at, \
                    channel) \
    VALUES ($1, $2, 'DONE', '0000', $3, $4, 0, now(), $5) \
    ON CONFLICT (guid) DO NOTHING";

fn mark(r: &postgres::Row) -> std::result::Result<Recovery, postgres::Error> {
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

    pub(super) fn begin_recovery_mark(
        &self,
        since: &str,
        who: &str,
        detail: &str,
    ) -> Result<Recovery> {
        let since = crate::recovery::stored_since(since)?;
        let (who, detail) = (who.to_string(), detail.to_string());
        self.pool.run("marking the ledger recovering", move |c| {
            let st = c.prepared(BEGIN)?;
            mark(&c.client.query_one(&st, &[&since, &who, &detail])?)
        })
    }

    pub(super) fn end_recovery_mark(&self, who: &str, detail: &str) -> Result<Option<Recovery>> {
        let (who, detail) = (who.to_string(), detail.to_string());
        self.pool.run("ending recovery", move |c| {
            let st = c.prepared(END)?;
            c.client
                .query_opt(&st, &[&who, &detail])?
                .as_ref()
                .map(mark)
                .transpose()
        })
    }

    pub(super) fn write_event(&self, who: &str, event: &str, detail: &str) -> Result<()> {
        let p = params![who.to_string(), event.to_string(), detail.to_string()];
        self.execute("recording a ledger event", EVENT, p)
            .map(|_| ())
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

    pub(super) fn write_booked(&self, b: &Booked) -> Result<bool> {
        let p = params![
            b.guid.clone(),
            b.tx_code.clone(),
            b.request.clone(),
            b.response.clone(),
            b.channel.clone()
        ];
        let n = self.execute_as(
            "writing a booking",
            b.who.clone(),
            Some(b.reason.clone()),
            RECORD_BOOKED,
            p,
        )?;
        Ok(n == 1)
    }
}
