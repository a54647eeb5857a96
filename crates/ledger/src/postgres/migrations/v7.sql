-- Schema version 7 of the PostgreSQL ledger: a decision carried out by the ledger itself
-- (txrelay_approve, txrelay_reject: SECURITY DEFINER), so that operators' roles need no
-- UPDATE on tx or on settle_request.
-- Frozen as it was: the step from version 6 (postgres/schema.rs). The current schema
-- is schema.postgres.sql, which a ledger gets after its steps.

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
