//! A request the tool did not make (a statement by hand, another program): `approve` carries
//! out only a change `inspect settle` would have built from the row — booked, DONE/0000 with a
//! booking of the request's amount; not booked, FAILED/E902 with its age guard — and refuses
//! any other, the row left alone.

use ledger::settle_request::NewRequest;

use super::*;

/// A request as the store takes it, made by the first person.
fn made(
    db: &TempLedger,
    guid: &str,
    outcome: &'static str,
    to: State,
    code: &str,
    reply: Vec<u8>,
    min_age: Option<u64>,
) -> String {
    db.store()
        .make_settle_request(&NewRequest {
            guid: guid.into(),
            seen_state: State::Unknown,
            seen_attempts: 1,
            outcome,
            to,
            rsp_code: code.into(),
            response: reply,
            evidence: "by hand".into(),
            forced: false,
            min_age_secs: min_age,
            reason: "ticket 3".into(),
            expires_in_secs: 3600,
        })
        .unwrap()
        .to_string()
}

#[test]
fn a_request_the_tool_would_not_have_made_is_not_carried_out() {
    skip_if_unavailable!();
    let m = msg("G-FORGED", 67, "");
    let s = Scene::new()
        .core(&[])
        .row(RowSpec::unknown(&m).age(DAY))
        .build();
    let second = second_person!(&s.db);
    booked_canary(&s, "G-FORGED-CANARY");
    let core = s.core().url();
    let before = rows_by_guid(&s.db);
    let not_sent = wire::reply_to(&m, &wire::E_NOT_SENT, None);
    let booking = json!({"core_ref": "C-F", "amount": 67, "booked_at": "2026-01-31T23:59:59Z"});
    let other_amount =
        json!({"core_ref": "C-F", "amount": 68, "booked_at": "2026-01-31T23:59:59Z"});
    for (outcome, to, code, reply, min_age, why) in [
        // "booked", skipping the inquiry, yet asking for FAILED/E902: reprocess would resend.
        (
            "booked",
            State::Failed,
            "E902",
            booked_reply(&m, &booking),
            None,
            "booked asks for FAILED/E902, not DONE/0000",
        ),
        // A booking of another amount than the request's.
        (
            "booked",
            State::Done,
            "0000",
            booked_reply(&m, &other_amount),
            None,
            "its reply books Some(68), the request's amount is 67",
        ),
        // Not booked without the age guard a 404 needs.
        (
            "not-booked",
            State::Failed,
            "E902",
            not_sent.clone(),
            None,
            "no age guard",
        ),
        // Not booked, but with a reply that is not the stored request's E902.
        (
            "not-booked",
            State::Failed,
            "E902",
            booked_reply(&m, &booking),
            Some(300),
            "its reply is not the FAILED/E902 reply of the row's stored request",
        ),
    ] {
        let id = made(&s.db, "G-FORGED", outcome, to, code, reply, min_age);
        let r = as_second(&second, &["approve", &id, "--core", &core]);
        r.expect_code(EXIT_FATAL);
        assert!(
            r.stderr().contains(&format!(
                "approve {id}: refused: the request is not one `inspect settle` makes ({why}); \
                 reject it; nothing written"
            )),
            "{}",
            r.stderr()
        );
        assert_eq!(rows_by_guid(&s.db), before, "nothing changed");
    }
    // The same request as the tool builds it is carried out.
    let id = made(
        &s.db,
        "G-FORGED",
        "booked",
        State::Done,
        "0000",
        booked_reply(&m, &booking),
        None,
    );
    as_second(&second, &["approve", &id]).expect_code(EXIT_SETTLED);
    assert_eq!(
        s.db.row("G-FORGED").unwrap().response,
        Some(booked_reply(&m, &booking))
    );
}
