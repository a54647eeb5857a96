-- Schema version 4 of the PostgreSQL ledger: the history written by statement-level
-- triggers with transition tables, in place of the row trigger.
-- Frozen as it was: the step from version 3 (postgres/schema.rs). The current schema
-- is schema.postgres.sql, which a ledger gets after its steps.
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
