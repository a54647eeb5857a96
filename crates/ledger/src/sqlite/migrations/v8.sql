-- Schema version 8 of the SQLite ledger: ledger_recovery and ledger_events (contract §11).
-- Frozen as it was: the step from version 7 (sqlite/migrations.rs). The current schema is
-- schema.sql, which a file gets after its steps.
-- Recovery (contract §11, version 8). While this table has its row, the ledger may have
-- forgotten claims made after `since` (it was restored from a backup, or put back by other
-- means): the relay and reprocess ask the core before they claim a GUID without a row or
-- re-claim a FAILED one. `since` and `at` are RFC 3339 UTC (`YYYY-MM-DDThh:mm:ssZ`).
CREATE TABLE IF NOT EXISTS ledger_recovery (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    since TEXT NOT NULL,
    who   TEXT NOT NULL,
    at    TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))
);

-- The history of the ledger as a whole (version 8): recovery begun and ended, a restore;
-- who did it and why. Rows are never updated.
CREATE TABLE IF NOT EXISTS ledger_events (
    id     INTEGER PRIMARY KEY,
    at     TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now')),
    who    TEXT NOT NULL,
    event  TEXT NOT NULL,
    detail TEXT
);
CREATE TRIGGER IF NOT EXISTS ledger_events_are_never_updated BEFORE UPDATE ON ledger_events
BEGIN
    SELECT RAISE(ABORT, 'ledger_events rows are never updated');
END;
