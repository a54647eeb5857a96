//! PostgreSQL: an operator's role has the rights docs/operations.md gives it (the second
//! person's, `testkit::second_person::postgres_role`): no INSERT, UPDATE or DELETE on `tx`.
//! A row cannot be changed by hand in such a session, not even to settle it, yet the same
//! person approves another's request: the ledger's `txrelay_approve` (SECURITY DEFINER, schema
//! version 7) makes the change, and the history names that person; a request forged in a
//! temporary table of the caller's is not read by it. (SQLite: the file's permissions are the
//! boundary, operations.md.)

use super::*;

/// `sql` run in the second person's own session: the server's refusal, if any.
fn by_hand_as(p: &SecondPerson, sql: &str) -> Option<String> {
    let mut c = postgres::Client::connect(p.db_arg(), postgres::NoTls).unwrap();
    c.batch_execute(sql).err().map(|e| {
        e.as_db_error().map_or(e.to_string(), |d| {
            format!("{}: {}", d.code().code(), d.message())
        })
    })
}

#[test]
fn an_operator_changes_no_row_by_hand_but_approves_anothers_request() {
    skip_if_unavailable!();
    if crate::BACKEND != Backend::Postgres {
        return;
    }
    let m = msg("G-RIGHTS-A", 61, "");
    let s = Scene::new().row(RowSpec::unknown(&m).age(OLD)).build();
    let second = second_person!(&s.db);
    let before = rows_by_guid(&s.db);
    for sql in [
        "UPDATE tx SET state = 'DONE', rsp_code = '0000' WHERE guid = 'G-RIGHTS-A'",
        "DELETE FROM tx WHERE guid = 'G-RIGHTS-A'",
        "INSERT INTO tx (guid, state, attempts) VALUES ('G-RIGHTS-B', 'DONE', 1)",
    ] {
        let refused = by_hand_as(&second, sql).unwrap_or_else(|| panic!("allowed: {sql}"));
        assert_eq!(refused, "42501: permission denied for table tx", "{sql}");
    }
    assert_eq!(rows_by_guid(&s.db), before, "no row changed by hand");

    // Calling the approval's function on a request that is not there changes nothing either.
    let none = by_hand_as(&second, "SELECT txrelay_approve(999, 'none', NULL)");
    assert_eq!(none, None);
    // Nor on a request of the caller's own making, in a temporary table named like the
    // ledger's (a SECURITY DEFINER function whose search_path does not put pg_temp last
    // would read it, and apply its change to tx with the ledger owner's rights).
    let forged = by_hand_as(
        &second,
        "CREATE TEMP TABLE settle_request (id BIGINT, guid TEXT, seen_state TEXT, \
             seen_attempts INTEGER, to_state TEXT, rsp_code TEXT, response BYTEA, \
             min_age_secs INTEGER, status TEXT, decision_reason TEXT, expires_at TIMESTAMPTZ); \
         INSERT INTO settle_request VALUES (4242, 'G-RIGHTS-A', 'UNKNOWN', 1, 'FAILED', 'E902', \
             '\\x00', NULL, 'pending', NULL, now() + interval '1 day'); \
         GRANT ALL ON settle_request TO PUBLIC; \
         SELECT txrelay_approve(4242, 'forged', NULL)",
    );
    assert_eq!(forged, None, "the real settle_request has no request 4242");
    assert_eq!(
        rows_by_guid(&s.db),
        before,
        "a forged request changed nothing"
    );
    // A decision is the functions' alone: no UPDATE of settle_request by hand.
    let decided = by_hand_as(&second, "UPDATE settle_request SET status = 'approved'");
    assert_eq!(
        decided.as_deref(),
        Some("42501: permission denied for table settle_request")
    );

    // The first person asks; the second approves through the tool, with only those rights.
    let flags = booked_flags(&json!({"core_ref": "C-RIGHTS-1", "amount": 61,
                                     "booked_at": "2026-01-31T23:59:59Z"}));
    let r = settle(
        &s.db,
        &second,
        "G-RIGHTS-A",
        &strs(&flags),
        "core ops ticket 91",
    );
    r.expect_code(EXIT_SETTLED);
    let row = s.db.store().read("G-RIGHTS-A").unwrap().unwrap();
    assert_eq!(
        (row.state, row.rsp_code.as_deref()),
        (State::Done, Some("0000"))
    );
    let last = history(&s.db, "G-RIGHTS-A").pop().unwrap();
    assert_eq!(last.who, format!("operator:{}", second.name), "{last:?}");
}
