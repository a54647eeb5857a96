-- The relay's ledger on PostgreSQL: one row per GUID. See ../shared/spec/CONTRACT.md §7.
-- Applied by every tool at start-up under an advisory lock; harmless when run twice.
CREATE TABLE IF NOT EXISTS tx (
    guid       TEXT PRIMARY KEY,
    tx_code    TEXT,
    state      TEXT NOT NULL
               CHECK (state IN ('RECEIVED','SENT','DONE','UNKNOWN','FAILED')),
    rsp_code   TEXT,
    request    BYTEA,
    response   BYTEA,
    attempts   INTEGER NOT NULL DEFAULT 0,
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- resolve, reprocess and purge select by state and age.
CREATE INDEX IF NOT EXISTS tx_state_updated ON tx (state, updated_at);

-- The relay's /healthz proves a write and a read round trip on this one row, never on tx.
CREATE TABLE IF NOT EXISTS relay_health (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    at TIMESTAMPTZ NOT NULL
);
