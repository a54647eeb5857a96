-- Schema version 5 of the SQLite ledger: the insert trigger records a row replaced by
-- INSERT OR REPLACE.
-- Frozen as it was: the step from version 4 (sqlite/migrations.rs). The current schema is
-- schema.sql, which a file gets after its steps.
-- An INSERT OR REPLACE (or REPLACE) deletes the row it replaces without firing the delete
-- trigger (SQLite fires it only with recursive_triggers on, which a hand-made session does not
-- set), so the insert trigger records that deletion itself: if the GUID's newest history row
-- says the row existed (a to-state), the row it left is the one just replaced. (A BEFORE
-- trigger could see the old row, but it also fires for the claim's ON CONFLICT DO NOTHING that
-- inserts nothing.) Version 5 re-creates this trigger; before it, a replaced row left no trace.
DROP TRIGGER IF EXISTS tx_history_on_insert;
CREATE TRIGGER tx_history_on_insert AFTER INSERT ON tx BEGIN
    INSERT INTO tx_history (guid, from_state, to_state, rsp_code, attempts, who, reason)
    SELECT h.guid, h.to_state, NULL, h.rsp_code, h.attempts,
           coalesce((SELECT who FROM tx_actor ORDER BY rowid DESC LIMIT 1), 'sql'),
           'replaced by INSERT OR REPLACE (the row as its history last recorded it)'
    FROM tx_history h
    WHERE h.id = (SELECT max(id) FROM tx_history WHERE guid = NEW.guid)
      AND h.to_state IS NOT NULL;
    INSERT INTO tx_history (guid, from_state, to_state, rsp_code, attempts, who, reason)
    VALUES (NEW.guid, NULL, NEW.state, NEW.rsp_code, NEW.attempts,
            coalesce((SELECT who FROM tx_actor ORDER BY rowid DESC LIMIT 1), 'sql'),
            (SELECT reason FROM tx_actor ORDER BY rowid DESC LIMIT 1));
END;
