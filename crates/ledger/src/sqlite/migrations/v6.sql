-- Schema version 6 of the SQLite ledger: tx.channel and tx_history.channel (added before this
-- script by sqlite/migrations.rs: ALTER TABLE has no IF NOT EXISTS), and the history triggers
-- that record them.
-- Frozen as it was: the step from version 5 (sqlite/migrations.rs). The current schema is
-- schema.sql, which a file gets after its steps.
-- An INSERT OR REPLACE (or REPLACE) deletes the row it replaces without firing the delete
-- trigger (SQLite fires it only with recursive_triggers on, which a hand-made session does not
-- set), so the insert trigger records that deletion itself: if the GUID's newest history row
-- says the row existed (a to-state), the row it left is the one just replaced. (A BEFORE
-- trigger could see the old row, but it also fires for the claim's ON CONFLICT DO NOTHING that
-- inserts nothing.) Version 5 re-creates this trigger; before it, a replaced row left no trace.
DROP TRIGGER IF EXISTS tx_history_on_insert;
CREATE TRIGGER tx_history_on_insert AFTER INSERT ON tx BEGIN
    INSERT INTO tx_history (guid, from_state, to_state, rsp_code, attempts, who, reason, channel)
    SELECT h.guid, h.to_state, NULL, h.rsp_code, h.attempts,
           coalesce((SELECT who FROM tx_actor ORDER BY rowid DESC LIMIT 1), 'sql'),
           'replaced by INSERT OR REPLACE (the row as its history last recorded it)', h.channel
    FROM tx_history h
    WHERE h.id = (SELECT max(id) FROM tx_history WHERE guid = NEW.guid)
      AND h.to_state IS NOT NULL;
    INSERT INTO tx_history (guid, from_state, to_state, rsp_code, attempts, who, reason, channel)
    VALUES (NEW.guid, NULL, NEW.state, NEW.rsp_code, NEW.attempts,
            coalesce((SELECT who FROM tx_actor ORDER BY rowid DESC LIMIT 1), 'sql'),
            (SELECT reason FROM tx_actor ORDER BY rowid DESC LIMIT 1), NEW.channel);
END;

-- Version 6 re-creates the update and delete triggers too: they record the row's channel.
DROP TRIGGER IF EXISTS tx_history_on_update;
CREATE TRIGGER tx_history_on_update AFTER UPDATE ON tx BEGIN
    INSERT INTO tx_history (guid, from_state, to_state, rsp_code, attempts, who, reason, channel)
    VALUES (NEW.guid, OLD.state, NEW.state, NEW.rsp_code, NEW.attempts,
            coalesce((SELECT who FROM tx_actor ORDER BY rowid DESC LIMIT 1), 'sql'),
            (SELECT reason FROM tx_actor ORDER BY rowid DESC LIMIT 1), NEW.channel);
END;

DROP TRIGGER IF EXISTS tx_history_on_delete;
CREATE TRIGGER tx_history_on_delete AFTER DELETE ON tx BEGIN
    INSERT INTO tx_history (guid, from_state, to_state, rsp_code, attempts, who, reason, channel)
    VALUES (OLD.guid, OLD.state, NULL, OLD.rsp_code, OLD.attempts,
            coalesce((SELECT who FROM tx_actor ORDER BY rowid DESC LIMIT 1), 'sql'),
            (SELECT reason FROM tx_actor ORDER BY rowid DESC LIMIT 1), OLD.channel);
END;
