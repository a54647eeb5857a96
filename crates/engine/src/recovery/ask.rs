//! Asking the core before a claim while the ledger is recovering (contract §11): the relay
//! before it claims a GUID without a row or re-claims a FAILED row (`before_claim`),
//! reprocess before it re-claims a FAILED row (`before_resend`). Only the core's own answers
//! decide: a booking of this GUID and amount is written DONE from the answer (one guarded
//! statement, never a POST); the core's JSON 404 lets the claim go on; a booking for another
//! amount is the GUID used for a different request; anything else proves nothing, so nothing
//! is written and nothing sent.

use crate::core::InquiryDetail;
use ledger::recovery::Booked;
use ledger::state::{Change, Row, State};
use ledger::store::{Recovering, Transfers};
use log::{info, warn};
use wire::{self, TX_TRNF, Transfer};

use super::BOOKED_BEFORE;
use crate::core::Core;
use crate::events::Events;
use crate::record::Handled;

/// What the relay does after asking.
#[derive(Debug)]
pub(crate) enum Before {
    /// The core never booked it: claim as usual.
    Claim,
    /// The channel's answer (the booking now in the ledger, `E904`, `E902`, `E905`).
    Answered(Handled),
    /// The row appeared or moved while we asked: answer from the row as it is now.
    Lost,
}

/// Asks the core about `t` (request `msg`, from `channel`) before the relay claims it:
/// `failed` is the FAILED row a re-claim would take (`None`: the GUID has no row). A
/// booking of this GUID and amount is written DONE/`0000` with the reply the relay would
/// have given (a new row by one `INSERT … ON CONFLICT DO NOTHING`; a FAILED row by one
/// transition guarded by its state and attempt), and that is the answer.
pub(crate) fn before_claim<S: Transfers + Recovering + ?Sized, C: Core + ?Sized>(
    store: &S,
    core: &C,
    events: &dyn Events,
    channel: Option<&str>,
    t: &Transfer,
    msg: &[u8],
    failed: Option<&Row>,
) -> Before {
    let state = failed.map(|r| r.state);
    let short = |code| Before::Answered(Handled::short(&t.guid, msg, code, state));
    match ask(core, events, t) {
        InquiryDetail::NotFound => Before::Claim,
        InquiryDetail::Booked(body) => {
            let reply = wire::reply_to(msg, &wire::OK, Some(&body));
            let written = match failed {
                None => store.record_booked(&Booked {
                    guid: t.guid.clone(),
                    tx_code: TX_TRNF.to_string(),
                    request: Some(msg.to_vec()),
                    response: reply.clone(),
                    channel: channel.map(str::to_string),
                    who: None,
                    reason: BOOKED_BEFORE.to_string(),
                }),
                Some(row) => store.transition(&settle(row, reply.clone())),
            };
            match written {
                Ok(true) => {
                    info!(guid:% = t.guid, code = "0000"; "recovery: the core had booked it: \
                         written DONE from its inquiry, not sent");
                    Before::Answered(Handled {
                        guid: t.guid.clone(),
                        reply,
                        code: wire::OK,
                        state: Some(State::Done),
                        detail: None,
                        replayed: false,
                    })
                }
                Ok(false) => Before::Lost,
                Err(e) => {
                    warn!(guid:% = t.guid, code = "E905"; "recovery: the core had booked it but \
                         the booking cannot be written: {e}");
                    short(wire::E_LEDGER)
                }
            }
        }
        InquiryDetail::BookedOther { amount, why } => {
            warn!(guid:% = t.guid, code = "E904"; "recovery: the core booked this GUID for \
                 amount {amount}, this request is for {}: {why}", t.amount);
            short(wire::E_GUID_REUSED)
        }
        InquiryDetail::Error(why) => {
            warn!(guid:% = t.guid, code = "E902"; "recovery: not sent, the core's inquiry \
                 proves nothing: {why}");
            short(wire::E_NOT_SENT)
        }
    }
}

/// What reprocess does with a FAILED row after asking.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Resend {
    /// The core never booked it: re-claim and resend.
    Go,
    /// Settled DONE/`0000` from the core's booking; not sent.
    Settled,
    /// The row moved on while we asked (another writer has it).
    Raced,
    /// The inquiry failed, or found the GUID booked for another amount, or the settlement
    /// could not be written: the row is left FAILED, nothing sent.
    Left,
}

/// Asks the core about `row` (its stored request `req`, parsed as `t`) before reprocess
/// re-claims it; a booking of this GUID and amount settles the row FAILED → DONE/`0000` on
/// its attempt, by one guarded transition.
pub(crate) fn before_resend<S: Transfers + Recovering + ?Sized, C: Core + ?Sized>(
    store: &S,
    core: &C,
    events: &dyn Events,
    row: &Row,
    t: &Transfer,
    req: &[u8],
) -> Resend {
    match ask(core, events, t) {
        InquiryDetail::NotFound => Resend::Go,
        InquiryDetail::Booked(body) => {
            let change = settle(row, wire::reply_to(req, &wire::OK, Some(&body)));
            match store.transition(&change) {
                Ok(true) => {
                    info!(guid:% = row.guid; "recovery: the core had booked it: FAILED -> DONE \
                         (0000) from its inquiry, not resent");
                    Resend::Settled
                }
                Ok(false) => {
                    info!(guid:% = row.guid; "was changed by another writer; left to it");
                    Resend::Raced
                }
                Err(e) => {
                    warn!(guid:% = row.guid; "left FAILED: the core had booked it but the \
                         booking cannot be written: {e}");
                    Resend::Left
                }
            }
        }
        InquiryDetail::BookedOther { amount, why } => {
            warn!(guid:% = row.guid; "left FAILED: recovery: the core booked this GUID for \
                 amount {amount}, the stored request is for {}: {why}", t.amount);
            Resend::Left
        }
        InquiryDetail::Error(why) => {
            warn!(guid:% = row.guid; "left FAILED: recovery: the core's inquiry proves \
                 nothing: {why}");
            Resend::Left
        }
    }
}

/// One inquiry, counted by outcome.
fn ask<C: Core + ?Sized>(core: &C, events: &dyn Events, t: &Transfer) -> InquiryDetail {
    let answer = core.inquire_detail(t);
    events.recovery_inquiry(answer.label());
    answer
}

/// FAILED → DONE/`0000` with `reply`, guarded by the row's state and attempt.
fn settle(row: &Row, reply: Vec<u8>) -> Change {
    Change::new(
        &row.guid,
        State::Failed,
        row.attempts,
        State::Done,
        wire::OK,
        reply,
    )
    .because(BOOKED_BEFORE)
}
