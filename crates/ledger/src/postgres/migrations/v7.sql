-- Schema version 7 of the PostgreSQL ledger: an approval carried out by the ledger itself
-- (txrelay_approve, SECURITY DEFINER), so that operators' roles need no UPDATE on tx.
-- Frozen as it was: the step from version 6 (postgres/schema.rs). The current schema
-- is schema.postgres.sql, which a ledger gets after its steps.

-- Approves settlement request `request_id` as the session's role and makes its change, in
-- the caller's transaction: the decision (the guard trigger names session_user the checker
-- and refuses the request's maker; only a pending request not yet expired), then one guarded
-- UPDATE of tx from the state and attempts the request recorded, its age guard included,
-- recorded in the history as 'operator:<session_user>' with `history_reason`. Returns
-- 'approved', or 'not pending' (nothing changed); a row that moved on raises TXR01, which
-- undoes the decision too. It runs with its owner's rights (the tables' owner, who applied
-- the schema), so an operator needs EXECUTE on it and no UPDATE on tx: a person with an
-- operator's role can change a row only through a request another person made.
CREATE OR REPLACE FUNCTION txrelay_approve(request_id BIGINT, why TEXT, history_reason TEXT)
RETURNS TEXT LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
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
             OR tx.updated_at <= now() - make_interval(secs => r.min_age_secs));
    IF NOT FOUND THEN
        RAISE EXCEPTION 'the row of settlement request % changed since it was made', request_id
            USING ERRCODE = 'TXR01';
    END IF;
    RETURN 'approved';
END $$;
REVOKE ALL ON FUNCTION txrelay_approve(BIGINT, TEXT, TEXT) FROM PUBLIC;
