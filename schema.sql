-- The relay's ledger: one row per GUID. See ../shared/spec/CONTRACT.md §5.
-- Applied by every tool at start-up; every statement is harmless when run twice.
CREATE TABLE IF NOT EXISTS tx (
    guid       TEXT PRIMARY KEY,
    tx_code    TEXT,
    state      TEXT NOT NULL
               CHECK (state IN ('RECEIVED','SENT','DONE','UNKNOWN','FAILED')),
    rsp_code   TEXT,
    request    BLOB,
    response   BLOB,
    attempts   INTEGER NOT NULL DEFAULT 0,
    updated_at TEXT NOT NULL DEFAULT (datetime('now'))
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
    next_at    TEXT NOT NULL
);
