-- The relay's ledger: one row per GUID. See ../shared/spec/CONTRACT.md §5.
-- Applied by every tool at start-up; every statement is harmless when run twice.
CREATE TABLE IF NOT EXISTS tx (
    guid       TEXT PRIMARY KEY,
    tx_code    TEXT,
    state      TEXT NOT NULL
               CHECK (state IN ('RECEIVED','SENT','DONE','UNKNOWN','FAILED')),
    rsp_code   TEXT,
    request    BLOB,
    response   BLOB,
    attempts   INTEGER NOT NULL DEFAULT 0,
    updated_at TEXT NOT NULL DEFAULT (datetime('now')),
    -- The channel that claimed the GUID (contract §8: its client certificate's CN); NULL for
    -- anonymous channels and rows inserted by hand. Version 6; older files get it by ALTER
    -- TABLE (the tools do that before this script runs, see sqlite/migrations.rs).
    channel    TEXT
);

-- resolve, reprocess and purge select by state and age.
CREATE INDEX IF NOT EXISTS tx_state_updated ON tx (state, updated_at);

-- History that outlives the row: one row for every change of a tx row, written in the same
-- transaction by the triggers below, whoever made the change. Our tools say who they are
-- (and why, where there is a reason) in tx_actor for the length of their own write; a change
-- made by hand (sqlite3) finds tx_actor empty and is recorded as 'sql'. Rows of history are
-- never updated; purge --history-days deletes old ones.
-- Version 7: no AUTOINCREMENT (no sqlite_sequence write per row); older files get the table
-- rebuilt in place, ids kept (sqlite/history_table.rs). An id may be given again after the
-- newest rows are deleted; it is still larger than every id left, so a GUID's history stays
-- in order, and no table or tool keeps a history row's id (docs/operating.md, History).
CREATE TABLE IF NOT EXISTS tx_history (
    id         INTEGER PRIMARY KEY,
    guid       TEXT NOT NULL,
    from_state TEXT,            -- NULL: the row was inserted
    to_state   TEXT,            -- NULL: the row was deleted
    rsp_code   TEXT,
    attempts   INTEGER,
    at         TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    who        TEXT NOT NULL,   -- relay, resolve, reprocess, purge, migrate, operator:NAME, sql
    reason     TEXT,
    channel    TEXT             -- the row's channel (version 6)
);
-- The one index a query needs: a GUID's history in order (inspect, and the insert trigger's
-- replaced-row probe, which without it would scan the whole history for every claim).
-- purge --history-days takes old rows in id order (ids grow with time), a scan of the table
-- that never used the index on `at` versions 2 to 6 kept on every row: version 7 drops it.
-- Measured in docs/performance.md.
CREATE INDEX IF NOT EXISTS tx_history_guid ON tx_history (guid, id);
DROP INDEX IF EXISTS tx_history_at;

CREATE TABLE IF NOT EXISTS tx_actor (who TEXT NOT NULL, reason TEXT);

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
-- Each reads the newest tx_actor row twice (who, then reason): two scalar subqueries, each one
-- seek to the table's last row, measured cheaper than one lookup joined in (performance.md).
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

CREATE TRIGGER IF NOT EXISTS tx_history_is_never_updated BEFORE UPDATE ON tx_history BEGIN
    SELECT RAISE(ABORT, 'tx_history rows are never updated');
END;
-- The relay's /healthz proves a write and a read round trip on this one row, never on tx.
CREATE TABLE IF NOT EXISTS relay_health (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    at TEXT NOT NULL
);

-- resolve's failed inquiries, per GUID (the tx table keeps the contract's columns only):
-- how many failed in a row, the last error, and when the next inquiry is due (backoff).
-- A successful inquiry deletes the record; resolve stops asking at --max-inquiries.
CREATE TABLE IF NOT EXISTS tx_inquiry (
    guid       TEXT PRIMARY KEY,
    failures   INTEGER NOT NULL,
    last_error TEXT,
    next_at    TEXT NOT NULL
);

-- Recovery (contract §11, version 8). While this table has its row, the ledger may have
-- forgotten claims made after `since` (it was restored from a backup, or put back by other
-- means): the relay and reprocess ask the core before they claim a GUID without a row or
-- re-claim a FAILED one. `since` and `at` are RFC 3339 UTC (`YYYY-MM-DDThh:mm:ssZ`).
CREATE TABLE IF NOT EXISTS ledger_recovery (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    since TEXT NOT NULL,
    who   TEXT NOT NULL,
    at    TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))
);

