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
-- transaction by the triggers below, whoever made the change. Our tools say who they are in
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

-- The history is written by statement-level triggers (schema version 4; before it, one row
-- trigger, tx_history, fired per row): each reads the rows its statement changed from the
-- statement's transition tables and writes their history in one INSERT … SELECT, so a batch
-- of a hundred claims costs one trigger call, not a hundred. The rows of one statement get
-- their ids in the order of their GUIDs. PostgreSQL allows transition tables on a trigger of
-- one event only: one trigger, and one function, per event.
CREATE OR REPLACE FUNCTION tx_history_of_insert() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    actor  TEXT := coalesce(nullif(current_setting('txrelay.who', true), ''), 'sql');
    reason TEXT := nullif(current_setting('txrelay.reason', true), '');
BEGIN
    INSERT INTO tx_history (guid, from_state, to_state, rsp_code, attempts, who, reason, channel)
    SELECT n.guid, NULL, n.state, n.rsp_code, n.attempts,
           actor, reason, n.channel
    FROM tx_inserted n ORDER BY n.guid;
    RETURN NULL;
END $$;

-- An UPDATE's rows are paired by GUID. One that changed a row's GUID (by hand: our tools
-- never do) cannot be paired: the old GUID is recorded as leaving its state (to_state NULL,
-- as a deletion) and the new one as arriving (from_state NULL, as an insertion), each with
-- a reason that says so. Per GUID the history stays true: what the ledger said before the
-- statement, and after it.
CREATE OR REPLACE FUNCTION tx_history_of_update() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    actor  TEXT := coalesce(nullif(current_setting('txrelay.who', true), ''), 'sql');
    reason TEXT := nullif(current_setting('txrelay.reason', true), '');
BEGIN
    INSERT INTO tx_history (guid, from_state, to_state, rsp_code, attempts, who, reason, channel)
    SELECT coalesce(n.guid, o.guid), o.state, n.state,
           CASE WHEN n.guid IS NULL THEN o.rsp_code ELSE n.rsp_code END,
           CASE WHEN n.guid IS NULL THEN o.attempts ELSE n.attempts END,
           actor,
           CASE WHEN n.guid IS NULL
                THEN concat_ws('; ', reason, 'guid changed by UPDATE (this row now has another guid)')
                WHEN o.guid IS NULL
                THEN concat_ws('; ', reason, 'guid changed by UPDATE (this row had another guid)')
                ELSE reason END,
           CASE WHEN n.guid IS NULL THEN o.channel ELSE n.channel END
    FROM tx_updated_old o FULL JOIN tx_updated_new n ON n.guid = o.guid
    ORDER BY coalesce(n.guid, o.guid);
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION tx_history_of_delete() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    actor  TEXT := coalesce(nullif(current_setting('txrelay.who', true), ''), 'sql');
    reason TEXT := nullif(current_setting('txrelay.reason', true), '');
BEGIN
    INSERT INTO tx_history (guid, from_state, to_state, rsp_code, attempts, who, reason, channel)
    SELECT o.guid, o.state, NULL, o.rsp_code, o.attempts,
           actor, reason, o.channel
    FROM tx_deleted o ORDER BY o.guid;
    RETURN NULL;
END $$;

-- Created once, and the row trigger of versions 1 to 3 dropped, in the one transaction that
-- applies the schema: no change of a row goes unrecorded meanwhile (writers wait for it).
DO $$ BEGIN
    IF EXISTS (SELECT 1 FROM pg_trigger
               WHERE tgname = 'tx_history' AND tgrelid = 'tx'::regclass) THEN
        DROP TRIGGER tx_history ON tx;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_trigger
                   WHERE tgname = 'tx_history_on_insert' AND tgrelid = 'tx'::regclass) THEN
        CREATE TRIGGER tx_history_on_insert AFTER INSERT ON tx
            REFERENCING NEW TABLE AS tx_inserted
            FOR EACH STATEMENT EXECUTE FUNCTION tx_history_of_insert();
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_trigger
                   WHERE tgname = 'tx_history_on_update' AND tgrelid = 'tx'::regclass) THEN
        CREATE TRIGGER tx_history_on_update AFTER UPDATE ON tx
            REFERENCING OLD TABLE AS tx_updated_old NEW TABLE AS tx_updated_new
            FOR EACH STATEMENT EXECUTE FUNCTION tx_history_of_update();
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_trigger
                   WHERE tgname = 'tx_history_on_delete' AND tgrelid = 'tx'::regclass) THEN
        CREATE TRIGGER tx_history_on_delete AFTER DELETE ON tx
            REFERENCING OLD TABLE AS tx_deleted
            FOR EACH STATEMENT EXECUTE FUNCTION tx_history_of_delete();
    END IF;
END $$;
DROP FUNCTION IF EXISTS tx_history_record();

-- TRUNCATE fires no insert, update or delete trigger: it would delete rows without a line
-- of history. It is refused; rows go by purge, or by a DELETE, which the history records.
-- (Schema version 2.)
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
