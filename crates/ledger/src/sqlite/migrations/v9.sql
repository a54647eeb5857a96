-- Schema version 9 of the SQLite ledger: settle_request and its triggers (contract §12).
-- Frozen as it was: the step from version 8 (sqlite/migrations.rs). The current schema is
-- schema.sql, which a file gets after its steps.
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
