//! Two operators settling a GUID by hand (contract §12) while the channels, resolve,
//! reprocess and the core's late answers go on, as `inspect settle` and `inspect approve` do
//! it: the oldest UNKNOWN row unchanged for the run's `--min-age`, the core asked about it,
//! a request made by one person from the answer (booked: DONE with the booking's reply; a
//! 404: FAILED/E902, which reprocess then resends), time passing, the core asked again by the
//! other person (a not-booked request that the core now says it booked is rejected, as the
//! approval's re-inquiry does), and the approval: the ledger's one transaction, whose UPDATE
//! names the state, the attempts and the age the request saw. Who acts is the ledger's
//! `txrelay_identity()`, which the simulator gives per person on its one connection.

use core_api::{Core, Inquiry};
use ledger::settle_request::NewRequest;
use ledger::state::State;
use ledger::store::Store;
use wire::{self, Code, Transfer};

use crate::core::SimCore;
use crate::hold::SimHold;
use crate::sched::Sched;

/// One settlement by two people, of the oldest UNKNOWN row at least `min_age_secs` old, if
/// there is one and the core gives an answer.
pub fn settle_one(
    sched: &Sched,
    hold: &SimHold,
    store: &dyn Store,
    core: &SimCore,
    min_age_secs: u64,
) {
    let Ok(rows) = store.state_page(State::Unknown, Some(min_age_secs), None, 1) else {
        return;
    };
    let Some((_, row)) = rows.into_iter().next() else {
        return;
    };
    let (Some(msg), Some(attempts)) = (row.request.clone(), row.attempts) else {
        return;
    };
    let Ok(t) = wire::parse_request(&msg) else {
        return;
    };
    let Some(new) = request_from(&t, &msg, core.inquire(&t), attempts, min_age_secs) else {
        return;
    };
    hold.act_as("alice");
    let Ok(id) = store.make_settle_request(&new) else {
        return;
    };
    // Time passes, and everything else runs, before the second person looks: up to some
    // thirty seconds of the run's clock, past the request's age guard or not.
    for _ in 0..=sched.below(300) {
        sched.pause();
    }
    hold.act_as("bob");
    let still = new.to == State::Done || matches!(core.inquire(&t), Inquiry::NotFound);
    let _ = if still {
        store.approve_settle_request(id, Some("checked with the core again"))
    } else {
        store.reject_settle_request(id, "the core now says it booked the GUID")
    };
}

/// The request `inspect settle` makes of the core's answer: booked, or not booked on its 404.
fn request_from(
    t: &Transfer,
    msg: &[u8],
    answer: Inquiry,
    seen_attempts: i64,
    min_age_secs: u64,
) -> Option<NewRequest> {
    let (outcome, to, code, body, evidence) = match answer {
        Inquiry::Booked(body) => ("booked", State::Done, wire::OK, Some(body), "booked"),
        Inquiry::NotFound => ("not-booked", State::Failed, wire::E_NOT_SENT, None, "404"),
        Inquiry::Error(_) => return None,
    };
    let code: Code = code;
    Some(NewRequest {
        guid: t.guid.clone(),
        seen_state: State::Unknown,
        seen_attempts,
        outcome,
        to,
        rsp_code: String::from_utf8_lossy(&code).into_owned(),
        response: wire::reply_to(msg, &code, body.as_ref()),
        evidence: format!("the core's inquiry: {evidence}"),
        forced: false,
        min_age_secs: Some(min_age_secs),
        reason: "the simulator's operators".into(),
        expires_in_secs: 86_400,
    })
}
