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

-- resolve's failed inquiries, per GUID (the tx table keeps the contract's columns only):
-- how many failed in a row, the last error, and when the next inquiry is due (backoff).
-- A successful inquiry deletes the record; resolve stops asking at --max-inquiries.
CREATE TABLE IF NOT EXISTS tx_inquiry (
    guid       TEXT PRIMARY KEY,
    failures   INTEGER NOT NULL,
    last_error TEXT,
    next_at    TIMESTAMPTZ NOT NULL
);
