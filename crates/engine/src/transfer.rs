//! What happens to one transfer request (contract §5, steps 1–3): claim the GUID, or answer
//! from its row; call the core only when the claim was ours; record the result.

use std::time::{Duration, Instant};

use log::warn;

use std::sync::Arc;

use crate::core::Core;
use crate::double_booking;
use crate::late::LateReplies;
use crate::metrics::metrics;
use core_client::Outcome;
use ledger::sqlite::BUSY_TIMEOUT;
use ledger::state::{Change, Row, State};
use ledger::store::Store;
use wire::{self, Code, TX_TRNF, Transfer};

/// How long after its core call the relay keeps retrying a result it could not write (the
/// ledger locked by a long transaction, say) before it gives up with E901, row SENT.
pub const RECORD_WINDOW: Duration = Duration::from_secs(10);

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

/// The answer to one request, with what the relay logs about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handled {
    pub guid: String,
    /// The reply message, without length prefix.
    pub reply: Vec<u8>,
    pub code: Code,
    /// The row's state as this request left it (`None`: nothing written, or not readable).
    pub state: Option<State>,
}

impl Handled {
    /// The answer of a change that was made: the reply it stored.
    fn recorded(c: Change) -> Handled {
        Handled {
            guid: c.guid,
            reply: c.response,
            code: c.code,
            state: Some(c.to),
        }
    }

    fn short(guid: &str, request: &[u8], code: Code, state: Option<State>) -> Handled {
        Handled {
            guid: guid.to_string(),
            reply: wire::reply_to(request, &code, None),
            code,
            state,
        }
    }
}

/// How many times a request re-reads a row that changes under it before answering E903.
const MAX_ROUNDS: usize = 3;

/// Answers one request message (the frame's content).
///
/// On SQLite the row is read first, so that a resend of a known GUID is answered without
/// queueing a write; on PostgreSQL the claim comes first (one round trip for a new GUID; a
/// claim that finds the row writes nothing). A read never authorises a send: only a claim's
/// row count does (the INSERT for a new GUID, the guarded UPDATE for a FAILED one). When a
/// claim loses, the row is read again.
pub fn handle<S: Store + ?Sized, C: Core + ?Sized>(
    store: &S,
    core: &C,
    late: Option<&Arc<LateReplies>>,
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
            };
        }
    };
    let ledger_error = |what: &str, e: &dyn std::fmt::Display| {
        warn!("guid={} cannot {what} the ledger: {e}", t.guid);
        Handled::short(&t.guid, msg, wire::E_LEDGER, None)
    };
    for round in 0..MAX_ROUNDS {
        let read = if round == 0 && store.claims_first() {
            // The contract's order: claim, and read only if the claim lost.
            match store.claim_new(&t.guid, TX_TRNF, msg) {
                Ok(true) => return send_and_record(store, core, late, &t, msg, 1),
                Ok(false) => store.read(&t.guid),
                Err(e) => return ledger_error("write", &e),
            }
        } else {
            store.read(&t.guid)
        };
        let claimed = match read {
            Err(e) => return ledger_error("read", &e),
            Ok(None) => store
                .claim_new(&t.guid, TX_TRNF, msg)
                .map(|won| won.then_some(1)),
            Ok(Some(row)) => match answer_from_row(&row, msg) {
                Some(answer) => return answer,
                // FAILED: the earlier send provably never left, so it may go now, if we win it.
                None => store.reclaim_failed(&t.guid, msg),
            },
        };
        match claimed {
            Ok(Some(attempt)) => {
                return send_and_record(store, core, late, &t, msg, attempt);
            }
            Ok(None) => continue,
            Err(e) => return ledger_error("write", &e),
        }
    }
    Handled::short(&t.guid, msg, wire::E_IN_FLIGHT, None)
}

/// The answer an existing row gives to a request for its GUID, or `None` for FAILED, which
/// may be claimed again.
fn answer_from_row(row: &Row, msg: &[u8]) -> Option<Handled> {
    let short = |code| Some(Handled::short(&row.guid, msg, code, Some(row.state)));
    if row.request.as_deref() != Some(msg) {
        return short(wire::E_GUID_REUSED);
    }
    match row.state {
        State::Done => match &row.response {
            Some(stored) => Some(Handled {
                guid: row.guid.clone(),
                reply: stored.clone(),
                code: stored_code(stored),
                state: Some(State::Done),
            }),
            // A hand-made DONE row: never invent a body.
            None => short(wire::E_UNKNOWN),
        },
        State::Sent | State::Received => short(wire::E_IN_FLIGHT),
        State::Unknown => short(wire::E_UNKNOWN),
        State::Failed => None,
    }
}

fn stored_code(reply: &[u8]) -> Code {
    reply
        .get(41..45)
        .and_then(|c| c.try_into().ok())
        .unwrap_or(*b"????")
}

