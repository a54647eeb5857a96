-- Schema version 4 of the SQLite ledger: tx_inquiry (resolve's backoff).
-- Frozen as it was: the step from version 3 (sqlite/migrations.rs). The current schema is
-- schema.sql, which a file gets after its steps.

-- resolve's failed inquiries, per GUID (the tx table keeps the contract's columns only):
-- how many failed in a row, the last error, and when the next inquiry is due (backoff).
-- A successful inquiry deletes the record; resolve stops asking at --max-inquiries.
CREATE TABLE IF NOT EXISTS tx_inquiry (
    guid       TEXT PRIMARY KEY,
    failures   INTEGER NOT NULL,
    last_error TEXT,
    next_at    TEXT NOT NULL
);
