-- Schema version 6 of the PostgreSQL ledger: settle_request and its trigger (contract §12).
-- Frozen as it was: the step from version 5 (postgres/schema.rs). The current schema
-- is schema.postgres.sql, which a ledger gets after its steps.
-- Dual control of manual settlement (contract §12, schema version 6). `inspect settle`
-- records a request: the GUID, the state and attempts its row had, the change asked for
-- (to_state, rsp_code and the reply it stores), the evidence, the reason, who asked and until
-- when it may be approved. `inspect approve` carries it out — one guarded UPDATE of tx naming
-- the state and attempts recorded here — and `inspect reject` closes it. The trigger below
-- takes the maker and the checker from session_user (the role the session logged in as; SET
-- ROLE does not change it), whatever the statement says, and refuses a decision by the
-- request's maker: neither a tool nor a statement written by hand can approve its own
-- request. A decision is written once; nothing else of a request ever changes, and it is
-- never deleted. (A superuser can disable any trigger: the owner of the database is trusted.)
CREATE TABLE IF NOT EXISTS settle_request (
    id              BIGSERIAL PRIMARY KEY,
    guid            TEXT NOT NULL,
    seen_state      TEXT NOT NULL CHECK (seen_state IN ('SENT','UNKNOWN')),
    seen_attempts   INTEGER NOT NULL,
    outcome         TEXT NOT NULL CHECK (outcome IN ('booked','not-booked')),
    to_state        TEXT NOT NULL CHECK (to_state IN ('DONE','FAILED')),
    rsp_code        TEXT NOT NULL,
    response        BYTEA NOT NULL,
    evidence        TEXT NOT NULL,
    forced          BOOLEAN NOT NULL DEFAULT false,
    min_age_secs    INTEGER,
    reason          TEXT NOT NULL,
    maker           TEXT NOT NULL DEFAULT session_user,
    made_at         TIMESTAMPTZ NOT NULL DEFAULT now(),
    expires_at      TIMESTAMPTZ NOT NULL,
    status          TEXT NOT NULL DEFAULT 'pending'
                    CHECK (status IN ('pending','approved','rejected')),
    checker         TEXT,
    decided_at      TIMESTAMPTZ,
    decision_reason TEXT,
    CHECK (checker IS NULL OR checker <> maker)
);
CREATE INDEX IF NOT EXISTS settle_request_by_status ON settle_request (status, id);

CREATE OR REPLACE FUNCTION settle_request_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION 'settlement requests are never deleted';
    END IF;
    IF TG_OP = 'INSERT' THEN
        IF NEW.status IS DISTINCT FROM 'pending' OR NEW.checker IS NOT NULL
           OR NEW.decided_at IS NOT NULL THEN
            RAISE EXCEPTION 'a settlement request is made pending';
        END IF;
        NEW.maker := session_user;
        NEW.made_at := now();
        RETURN NEW;
    END IF;
    IF OLD.status <> 'pending' OR NEW.status = 'pending'
       OR (NEW.id, NEW.guid, NEW.seen_state, NEW.seen_attempts, NEW.outcome, NEW.to_state,
           NEW.rsp_code, NEW.response, NEW.evidence, NEW.forced, NEW.min_age_secs, NEW.reason,
           NEW.maker, NEW.made_at, NEW.expires_at)
          IS DISTINCT FROM
          (OLD.id, OLD.guid, OLD.seen_state, OLD.seen_attempts, OLD.outcome, OLD.to_state,
           OLD.rsp_code, OLD.response, OLD.evidence, OLD.forced, OLD.min_age_secs, OLD.reason,
           OLD.maker, OLD.made_at, OLD.expires_at) THEN
        RAISE EXCEPTION 'a settlement request is decided once, and nothing else of it changes';
    END IF;
    IF session_user = OLD.maker THEN
        RAISE EXCEPTION 'the maker of a settlement request cannot approve or reject it (request %, made by %)',
            OLD.id, OLD.maker;
    END IF;
    NEW.checker := session_user;
    NEW.decided_at := now();
    RETURN NEW;
END $$;

DROP TRIGGER IF EXISTS settle_request_guard ON settle_request;
CREATE TRIGGER settle_request_guard BEFORE INSERT OR UPDATE OR DELETE ON settle_request
    FOR EACH ROW EXECUTE FUNCTION settle_request_guard();