/// Sends a transfer whose GUID this caller has just claimed (its row is SENT on `attempt`,
/// ours), and records the result from SENT on that attempt. Shared by the relay and
/// `reprocess`. With `late`, a call that timed out waiting for the answer is handed to a
/// background waiter once its row is recorded UNKNOWN (see `late`).
pub fn send_and_record<S: Store + ?Sized, C: Core + ?Sized>(
    store: &S,
    core: &C,
    late: Option<&Arc<LateReplies>>,
    t: &Transfer,
    msg: &[u8],
    attempt: i64,
) -> Handled {
    let record_by = Instant::now() + core.deadline() + RECORD_WINDOW;
    let called = Instant::now();
    let (outcome, call) = match late {
        Some(_) => core.post_transfer_keeping_late(t),
        None => (core.post_transfer(t), None),
    };
    metrics().core_call(outcome.label(), called.elapsed());
    let (state, code, body) = match &outcome {
        Outcome::Booked(body) => (State::Done, wire::OK, Some(body)),
        Outcome::Rejected(code) => (State::Done, *code, None),
        Outcome::NotSent(why) => {
            warn!("guid={} not sent to the core: {why}", t.guid);
            (State::Failed, wire::E_NOT_SENT, None)
        }
        Outcome::Unknown(why) => {
            warn!("guid={} outcome unknown: {why}", t.guid);
            (State::Unknown, wire::E_UNKNOWN, None)
        }
    };
    let change = Change::new(
        &t.guid,
        State::Sent,
        Some(attempt),
        state,
        code,
        wire::reply_to(msg, &code, body),
    );
    let (handled, _) = record_result(store, msg, change, record_by);
    if let (Some(late), Some(call)) = (late, call)
        && handled.state == Some(State::Unknown)
    {
        late.adopt(call, attempt, msg.to_vec());
    }
    handled
}

/// Records a result `change` (from the state and attempt it names), retrying while the
/// ledger fails until `by`. If the row has moved on, see `after_miss`. The answer is what
/// the ledger now says, for the channel; the flag says whether this call wrote the result.
pub fn record_result<S: Store + ?Sized>(
    store: &S,
    msg: &[u8],
    change: Change,
    by: Instant,
) -> (Handled, bool) {
    match record(store, &change, by) {
        Ok(true) => (Handled::recorded(change), true),
        Ok(false) => after_miss(store, msg, change),
        Err(e) => {
            warn!(
                "guid={} core answered {} but the result cannot be recorded: {e}",
                change.guid,
                change.code_str()
            );
            let answer = Handled::short(&change.guid, msg, wire::E_UNKNOWN, Some(change.from));
            (answer, false)
        }
    }
}

/// Makes a guarded change, retrying while the ledger fails until `by`: safe, because the
/// statement names the state and attempt it leaves, so it happens at most once.
fn record<S: Store + ?Sized>(
    store: &S,
    change: &Change,
    by: Instant,
) -> ledger::error::Result<bool> {
    let mut pause = Duration::from_millis(20);
    loop {
        match store.transition(change) {
            Err(e) if Instant::now() + pause < by => {
                warn!(
                    "guid={} cannot record {} yet, retrying: {e}",
                    change.guid,
                    change.code_str()
                );
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(500));
            }
            done => return done,
        }
    }
}

/// The result's change from SENT found the row elsewhere: someone settled it during the
/// call (`resolve --stale-sent` on a short margin, or an operator). The ledger must never say
/// "never sent" (FAILED) about a transfer the core may have booked, so a booked or unknown
/// result moves a FAILED row of the same attempt to DONE or UNKNOWN, and a booked one an
/// UNKNOWN row to DONE, each by one guarded statement. Then the channel gets what the ledger
/// says, which is what its resends will get.
fn after_miss<S: Store + ?Sized>(store: &S, msg: &[u8], change: Change) -> (Handled, bool) {
    let guid = change.guid.clone();
    let row = store.read(&guid).ok().flatten();
    if let Some(row) = &row
        && row.attempts == change.attempt
    {
        let from = match (row.state, change.to) {
            (State::Failed, State::Done | State::Unknown) => Some(State::Failed),
            (State::Unknown, State::Done) => Some(State::Unknown),
            _ => None,
        };
        if let Some(from) = from {
            let fix = Change { from, ..change }.because(format!(
                "result of attempt {} after the row was settled",
                row.attempts.unwrap_or_default()
            ));
            match store.transition(&fix) {
                Ok(true) => {
                    warn!(
                        "guid={guid} attempt {}'s result {} came after the row was moved to \
                         {from}: moved {from} -> {}",
                        row.attempts.unwrap_or_default(),
                        fix.code_str(),
                        fix.to
                    );
                    return (Handled::recorded(fix), true);
                }
                Ok(false) => {}
                Err(e) => warn!("guid={guid} cannot move {from} -> {}: {e}", fix.to),
            }
            return (answer_after_miss(store, msg, &guid, State::Unknown), false);
        }
    }
    if let Some(row) = &row
        && row.attempts > change.attempt
        && change.to != State::Failed
    {
        double_booking::earlier_attempt_came_back(store, &change, row.attempts.unwrap_or(0));
    } else {
        warn!("guid={guid} was settled by another writer during the call");
    }
    (answer_after_miss(store, msg, &guid, change.to), false)
}

/// What the ledger now says about a GUID whose result could not be recorded as it came: the
/// stored reply of a DONE row, E902 for a FAILED row when the call did not leave either,
/// E901 otherwise.
fn answer_after_miss<S: Store + ?Sized>(store: &S, msg: &[u8], guid: &str, ours: State) -> Handled {
    match store.read(guid) {
        Ok(Some(row)) if row.state == State::Done && row.response.is_some() => {
            answer_from_row(&row, msg)
                .unwrap_or_else(|| Handled::short(guid, msg, wire::E_UNKNOWN, None))
        }
        Ok(Some(row)) if row.state == State::Failed && ours == State::Failed => {
            Handled::short(guid, msg, wire::E_NOT_SENT, Some(State::Failed))
        }
        _ => Handled::short(guid, msg, wire::E_UNKNOWN, None),
    }
}
