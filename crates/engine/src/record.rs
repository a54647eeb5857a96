//! Recording a call's result, and what the channel is told: the guarded change from SENT on
//! the call's attempt, retried while the ledger fails; and when the row moved on during the
//! call (another writer settled it), putting a FAILED row right or keeping the evidence of a
//! possible double booking. Shared by one transfer (`transfer`) and late replies (`late`).

use std::time::{Duration, Instant};

use ledger::error::LedgerError;
use ledger::state::{Change, Row, State};
use ledger::store::Transfers;
use log::warn;
use wire::{self, Code};

use crate::clock::Clock;
use crate::double_booking;
use crate::events::Events;
use crate::recovery;
use log_limit::{PER_REQUEST, warn_limited};

/// How long after its core call the relay keeps retrying a result it could not write (the
/// ledger locked by a long transaction, say) before it gives up with E901, row SENT.
pub const RECORD_WINDOW: Duration = Duration::from_secs(10);

/// The answer to one request, with what the relay logs about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handled {
    pub guid: String,
    /// The reply message, without length prefix.
    pub reply: Vec<u8>,
    pub code: Code,
    /// The row's state as this request left it (`None`: nothing written, or not readable).
    pub state: Option<State>,
    /// For the log: which field broke which rule (an `E900`).
    pub detail: Option<&'static str>,
    /// Answered from a row that was already DONE (its stored reply): a replay.
    pub replayed: bool,
}

impl Handled {
    /// The answer of a change that was made: the reply it stored.
    fn recorded(c: Change) -> Handled {
        Handled {
            guid: c.guid,
            reply: c.response,
            code: c.code,
            state: Some(c.to),
            detail: None,
            replayed: false,
        }
    }

    pub(crate) fn short(guid: &str, request: &[u8], code: Code, state: Option<State>) -> Handled {
        Handled {
            guid: guid.to_string(),
            reply: wire::reply_to(request, &code, None),
            code,
            state,
            detail: None,
            replayed: false,
        }
    }
}

/// The answer an existing row gives to a request for its GUID from `channel`, or `None` for
/// FAILED, which may be claimed again (by the guarded re-claim, which checks ownership once
/// more in its WHERE).
///
/// A GUID belongs to the channel that claimed it (contract §8): a row that names a channel
/// answers any other channel, and an anonymous one, `E904`, before anything of the row is
/// read out. A row with no channel answers anyone.
///
/// A row without a stored request answers `E904`, unless it is a booking `restore
/// --journal` wrote (contract §11): see `recovery::answer_without_request`.
pub(crate) fn answer_from_row(row: &Row, channel: Option<&str>, msg: &[u8]) -> Option<Handled> {
    let short = |code| Some(Handled::short(&row.guid, msg, code, Some(row.state)));
    if !may_use(row, channel) {
        return short(wire::E_GUID_REUSED);
    }
    let Some(request) = row.request.as_deref() else {
        return Some(recovery::answer_without_request(row, msg));
    };
    if request != msg {
        return short(wire::E_GUID_REUSED);
    }
    match row.state {
        State::Done => match &row.response {
            Some(stored) => Some(Handled {
                guid: row.guid.clone(),
                reply: stored.clone(),
                code: stored_code(stored),
                state: Some(State::Done),
                detail: None,
                replayed: true,
            }),
            // A hand-made DONE row: never invent a body.
            None => short(wire::E_UNKNOWN),
        },
        State::Sent | State::Received => short(wire::E_IN_FLIGHT),
        State::Unknown => short(wire::E_UNKNOWN),
        State::Failed => None,
    }
}

/// Whether `channel` may use `row`'s GUID: its own, or a row no channel owns.
fn may_use(row: &Row, channel: Option<&str>) -> bool {
    match row.channel.as_deref() {
        None => true,
        Some(owner) => channel == Some(owner),
    }
}

fn stored_code(reply: &[u8]) -> Code {
    reply
        .get(41..45)
        .and_then(|c| c.try_into().ok())
        .unwrap_or(*b"????")
}

