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

-- The channel that claimed the GUID (contract §8: its client certificate's CN); NULL for
-- anonymous channels and rows inserted by hand. Schema version 3.
ALTER TABLE tx ADD COLUMN IF NOT EXISTS channel TEXT;

-- resolve, reprocess and purge select by state and age.
CREATE INDEX IF NOT EXISTS tx_state_updated ON tx (state, updated_at);

-- History that outlives the row: one row for every change of a tx row, written in the same
-- transaction by the trigger below, whoever made the change. Our tools say who they are in
-- the session setting txrelay.who (and why, per transaction, in txrelay.reason); a change
-- made by hand (psql) has neither and is recorded as 'sql'. Rows of history are never
-- updated; purge --history-days deletes old ones.
CREATE TABLE IF NOT EXISTS tx_history (
    id         BIGSERIAL PRIMARY KEY,
    guid       TEXT NOT NULL,
    from_state TEXT,
    to_state   TEXT,
    rsp_code   TEXT,
    attempts   INTEGER,
    at         TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
    who        TEXT NOT NULL,
    reason     TEXT
);
ALTER TABLE tx_history ADD COLUMN IF NOT EXISTS channel TEXT;
CREATE INDEX IF NOT EXISTS tx_history_guid ON tx_history (guid, id);
CREATE INDEX IF NOT EXISTS tx_history_at ON tx_history (at);

CREATE OR REPLACE FUNCTION tx_history_record() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    actor  TEXT := coalesce(nullif(current_setting('txrelay.who', true), ''), 'sql');
    reason TEXT := nullif(current_setting('txrelay.reason', true), '');
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO tx_history (guid, from_state, to_state, rsp_code, attempts, who, reason, channel)
        VALUES (NEW.guid, NULL, NEW.state, NEW.rsp_code, NEW.attempts, actor, reason, NEW.channel);
    ELSIF TG_OP = 'UPDATE' THEN
        INSERT INTO tx_history (guid, from_state, to_state, rsp_code, attempts, who, reason, channel)
        VALUES (NEW.guid, OLD.state, NEW.state, NEW.rsp_code, NEW.attempts, actor, reason, NEW.channel);
    ELSE
        INSERT INTO tx_history (guid, from_state, to_state, rsp_code, attempts, who, reason, channel)
        VALUES (OLD.guid, OLD.state, NULL, OLD.rsp_code, OLD.attempts, actor, reason, OLD.channel);
    END IF;
    RETURN NULL;
END $$;

-- Created once (never dropped and re-created: relays may be writing meanwhile).
DO $$ BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_trigger
                   WHERE tgname = 'tx_history' AND tgrelid = 'tx'::regclass) THEN
        CREATE TRIGGER tx_history AFTER INSERT OR UPDATE OR DELETE ON tx
            FOR EACH ROW EXECUTE FUNCTION tx_history_record();
    END IF;
END $$;

-- TRUNCATE fires no row trigger: it would delete rows without a line of history. It is
-- refused; rows go by purge, or by a DELETE, which the history records. (Schema version 2.)
CREATE OR REPLACE FUNCTION tx_refuse_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'TRUNCATE tx is refused: it would delete rows without their history'
        USING HINT = 'Delete rows with purge, or with DELETE (recorded in tx_history).';
END $$;

DO $$ BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = 'tx_is_never_truncated'
                   AND tgrelid = 'tx'::regclass) THEN
        CREATE TRIGGER tx_is_never_truncated BEFORE TRUNCATE ON tx
            FOR EACH STATEMENT EXECUTE FUNCTION tx_refuse_truncate();
    END IF;
END $$;

CREATE OR REPLACE FUNCTION tx_history_refuse_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'tx_history rows are never updated';
END $$;

DO $$ BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = 'tx_history_is_never_updated'
                   AND tgrelid = 'tx_history'::regclass) THEN
        CREATE TRIGGER tx_history_is_never_updated BEFORE UPDATE ON tx_history
            FOR EACH ROW EXECUTE FUNCTION tx_history_refuse_update();
    END IF;
END $$;
-- The relay's /healthz proves a write and a read round trip on this one row, never on tx.
CREATE TABLE IF NOT EXISTS relay_health (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    at TIMESTAMPTZ NOT NULL
);

-- resolve's failed inquiries, per GUID (the tx table keeps the contract's columns only):
-- how many failed in a row, the last error, and when the next inquiry is due (backoff).
-- A successful inquiry deletes the record; resolve stops asking at --max-inquiries.
CREATE TABLE IF NOT EXISTS tx_inquiry (
    guid       TEXT PRIMARY KEY,
    failures   INTEGER NOT NULL,
    last_error TEXT,
    next_at    TIMESTAMPTZ NOT NULL
);
