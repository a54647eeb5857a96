//! The PostgreSQL ledger's SQL, the same statements as SQLite's (`sqlite::sql`): each
//! transition names in its WHERE the state it leaves; ages against the server's clock.

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
pub(super) const SELECT_AGED: &str = select!(
    "WHERE state = $1 AND updated_at <= now() - make_interval(secs => $2) \
     ORDER BY updated_at, guid"
);
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
/// Claims of new GUIDs, batched (`claims`): $1 GUIDs (each once), $2 transaction codes, $3
/// requests, $4 channels; the GUIDs returned are the claims won.
pub(super) const CLAIM_BATCH: &str = "\
    INSERT INTO tx (guid, tx_code, state, request, attempts, updated_at, channel) \
    SELECT v.guid, v.tx_code, 'SENT', v.request, 1, now(), v.channel \
    FROM unnest($1::text[], $2::text[], $3::bytea[], $4::text[]) \
        WITH ORDINALITY AS v(guid, tx_code, request, channel, n) \
    ORDER BY v.n \
    ON CONFLICT (guid) DO NOTHING \
    RETURNING guid";
/// Re-claims of FAILED rows resent by a channel, batched (`reclaims`): $1 GUIDs (each once),
/// $2 the requests they must equal byte for byte, $3 channels. Ownership as SQLite's twin: a
/// named channel re-claims its own rows and rows with no channel (writing its name), an
/// anonymous one (NULL) only rows with no channel. The rows returned: the re-claims won, with
/// the attempt each won.
pub(super) const RECLAIM_FAILED_BATCH: &str = "\
    UPDATE tx SET state = 'SENT', attempts = tx.attempts + 1, updated_at = now(), \
        channel = coalesce(tx.channel, v.channel) \
    FROM unnest($1::text[], $2::bytea[], $3::text[]) AS v(guid, request, channel) \
    WHERE tx.guid = v.guid AND tx.state = 'FAILED' AND tx.request = v.request \
    AND (tx.channel IS NULL OR tx.channel = v.channel) \
    RETURNING tx.guid, tx.attempts";
/// `reprocess`'s re-claims, batched (`reclaims`): $1 GUIDs (each once), $2 the attempt cap of
/// each; FAILED/E902 rows below the cap only.
pub(super) const RECLAIM_FOR_RESEND_BATCH: &str = "\
    UPDATE tx SET state = 'SENT', attempts = tx.attempts + 1, updated_at = now() \
    FROM unnest($1::text[], $2::integer[]) AS v(guid, max_attempts) \
    WHERE tx.guid = v.guid AND tx.state = 'FAILED' AND tx.rsp_code = 'E902' \
    AND tx.attempts < v.max_attempts \
    RETURNING tx.guid, tx.attempts";
/// Guarded transitions, batched (`results`): one row per change, each GUID once: $1 GUID,
/// $2 the state it leaves, $3 the state it enters, $4 code, $5 reply, $6 the attempt it
/// must be on (NULL: any), $7 how long it must have been unchanged (seconds; NULL: no
/// matter); the GUIDs returned are the changes made. `tx.guid = ANY($1)` says again what the
/// join says, for the planner: it bounds every plan's way into `tx` to the rows named, which
/// is what lets the batch writers plan the statement once (`pool::Plans::GenericByKey`).
pub(super) const TRANSITION_BATCH: &str = "\
    UPDATE tx SET state = v.to_state, rsp_code = v.rsp_code, response = v.response, \
        updated_at = now() \
    FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bytea[], $6::integer[], \
                $7::float8[]) AS v(guid, from_state, to_state, rsp_code, response, attempts, \
                                   min_age) \
    WHERE tx.guid = v.guid AND tx.guid = ANY($1) AND tx.state = v.from_state \
    AND (v.attempts IS NULL OR tx.attempts = v.attempts) \
    AND (v.min_age IS NULL OR tx.updated_at <= now() - make_interval(secs => v.min_age)) \
    RETURNING tx.guid";
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
/// Evidence, not a change (see `Evidence`): from- and to-state are the row's state as it is.
pub(super) const RECORD_EVIDENCE: &str = "\
    INSERT INTO tx_history (guid, from_state, to_state, rsp_code, attempts, who, reason, \
                            channel) \
    VALUES ($1, (SELECT state FROM tx WHERE guid = $1), (SELECT state FROM tx WHERE guid = $1), \
            $2, $3, $4, $5, (SELECT channel FROM tx WHERE guid = $1))";
/// Old history, only of GUIDs no longer in doubt (as SQLite's).
pub(super) const PURGE_HISTORY_CHUNK: &str = "\
    DELETE FROM tx_history WHERE id IN ( \
        SELECT id FROM tx_history h WHERE at < now() - make_interval(days => $1) \
        AND NOT EXISTS (SELECT 1 FROM tx WHERE tx.guid = h.guid \
            AND NOT (tx.state = 'DONE' AND tx.updated_at < now() - make_interval(days => $3))) \
        ORDER BY id LIMIT $2) \
    AND NOT EXISTS (SELECT 1 FROM tx WHERE tx.guid = tx_history.guid \
        AND NOT (tx.state = 'DONE' AND tx.updated_at < now() - make_interval(days => $3)))";
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
pub(super) const PURGE_CHUNK: &str = "\
    DELETE FROM tx WHERE guid IN ( \
        SELECT guid FROM tx WHERE state = 'DONE' \
        AND updated_at < now() - make_interval(days => $1) \
        ORDER BY updated_at LIMIT $2) \
    AND state = 'DONE' AND updated_at < now() - make_interval(days => $1)";

// The side table of failed inquiries (see the SQLite twin): the n-th failure of a GUID sets
// its next inquiry to now + min(min_age × 2^(n-1), cap) by the server's clock. $3 is
// --min-age (at most the cap), $4 the cap, $5 the largest shift.
pub(super) const RECORD_INQUIRY_FAILURE: &str = "\
    INSERT INTO tx_inquiry AS i (guid, failures, last_error, next_at) \
    VALUES ($1, 1, $2, now() + make_interval(secs => $3::bigint)) \
    ON CONFLICT (guid) DO UPDATE SET \
        failures = i.failures + 1, \
        last_error = excluded.last_error, \
        next_at = now() + make_interval(secs => \
            LEAST($3::bigint << GREATEST(0, LEAST(i.failures, $5::integer)), $4::bigint)) \
    RETURNING guid, failures, last_error, \
        to_char(next_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS')";
pub(super) const CLEAR_INQUIRY: &str = "DELETE FROM tx_inquiry WHERE guid = $1";
pub(super) const PRUNE_INQUIRIES: &str = "\
    DELETE FROM tx_inquiry i WHERE NOT EXISTS ( \
        SELECT 1 FROM tx WHERE tx.guid = i.guid AND tx.state IN ('UNKNOWN', 'SENT'))";
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
pub(super) const INQUIRY_RECORDS: &str = "\
    SELECT guid, failures, last_error, \
        to_char(next_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS') \
    FROM tx_inquiry ORDER BY guid";
/// `inspect` opens a ledger as it is: the side table may not exist yet.
pub(super) const HAS_INQUIRY_TABLE: &str = "SELECT to_regclass('tx_inquiry') IS NOT NULL";
