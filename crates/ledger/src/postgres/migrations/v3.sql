-- Schema version 3 of the PostgreSQL ledger: tx.channel and tx_history.channel (contract
-- §8), recorded by the row trigger.
-- Frozen as it was: the step from version 2 (postgres/schema.rs). The current schema
-- is schema.postgres.sql, which a ledger gets after its steps.
-- The channel that claimed the GUID (contract §8: its client certificate's CN); NULL for
-- anonymous channels and rows inserted by hand. Schema version 3.
ALTER TABLE tx ADD COLUMN IF NOT EXISTS channel TEXT;

ALTER TABLE tx_history ADD COLUMN IF NOT EXISTS channel TEXT;

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