/// Records a result `change` (from the state and attempt it names), retrying while the
/// ledger fails until `by`. If the row has moved on, see `after_miss`. The answer is what
/// the ledger now says, for the channel that asked (`channel`, as in [`answer_from_row`]);
/// the flag says whether this call wrote the result.
pub fn record_result<S: Transfers + ?Sized>(
    store: &S,
    events: &dyn Events,
    msg: &[u8],
    channel: Option<&str>,
    change: Change,
    by: Instant,
) -> (Handled, bool) {
    match record(store, events.clock(), &change, by) {
        Ok(true) => (Handled::recorded(change), true),
        Ok(false) => after_miss(store, events, msg, channel, change),
        Err(e) => {
            // A ledger that fails every write fails every result alike: limited, as E905 is.
            warn_limited!(PER_REQUEST, "results that cannot be recorded (E901, row SENT)",
                guid:% = change.guid; "core answered {} but the result cannot be recorded: {e}",
                change.code_str()
            );
            let answer = Handled::short(&change.guid, msg, wire::E_UNKNOWN, Some(change.from));
            (answer, false)
        }
    }
}

/// Makes a guarded change, retrying while the ledger fails until `by`: safe, because the
/// statement names the state and attempt it leaves, so it happens at most once. A change
/// whose commit was not replicated (PostgreSQL) is not retried.
fn record<S: Transfers + ?Sized>(
    store: &S,
    clock: &dyn Clock,
    change: &Change,
    by: Instant,
) -> ledger::error::Result<bool> {
    let mut pause = Duration::from_millis(20);
    loop {
        match store.transition(change) {
            // Not retried: the write is on the primary alone, and a retry would find the row
            // moved on and answer from it as if the result were durable.
            Err(e @ LedgerError::NotReplicated { .. }) => return Err(e),
            Err(e) if clock.now() + pause < by => {
                // A ledger that stays locked makes every request retry dozens of times.
                warn_limited!(PER_REQUEST, "results retried",
                    guid:% = change.guid; "cannot record {} yet, retrying: {e}",
                    change.code_str()
                );
                clock.sleep(pause);
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
fn after_miss<S: Transfers + ?Sized>(
    store: &S,
    events: &dyn Events,
    msg: &[u8],
    channel: Option<&str>,
    change: Change,
) -> (Handled, bool) {
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
                    warn!(guid:% = guid; "attempt {}'s result {} came after the row was moved to \
                         {from}: moved {from} -> {}",
                        row.attempts.unwrap_or_default(),
                        fix.code_str(),
                        fix.to
                    );
                    return (Handled::recorded(fix), true);
                }
                Ok(false) => {}
                Err(e) => warn!(guid:% = guid; "cannot move {from} -> {}: {e}", fix.to),
            }
            let ours = State::Unknown;
            return (answer_after_miss(store, msg, channel, &guid, ours), false);
        }
    }
    if let Some(row) = &row
        && row.attempts > change.attempt
        && change.to != State::Failed
    {
        let now = row.attempts.unwrap_or(0);
        double_booking::earlier_attempt_came_back(store, events, &change, now);
    } else {
        warn!(guid:% = guid; "was settled by another writer during the call");
    }
    (
        answer_after_miss(store, msg, channel, &guid, change.to),
        false,
    )
}

/// What the ledger now says about a GUID whose result could not be recorded as it came: the
/// stored reply of a DONE row, E902 for a FAILED row when the call did not leave either,
/// E901 otherwise. (A row a FAILED re-claim gave to another channel meanwhile answers E904.)
fn answer_after_miss<S: Transfers + ?Sized>(
    store: &S,
    msg: &[u8],
    channel: Option<&str>,
    guid: &str,
    ours: State,
) -> Handled {
    match store.read(guid) {
        Ok(Some(row)) if row.state == State::Done && row.response.is_some() => {
            answer_from_row(&row, channel, msg)
                .unwrap_or_else(|| Handled::short(guid, msg, wire::E_UNKNOWN, None))
        }
        Ok(Some(row)) if row.state == State::Failed && ours == State::Failed => {
            Handled::short(guid, msg, wire::E_NOT_SENT, Some(State::Failed))
        }
        _ => Handled::short(guid, msg, wire::E_UNKNOWN, None),
    }
}
