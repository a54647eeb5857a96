//! What happens to one transfer request (contract §5, steps 1–3): claim the GUID, or answer
//! from its row; call the core only when the claim was ours; record the result.

use log::warn;

use crate::core_client::{CoreClient, Outcome};
use crate::store::{Row, State, Store};
use crate::wire::{self, Code, TX_TRNF, Transfer};

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
/// The row is read first, so that a resend of a known GUID is answered without queueing a
/// write. A read never authorises a send: only a claim's row count does (the INSERT for a new
/// GUID, the guarded UPDATE for a FAILED one). When a claim loses, the row is read again.
pub fn handle(store: &impl Store, core: &CoreClient, msg: &[u8]) -> Handled {
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
    for _ in 0..MAX_ROUNDS {
        let claimed = match store.read(&t.guid) {
            Err(e) => return ledger_error("read", &e),
            Ok(None) => store.claim_new(&t.guid, TX_TRNF, msg),
            Ok(Some(row)) => match answer_from_row(&row, msg) {
                Some(answer) => return answer,
                // FAILED: the earlier send provably never left, so it may go now, if we win it.
                None => store.reclaim_failed(&t.guid, msg),
            },
        };
        match claimed {
            Ok(true) => return send_and_record(store, core, &t, msg),
            Ok(false) => continue,
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

/// Sends a transfer whose GUID this caller has just claimed (its row is SENT and ours), and
/// records the result from SENT. Shared by the relay and `reprocess`.
pub fn send_and_record(store: &impl Store, core: &CoreClient, t: &Transfer, msg: &[u8]) -> Handled {
    let outcome = core.post_transfer(t);
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
    let reply = wire::reply_to(msg, &code, body);
    let code_str = std::str::from_utf8(&code).expect("codes are ASCII");
    match store.transition(&t.guid, State::Sent, state, code_str, &reply) {
        Ok(true) => Handled {
            guid: t.guid.clone(),
            reply,
            code,
            state: Some(state),
        },
        Ok(false) => {
            // Someone settled the row while we waited (resolve --stale-sent): the ledger is
            // the truth the channel will see on resend, so answer from it or say "unknown".
            warn!(
                "guid={} was settled by another writer during the call",
                t.guid
            );
            match store.read(&t.guid) {
                Ok(Some(row)) if row.state == State::Done && row.response.is_some() => {
                    answer_from_row(&row, msg)
                        .unwrap_or_else(|| Handled::short(&t.guid, msg, wire::E_UNKNOWN, None))
                }
                _ => Handled::short(&t.guid, msg, wire::E_UNKNOWN, None),
            }
        }
        Err(e) => {
            warn!(
                "guid={} core answered {code_str} but the result cannot be recorded: {e}",
                t.guid
            );
            Handled::short(&t.guid, msg, wire::E_UNKNOWN, Some(State::Sent))
        }
    }
}
