//! The SQLite ledger's own statements (the actor for the history, the health probe, ages)
//! and the columns rows are read with. The writes, each with its PostgreSQL twin, are in
//! `crate::writes`.

/// Who is writing, for the history triggers (see schema.sql); present only during our own
/// write transactions.
pub(super) const ACTOR_IN: &str = "INSERT INTO tx_actor (who, reason) VALUES (?1, ?2)";
pub(super) const ACTOR_OUT: &str = "DELETE FROM tx_actor WHERE rowid = ?1";

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
pub(super) const INQUIRY_COLUMNS: &str = "i.guid, i.failures, i.last_error, i.next_at";

pub(super) const ROW_COLUMNS: &str =
    "guid, tx_code, state, rsp_code, request, response, attempts, updated_at, channel";
/// The same, where `tx` is joined with `tx_inquiry`.
pub(super) const TX_COLUMNS: &str = "tx.guid, tx.tx_code, tx.state, tx.rsp_code, tx.request, tx.response, tx.attempts, \
     tx.updated_at, tx.channel";
