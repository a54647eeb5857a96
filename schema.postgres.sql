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

-- Schema version 7: decisions carried out by the ledger, so that operators need no UPDATE on
-- tx or settle_request (contract §12).
-- Approves settlement request `request_id` as the session's role and makes its change, in
-- the caller's transaction: the decision (the guard trigger names session_user the checker
-- and refuses the request's maker; only a pending request not yet expired), then one guarded
-- UPDATE of tx from the state and attempts the request recorded, its age guard included,
-- recorded in the history as 'operator:<session_user>' with `history_reason`. Returns
-- 'approved', or 'not pending' (nothing changed); a row that moved on raises TXR01, which
-- undoes the decision too. It runs with its owner's rights (the role that applied the schema:
-- the relay's and the tools'), so an operator needs EXECUTE on it and no UPDATE on tx: a
-- person with an operator's role can change a row only through a request another person made.
-- Its search_path is set below, explicitly: pg_catalog first (no function or operator of
-- another schema can stand in for a built-in), then the ledger's schema, then pg_temp, last
-- (a temporary table of the caller's can never stand in for settle_request, tx or
-- tx_history: without pg_temp named, PostgreSQL would search it first).
CREATE OR REPLACE FUNCTION txrelay_approve(request_id BIGINT, why TEXT, history_reason TEXT)
RETURNS TEXT LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
    UPDATE settle_request SET status = 'approved', decision_reason = why
    WHERE id = request_id AND status = 'pending' AND expires_at > now();
    IF NOT FOUND THEN
        RETURN 'not pending';
    END IF;
    PERFORM set_config('txrelay.who', 'operator:' || session_user, true),
            set_config('txrelay.reason', coalesce(history_reason, ''), true);
    UPDATE tx SET state = r.to_state, rsp_code = r.rsp_code, response = r.response,
        updated_at = now()
    FROM settle_request r
    WHERE r.id = request_id AND tx.guid = r.guid AND tx.state = r.seen_state
        AND tx.attempts = r.seen_attempts
        AND (r.min_age_secs IS NULL
             OR tx.updated_at <= now() - make_interval(secs => r.min_age_secs::float8));
    IF NOT FOUND THEN
        RAISE EXCEPTION 'the row of settlement request % changed since it was made', request_id
            USING ERRCODE = 'TXR01';
    END IF;
    RETURN 'approved';
END $$;

-- Rejects settlement request `request_id` as the session's role (the guard trigger names the
-- checker and refuses the maker): pending, expired or not; 'rejected', or 'not pending'.
CREATE OR REPLACE FUNCTION txrelay_reject(request_id BIGINT, why TEXT)
RETURNS TEXT LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
    UPDATE settle_request SET status = 'rejected', decision_reason = why
    WHERE id = request_id AND status = 'pending';
    IF NOT FOUND THEN
        RETURN 'not pending';
    END IF;
    RETURN 'rejected';
END $$;

DO $$ BEGIN
    EXECUTE format('ALTER FUNCTION txrelay_approve(BIGINT, TEXT, TEXT) '
                   'SET search_path = pg_catalog, %I, pg_temp', current_schema());
    EXECUTE format('ALTER FUNCTION txrelay_reject(BIGINT, TEXT) '
                   'SET search_path = pg_catalog, %I, pg_temp', current_schema());
END $$;
REVOKE ALL ON FUNCTION txrelay_approve(BIGINT, TEXT, TEXT) FROM PUBLIC;
REVOKE ALL ON FUNCTION txrelay_reject(BIGINT, TEXT) FROM PUBLIC;
