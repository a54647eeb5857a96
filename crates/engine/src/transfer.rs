//! What happens to one transfer request (contract §5, steps 1–3): claim the GUID, or answer
//! from its row; call the core only when the claim was ours; record the result. While the
//! ledger is recovering (§11), ask the core before a claim (`recovery`).

use std::time::Duration;

use crate::core::Outcome;
use ledger::sqlite::BUSY_TIMEOUT;
use ledger::state::{Change, State};
use ledger::store::{Recovering, Transfers};
use wire::{self, TX_TRNF, Transfer};

use crate::core::Core;
use crate::events::Events;
use crate::record::answer_from_row;
pub use crate::record::{Handled, RECORD_WINDOW, record_result};
pub use crate::recovery::Mode;
use crate::recovery::{self, Before};
use log_limit::{PER_REQUEST, warn_limited};

/// The longest core call the relay accepts (`--connect-timeout-ms` + `--read-timeout-ms`).
pub const MAX_CORE_DEADLINE: Duration = Duration::from_secs(30);

/// `resolve --stale-sent` refuses anything shorter: a SENT row this old has certainly been
/// given up by its relay, whose claim lives at most a core call, the record window and one
/// last busy wait.
pub const STALE_SENT_FLOOR: Duration = Duration::from_secs(60);

const _: () = assert!(
    MAX_CORE_DEADLINE.as_secs() + RECORD_WINDOW.as_secs() + BUSY_TIMEOUT.as_secs()
        < STALE_SENT_FLOOR.as_secs()
);

/// How many times a request re-reads a row that changes under it before answering E903.
const MAX_ROUNDS: usize = 3;

/// Answers one request message (the frame's content) from `channel`, the identity its
/// connection proved (CONTRACT §8: a client certificate's CN; `None`: anonymous), on a
/// ledger that is not recovering: [`handle_in`] with [`Mode::Ordinary`].
pub fn handle<S: Transfers + Recovering + ?Sized, C: Core + ?Sized>(
    store: &S,
    core: &C,
    events: &dyn Events,
    channel: Option<&str>,
    msg: &[u8],
) -> Handled {
    handle_in(store, core, events, Mode::Ordinary, channel, msg)
}

/// Answers one request message as [`handle`] does, in `mode` (the relay's
/// `RecoveryWatch::mode`, read once per request).
///
/// On SQLite the row is read first, so that a resend of a known GUID is answered without
/// queueing a write; on PostgreSQL the claim comes first (one round trip for a new GUID; a
/// claim that finds the row writes nothing). A read never authorises a send: only a claim's
/// row count does (the INSERT for a new GUID, the guarded UPDATE for a FAILED one). When a
/// claim loses, the row is read again.
///
/// While the ledger is recovering (CONTRACT §11) the row is always read first, and before a
/// claim of a GUID without a row, or a re-claim of a FAILED row, the core is asked whether it
/// booked the GUID already (`recovery::before_claim`): the ledger may have forgotten a claim
/// that the core booked. A GUID with any other row is answered from it, as always.
pub fn handle_in<S: Transfers + Recovering + ?Sized, C: Core + ?Sized>(
    store: &S,
    core: &C,
    events: &dyn Events,
    mode: Mode,
    channel: Option<&str>,
    msg: &[u8],
) -> Handled {
    let t = match wire::parse_request(msg) {
        Ok(t) => t,
        Err(m) => {
            return Handled {
                guid: m.guid_lossy(),
                reply: m.reply(),
                code: wire::E_MALFORMED,
                state: None,
                detail: Some(m.rule.describe()),
                replayed: false,
            };
        }
    };
    // A ledger that cannot be written fails every request alike (a full disk): the log says
    // so about once a second, the metrics count every E905.
    let ledger_error = |what: &str, e: &dyn std::fmt::Display| {
        warn_limited!(PER_REQUEST, "ledger errors (E905)",
            guid:% = t.guid; "cannot {what} the ledger: {e}");
        Handled::short(&t.guid, msg, wire::E_LEDGER, None)
    };
    let recovering = mode == Mode::Recovering;
    // Recovery mode asks the core before a claim: a claim made first would skip the question.
    let claim_first = store.claims_first() && !recovering;
    for round in 0..MAX_ROUNDS {
        let read = if round == 0 && claim_first {
            // The contract's order: claim, and read only if the claim lost.
            match store.claim_new(&t.guid, TX_TRNF, msg, channel) {
                Ok(true) => return send_and_record(store, core, events, channel, &t, msg, 1),
                Ok(false) => store.read(&t.guid),
                Err(e) => return ledger_error("write", &e),
            }
        } else {
            store.read(&t.guid)
        };
        let row = match read {
            Err(e) => return ledger_error("read", &e),
            Ok(row) => row,
        };
        if let Some(row) = &row
            && let Some(answer) = answer_from_row(row, channel, msg)
        {
            return answer;
        }
        // No row (a new GUID), or a FAILED one (its earlier send provably never left): it
        // may go now if we win the claim, and, recovering, only once the core has said that
        // it never booked the GUID (a ledger put back may have forgotten that it did).
        if recovering {
            match recovery::before_claim(store, core, events, channel, &t, msg, row.as_ref()) {
                Before::Claim => {}
                Before::Answered(answer) => return answer,
                Before::Lost => continue,
            }
        }
        let claimed = match row {
            None => store
                .claim_new(&t.guid, TX_TRNF, msg, channel)
                .map(|won| won.then_some(1)),
            Some(_) => store.reclaim_failed(&t.guid, msg, channel),
        };
        match claimed {
            Ok(Some(attempt)) => {
                return send_and_record(store, core, events, channel, &t, msg, attempt);
            }
            Ok(None) => continue,
            Err(e) => return ledger_error("write", &e),
        }
    }
    Handled::short(&t.guid, msg, wire::E_IN_FLIGHT, None)
}

