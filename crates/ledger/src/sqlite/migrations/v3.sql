-- Schema version 3 of the SQLite ledger: relay_health (/healthz).
-- Frozen as it was: the step from version 2 (sqlite/migrations.rs). The current schema is
-- schema.sql, which a file gets after its steps.
-- The relay's /healthz proves a write and a read round trip on this one row, never on tx.
CREATE TABLE IF NOT EXISTS relay_health (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    at TEXT NOT NULL
);
