//! The PostgreSQL ledger's reads and its own statements (the health probe, the actor, a
//! copied row), the same as SQLite's (`sqlite::sql`); ages against the server's clock. The
//! writes, each with its SQLite twin, are in `crate::writes`.

/// A row's columns, `updated_at` in SQLite's text form (UTC, `YYYY-MM-DD HH:MM:SS`).
macro_rules! select {
    ($rest:literal) => {
        concat!(
            "SELECT guid, tx_code, state, rsp_code, request, response, attempts, \
             to_char(updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS'), channel FROM tx ",
            $rest
        )
    };
}

pub(super) const READ: &str = select!("WHERE guid = $1");
pub(super) const SELECT_RESENDABLE: &str = select!(
    "WHERE state = 'FAILED' AND rsp_code = 'E902' AND attempts < $1 \
     ORDER BY updated_at, guid LIMIT $2"
);
pub(super) const SELECT_PURGEABLE: &str = select!(
    "WHERE state = 'DONE' AND updated_at < now() - make_interval(days => $1) \
     ORDER BY updated_at, guid"
);
pub(super) const RECENT_BOOKINGS: &str = select!(
    "WHERE state = 'DONE' AND rsp_code = '0000' \
     ORDER BY updated_at DESC, guid DESC LIMIT $1"
);
pub(super) const ALL_ROWS: &str = select!("ORDER BY updated_at, guid");
pub(super) const COUNT_BY_STATE: &str =
    "SELECT state, count(*) FROM tx GROUP BY state ORDER BY state";
/// Who and why, for the history trigger, for this transaction only.
/// Every row a multi-round batch of results will change, locked first, in GUID order.
pub(super) const LOCK_ROWS: &str = "SELECT 1 FROM tx WHERE guid = ANY($1) ORDER BY guid FOR UPDATE";
pub(super) const ACTOR: &str = "SELECT set_config('txrelay.who', $1, true), \
    set_config('txrelay.reason', coalesce($2, ''), true)";
pub(super) const COPY_ROW: &str = "\
    INSERT INTO tx (guid, tx_code, state, rsp_code, request, response, attempts, updated_at, \
                    channel) \
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8::text::timestamp AT TIME ZONE 'UTC', $9) \
    ON CONFLICT (guid) DO NOTHING";
pub(super) const HISTORY: &str = "\
    SELECT id, guid, from_state, to_state, rsp_code, attempts, \
    to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.MS'), who, reason, channel \
    FROM tx_history WHERE guid = $1 ORDER BY id";
/// `/healthz`'s probe of the claim path (see the SQLite twin): always rolled back.
pub(super) const HEALTH_PROBE: &str = "\
    INSERT INTO tx (guid, tx_code, state, request, attempts, updated_at) \
    VALUES ($1, 'TRNF', 'SENT', ''::bytea, 1, now())";
pub(super) const TOUCH_HEALTH: &str = "\
    INSERT INTO relay_health (id, at) VALUES (1, now()) \
    ON CONFLICT (id) DO UPDATE SET at = excluded.at";
pub(super) const READ_HEALTH: &str = "\
    SELECT to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS') FROM relay_health WHERE id = 1";
pub(super) const OLDEST_AGE: &str = "\
    SELECT extract(epoch FROM now() - min(updated_at))::float8 FROM tx WHERE state = $1";

pub(super) const SELECT_DUE: &str = "\
    SELECT tx.guid, tx.tx_code, tx.state, tx.rsp_code, tx.request, tx.response, tx.attempts, \
        to_char(tx.updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS'), tx.channel \
    FROM tx LEFT JOIN tx_inquiry i ON i.guid = tx.guid \
    WHERE tx.state = $1 AND tx.updated_at <= now() - make_interval(secs => $2) \
    AND (i.guid IS NULL OR (i.failures < $3 AND i.next_at <= now())) \
    ORDER BY tx.updated_at, tx.guid";
pub(super) const NEEDS_OPERATOR: &str = "\
    SELECT i.guid, i.failures, i.last_error, \
        to_char(i.next_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS') \
    FROM tx_inquiry i JOIN tx ON tx.guid = i.guid \
    WHERE i.failures >= $1 AND tx.state IN ('UNKNOWN', 'SENT') ORDER BY i.guid";
/// `inspect` opens a ledger as it is: the side table may not exist yet.
pub(super) const HAS_INQUIRY_TABLE: &str = "SELECT to_regclass('tx_inquiry') IS NOT NULL";