/// Sends a transfer whose GUID this caller has just claimed (its row is SENT on `attempt`,
/// ours), and records the result from SENT on that attempt, answering for `channel` (the
/// one that asked; reprocess: the row's own). Shared by the relay and `reprocess`. When
/// `events` keeps late calls, a call that timed out waiting for the answer is handed to it
/// once its row is recorded UNKNOWN (see `late`).
pub fn send_and_record<S: Transfers + Recovering + ?Sized, C: Core + ?Sized>(
    store: &S,
    core: &C,
    events: &dyn Events,
    channel: Option<&str>,
    t: &Transfer,
    msg: &[u8],
    attempt: i64,
) -> Handled {
    let clock = events.clock();
    let called = clock.now();
    let record_by = called + core.deadline() + RECORD_WINDOW;
    let (outcome, call) = if events.keeps_late_calls() {
        core.post_transfer_keeping_late(t)
    } else {
        (core.post_transfer(t), None)
    };
    let took = clock.now().saturating_duration_since(called);
    events.core_call(outcome.label(), took);
    // A send that failed says why in the log and in the row's history (read timeout, HTTP
    // 500, reset, refused, ...): the investigator's first question about an UNKNOWN row. The
    // log says it at most once a second per kind (a core that is down fails every request
    // alike); the history row of each GUID, and the metrics, have every one.
    let (state, code, body, reason) = match &outcome {
        Outcome::Booked(body) => (State::Done, wire::OK, Some(body), None),
        Outcome::Rejected(code) => (State::Done, *code, None, None),
        Outcome::NotSent(why) => {
            warn_limited!(PER_REQUEST, "E902 (not sent to the core)",
                guid:% = t.guid, code = "E902"; "not sent to the core: {why}");
            let reason = format!("not sent to the core: {why}");
            (State::Failed, wire::E_NOT_SENT, None, Some(reason))
        }
        Outcome::Unknown(why) => {
            warn_limited!(PER_REQUEST, "E901 (outcome unknown)",
                guid:% = t.guid, code = "E901"; "outcome unknown: {why}");
            let reason = format!("outcome unknown: {why}");
            (State::Unknown, wire::E_UNKNOWN, None, Some(reason))
        }
    };
    let mut change = Change::new(
        &t.guid,
        State::Sent,
        Some(attempt),
        state,
        code,
        wire::reply_to(msg, &code, body),
    );
    change.reason = reason;
    let (handled, _) = record_result(store, events, msg, channel, change, record_by);
    if let Some(call) = call
        && handled.state == Some(State::Unknown)
    {
        events.late_call(call, attempt, msg.to_vec());
    }
    handled
}