-- The history of the ledger as a whole (version 8): recovery begun and ended, a restore;
-- who did it and why. Rows are never updated.
CREATE TABLE IF NOT EXISTS ledger_events (
    id     INTEGER PRIMARY KEY,
    at     TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now')),
    who    TEXT NOT NULL,
    event  TEXT NOT NULL,
    detail TEXT
);
CREATE TRIGGER IF NOT EXISTS ledger_events_are_never_updated BEFORE UPDATE ON ledger_events
BEGIN
    SELECT RAISE(ABORT, 'ledger_events rows are never updated');
END;

-- Dual control of manual settlement (contract §12, version 9). `inspect settle` records a
-- request: the GUID, the state and attempts its row had, the change asked for (to_state,
-- rsp_code and the reply it stores), the evidence, the reason, who asked and until when it
-- may be approved. `inspect approve` carries it out — one guarded UPDATE of tx naming the
-- state and attempts recorded here — and `inspect reject` closes it, each by another person
-- than its maker. Who is the system's identity of the process (ledger::identity), which only
-- the tools' own connections give SQL, as txrelay_identity(): the triggers below refuse a
-- maker or a checker other than that person, and in any other session (sqlite3 by hand) a
-- request can be neither made nor decided ("no such function"). A request's decision is
-- written once; nothing else of it ever changes, and it is never deleted.
CREATE TABLE IF NOT EXISTS settle_request (
    id              INTEGER PRIMARY KEY,
    guid            TEXT NOT NULL,
    seen_state      TEXT NOT NULL CHECK (seen_state IN ('SENT','UNKNOWN')),
    seen_attempts   INTEGER NOT NULL,
    outcome         TEXT NOT NULL CHECK (outcome IN ('booked','not-booked')),
    to_state        TEXT NOT NULL CHECK (to_state IN ('DONE','FAILED')),
    rsp_code        TEXT NOT NULL,
    response        BLOB NOT NULL,
    evidence        TEXT NOT NULL,
    forced          INTEGER NOT NULL DEFAULT 0 CHECK (forced IN (0, 1)),
    min_age_secs    INTEGER,
    reason          TEXT NOT NULL,
    maker           TEXT NOT NULL,
    made_at         TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now')),
    expires_at      TEXT NOT NULL,
    status          TEXT NOT NULL DEFAULT 'pending'
                    CHECK (status IN ('pending','approved','rejected')),
    checker         TEXT,
    decided_at      TEXT,
    decision_reason TEXT,
    CHECK (checker IS NULL OR checker <> maker)
);
CREATE INDEX IF NOT EXISTS settle_request_by_status ON settle_request (status, id);
CREATE TRIGGER IF NOT EXISTS settle_request_made BEFORE INSERT ON settle_request BEGIN
    SELECT RAISE(ABORT, 'a settlement request is made pending, by the person the tool runs for')
    WHERE NEW.maker IS NOT txrelay_identity() OR NEW.status IS NOT 'pending'
       OR NEW.checker IS NOT NULL OR NEW.decided_at IS NOT NULL;
END;
CREATE TRIGGER IF NOT EXISTS settle_request_decided BEFORE UPDATE ON settle_request BEGIN
    SELECT RAISE(ABORT, 'a settlement request is decided once, and nothing else of it changes')
    WHERE OLD.status IS NOT 'pending' OR NEW.status IS 'pending'
       OR NEW.id IS NOT OLD.id OR NEW.guid IS NOT OLD.guid
       OR NEW.seen_state IS NOT OLD.seen_state OR NEW.seen_attempts IS NOT OLD.seen_attempts
       OR NEW.outcome IS NOT OLD.outcome OR NEW.to_state IS NOT OLD.to_state
       OR NEW.rsp_code IS NOT OLD.rsp_code OR NEW.response IS NOT OLD.response
       OR NEW.evidence IS NOT OLD.evidence OR NEW.forced IS NOT OLD.forced
       OR NEW.min_age_secs IS NOT OLD.min_age_secs OR NEW.reason IS NOT OLD.reason
       OR NEW.maker IS NOT OLD.maker OR NEW.made_at IS NOT OLD.made_at
       OR NEW.expires_at IS NOT OLD.expires_at;
    SELECT RAISE(ABORT, 'the maker of a settlement request cannot approve or reject it')
    WHERE NEW.checker IS OLD.maker;
    SELECT RAISE(ABORT, 'a settlement request is decided by the person the tool runs for')
    WHERE NEW.checker IS NOT txrelay_identity();
END;
CREATE TRIGGER IF NOT EXISTS settle_request_kept BEFORE DELETE ON settle_request BEGIN
    SELECT RAISE(ABORT, 'settlement requests are never deleted');
END;
