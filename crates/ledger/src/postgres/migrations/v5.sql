-- Schema version 5 of the PostgreSQL ledger: ledger_recovery and ledger_events (contract §11).
-- Frozen as it was: the step from version 4 (postgres/schema.rs). The current schema
-- is schema.postgres.sql, which a ledger gets after its steps.
-- Recovery (contract §11, schema version 5). While this table has its row, the ledger may
-- have forgotten claims made after `since` (restored to a point in time, or a failover that
-- lost commits): the relay and reprocess ask the core before they claim a GUID without a row
-- or re-claim a FAILED one.
CREATE TABLE IF NOT EXISTS ledger_recovery (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    since TIMESTAMPTZ NOT NULL,
    who   TEXT NOT NULL,
    at    TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- The history of the ledger as a whole (schema version 5): recovery begun and ended; who did
-- it (the tool's word, and the database role that ran it) and why. Rows are never updated.
CREATE TABLE IF NOT EXISTS ledger_events (
    id      BIGSERIAL PRIMARY KEY,
    at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    who     TEXT NOT NULL,
    db_user TEXT NOT NULL DEFAULT session_user,
    event   TEXT NOT NULL,
    detail  TEXT
);

CREATE OR REPLACE FUNCTION ledger_events_refuse_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'ledger_events rows are never updated';
END $$;

DO $$ BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = 'ledger_events_are_never_updated'
                   AND tgrelid = 'ledger_events'::regclass) THEN
        CREATE TRIGGER ledger_events_are_never_updated BEFORE UPDATE ON ledger_events
            FOR EACH ROW EXECUTE FUNCTION ledger_events_refuse_update();
    END IF;
END $$;
