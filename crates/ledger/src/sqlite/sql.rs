//! The SQLite ledger's SQL: the transitions, each naming in its WHERE the state it leaves
//! (its row count decides), the side tables' statements and the columns rows are read with.

pub(super) const CLAIM_NEW: &str = "\
    INSERT INTO tx (guid, tx_code, state, request, attempts, updated_at, channel) \
    VALUES (?1, ?2, 'SENT', ?3, 1, datetime('now'), ?4) \
    ON CONFLICT (guid) DO NOTHING";
/// A GUID belongs to the channel that claimed it (contract §8): a named channel (?3) may
/// re-claim a row of its own or one with no channel (and then writes its name); an anonymous
/// one (?3 NULL) only a row with no channel.
pub(super) const RECLAIM_FAILED: &str = "\
    UPDATE tx SET state = 'SENT', attempts = attempts + 1, updated_at = datetime('now'), \
        channel = coalesce(channel, ?3) \
    WHERE guid = ?1 AND state = 'FAILED' AND request = ?2 \
    AND (channel IS NULL OR channel = ?3) \
    RETURNING attempts";
pub(super) const RECLAIM_FOR_RESEND: &str = "\
    UPDATE tx SET state = 'SENT', attempts = attempts + 1, updated_at = datetime('now') \
    WHERE guid = ?1 AND state = 'FAILED' AND rsp_code = 'E902' AND attempts < ?2 \
    RETURNING attempts";
pub(super) const TRANSITION: &str = "\
    UPDATE tx SET state = ?3, rsp_code = ?4, response = ?5, updated_at = datetime('now') \
    WHERE guid = ?1 AND state = ?2 AND (?6 IS NULL OR attempts = ?6) \
    AND (?7 IS NULL OR updated_at <= datetime('now', ?7))";
/// History has its own retention: old rows go in chunks, like purge's, but only those of
/// GUIDs no longer in doubt (the row gone, or DONE past purge's own retention `?3`); the
/// guard is in the subselect and again on the rows deleted.
pub(super) const PURGE_HISTORY_CHUNK: &str = "\
    DELETE FROM tx_history WHERE id IN ( \
        SELECT id FROM tx_history h \
        WHERE at < strftime('%Y-%m-%d %H:%M:%f', 'now', ?1) \
        AND NOT EXISTS (SELECT 1 FROM tx WHERE tx.guid = h.guid \
            AND NOT (tx.state = 'DONE' AND tx.updated_at < datetime('now', ?3))) \
        ORDER BY id LIMIT ?2) \
    AND NOT EXISTS (SELECT 1 FROM tx WHERE tx.guid = tx_history.guid \
        AND NOT (tx.state = 'DONE' AND tx.updated_at < datetime('now', ?3)))";
/// A history row that records evidence, not a change: from- and to-state are the row's state
/// as it is (NULL if there is no row).
pub(super) const RECORD_EVIDENCE: &str = "\
    INSERT INTO tx_history (guid, from_state, to_state, rsp_code, attempts, who, reason, \
                            channel) \
    VALUES (?1, (SELECT state FROM tx WHERE guid = ?1), (SELECT state FROM tx WHERE guid = ?1), \
            ?2, ?3, ?4, ?5, (SELECT channel FROM tx WHERE guid = ?1))";
/// Who is writing, for the history triggers (see schema.sql); present only during our own
/// write transactions.
pub(super) const ACTOR_IN: &str = "INSERT INTO tx_actor (who, reason) VALUES (?1, ?2)";
pub(super) const ACTOR_OUT: &str = "DELETE FROM tx_actor WHERE rowid = ?1";
pub(super) const PURGE_CHUNK_SQL: &str = "\
    DELETE FROM tx WHERE guid IN ( \
        SELECT guid FROM tx WHERE state = 'DONE' AND updated_at < datetime('now', ?1) \
        ORDER BY updated_at LIMIT ?2) \
    AND state = 'DONE' AND updated_at < datetime('now', ?1)";

/// `/healthz`'s probe of the claim path: the claim's INSERT of the probe row, which fires
/// the `tx` triggers; always rolled back.
pub(super) const HEALTH_PROBE: &str = "\
    INSERT INTO tx (guid, tx_code, state, request, attempts, updated_at) \
    VALUES (?1, 'TRNF', 'SENT', x'', 1, datetime('now'))";
/// `/healthz`'s committed write: the one row of `relay_health`.
pub(super) const TOUCH_HEALTH: &str = "\
    INSERT INTO relay_health (id, at) VALUES (1, datetime('now')) \
    ON CONFLICT (id) DO UPDATE SET at = excluded.at";
pub(super) const READ_HEALTH: &str = "SELECT at FROM relay_health WHERE id = 1";
pub(super) const OLDEST_AGE: &str = "\
    SELECT (julianday('now') - julianday(min(updated_at))) * 86400.0 FROM tx WHERE state = ?1";
// The side table of failed inquiries. The record of a GUID's n-th failure says when the
// next inquiry is due: now + min(min_age × 2^(n-1), cap), by the database's clock. In the
// DO UPDATE, `tx_inquiry.failures` is the count before this failure, n-1. ?3 is --min-age
// (at most the cap, so that the shift cannot overflow), ?4 the cap, ?5 the largest shift.
pub(super) const RECORD_INQUIRY_FAILURE: &str = "\
    INSERT INTO tx_inquiry (guid, failures, last_error, next_at) \
    VALUES (?1, 1, ?2, datetime('now', '+' || ?3 || ' seconds')) \
    ON CONFLICT (guid) DO UPDATE SET \
        failures = tx_inquiry.failures + 1, \
        last_error = excluded.last_error, \
        next_at = datetime('now', '+' || \
            min(?3 << max(0, min(tx_inquiry.failures, ?5)), ?4) || ' seconds') \
    RETURNING guid, failures, last_error, next_at";
pub(super) const CLEAR_INQUIRY: &str = "DELETE FROM tx_inquiry WHERE guid = ?1";
pub(super) const PRUNE_INQUIRIES: &str = "\
    DELETE FROM tx_inquiry WHERE NOT EXISTS ( \
        SELECT 1 FROM tx WHERE tx.guid = tx_inquiry.guid AND tx.state IN ('UNKNOWN', 'SENT'))";
pub(super) const INQUIRY_COLUMNS: &str = "i.guid, i.failures, i.last_error, i.next_at";

pub(super) const ROW_COLUMNS: &str =
    "guid, tx_code, state, rsp_code, request, response, attempts, updated_at, channel";
/// The same, where `tx` is joined with `tx_inquiry`.
pub(super) const TX_COLUMNS: &str = "tx.guid, tx.tx_code, tx.state, tx.rsp_code, tx.request, tx.response, tx.attempts, \
     tx.updated_at, tx.channel";
