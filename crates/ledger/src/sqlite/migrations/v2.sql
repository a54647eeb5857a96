-- Schema version 2 of the SQLite ledger: tx_history, tx_actor and the history triggers.
-- Frozen as it was: the step from version 1 (sqlite/migrations.rs). The current schema is
-- schema.sql, which a file gets after its steps.

-- History that outlives the row: one row for every change of a tx row, written in the same
-- transaction by the triggers below, whoever made the change. Our tools say who they are
-- (and why, where there is a reason) in tx_actor for the length of their own write; a change
-- made by hand (sqlite3) finds tx_actor empty and is recorded as 'sql'. Rows of history are
-- never updated; purge --history-days deletes old ones.
CREATE TABLE IF NOT EXISTS tx_history (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    guid       TEXT NOT NULL,
    from_state TEXT,            -- NULL: the row was inserted
    to_state   TEXT,            -- NULL: the row was deleted
    rsp_code   TEXT,
    attempts   INTEGER,
    at         TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    who        TEXT NOT NULL,   -- relay, resolve, reprocess, purge, migrate, operator:NAME, sql
    reason     TEXT
);
CREATE INDEX IF NOT EXISTS tx_history_guid ON tx_history (guid, id);
CREATE INDEX IF NOT EXISTS tx_history_at ON tx_history (at);

CREATE TABLE IF NOT EXISTS tx_actor (who TEXT NOT NULL, reason TEXT);

CREATE TRIGGER IF NOT EXISTS tx_history_on_insert AFTER INSERT ON tx BEGIN
    INSERT INTO tx_history (guid, from_state, to_state, rsp_code, attempts, who, reason)
    VALUES (NEW.guid, NULL, NEW.state, NEW.rsp_code, NEW.attempts,
            coalesce((SELECT who FROM tx_actor ORDER BY rowid DESC LIMIT 1), 'sql'),
            (SELECT reason FROM tx_actor ORDER BY rowid DESC LIMIT 1));
END;

CREATE TRIGGER IF NOT EXISTS tx_history_on_update AFTER UPDATE ON tx BEGIN
    INSERT INTO tx_history (guid, from_state, to_state, rsp_code, attempts, who, reason)
    VALUES (NEW.guid, OLD.state, NEW.state, NEW.rsp_code, NEW.attempts,
            coalesce((SELECT who FROM tx_actor ORDER BY rowid DESC LIMIT 1), 'sql'),
            (SELECT reason FROM tx_actor ORDER BY rowid DESC LIMIT 1));
END;

CREATE TRIGGER IF NOT EXISTS tx_history_on_delete AFTER DELETE ON tx BEGIN
    INSERT INTO tx_history (guid, from_state, to_state, rsp_code, attempts, who, reason)
    VALUES (OLD.guid, OLD.state, NULL, OLD.rsp_code, OLD.attempts,
            coalesce((SELECT who FROM tx_actor ORDER BY rowid DESC LIMIT 1), 'sql'),
            (SELECT reason FROM tx_actor ORDER BY rowid DESC LIMIT 1));
END;

CREATE TRIGGER IF NOT EXISTS tx_history_is_never_updated BEFORE UPDATE ON tx_history BEGIN
    SELECT RAISE(ABORT, 'tx_history rows are never updated');
END;
