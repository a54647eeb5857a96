-- Schema version 2 of the PostgreSQL ledger: TRUNCATE tx refused.
-- Frozen as it was: the step from version 1 (postgres/schema.rs). The current schema
-- is schema.postgres.sql, which a ledger gets after its steps.
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

