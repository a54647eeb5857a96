//! `approve ID` and `reject ID`: the second person's decision on a settlement request
//! (contract §12). An approval checks again what `settle` checked when the request was made
//! (the row still in the state and attempts the request saw, unchanged for long enough, and
//! for `--not-booked` the canary and the core's inquiry), then carries the request out: the
//! decision and one guarded UPDATE of the row from the recorded state and attempts, in one
//! transaction, both or neither. A rejection closes a pending or expired request without a
//! change. Who decides is the system's identity; the ledger itself refuses the maker.
//!
//! Exit 0: approved (the row changed) or rejected. Exit 1: refused (no such request, not
//! pending, the maker deciding, a row that changed, an inquiry that no longer proves "never
//! booked"), one line on stderr (with `--json` one object on stdout too), nothing written.

use cli::EXIT_SETTLED;
use engine::batch::stored_transfer;
use ledger::settle_request::{Decided, SettleRequest, Status};
use ledger::{Access, Db, State, Store};
use serde_json::json;

use crate::checks::{self, ANSWERS_BOOKED, BOOKED, NEVER_BOOKED, NOT_BOOKED, doubt, unchanged_for};
use crate::settle::change_line;
use crate::show::ReplyView;

/// What the second person decides.
pub enum Order {
    Approve {
        id: i64,
        reason: Option<String>,
        core: cli::Core,
    },
    Reject {
        id: i64,
        reason: String,
    },
}

/// `approve ID` or `reject ID`.
pub fn decide(db: &Db, json: bool, o: Order) -> anyhow::Result<u8> {
    let (verb, id) = match &o {
        Order::Approve { id, .. } => ("approve", *id),
        Order::Reject { id, .. } => ("reject", *id),
    };
    let refused =
        |why: &str| checks::refuse(&format!("{verb} {id}"), json!({ "request": id }), json, why);
    let ledger = db.open(Access::Tool, "inspect")?;
    let Some(r) = ledger.settle_request(id)? else {
        return refused("no settlement request has this id");
    };
    let me = ledger.identity()?;
    if r.maker == me {
        return refused(&format!(
            "{me} made this request: another person must {verb} it (the ledger refuses its \
             maker)"
        ));
    }
    let decided = match o {
        Order::Reject { reason, .. } => {
            if !matches!(r.status, Status::Pending | Status::Expired) {
                return refused(&format!("the request is {} already", r.status.as_str()));
            }
            ledger.reject_settle_request(id, &reason)?
        }
        Order::Approve { reason, core, .. } => {
            if r.status != Status::Pending {
                return refused(&format!(
                    "the request is {}: only a pending request is approved{}",
                    r.status.as_str(),
                    if r.status == Status::Expired {
                        "; close it with `inspect reject` and make a new one"
                    } else {
                        ""
                    }
                ));
            }
            let why = match checked_again(ledger.as_ref(), &r, core)? {
                Err(why) => return refused(&why),
                Ok(inquiry) => approval_note(reason.as_deref(), inquiry.as_deref()),
            };
            ledger.approve_settle_request(id, why.as_deref())?
        }
    };
    let done = match decided {
        Decided::Done(done) => done,
        Decided::NoSuchRequest => return refused("no settlement request has this id"),
        Decided::NotPending(now) => {
            return refused(&format!("the request is {} now", now.status.as_str()));
        }
        Decided::RowChanged(_) => return refused(&row_changed(ledger.as_ref(), &r)?),
    };
    if done.status == Status::Approved {
        // Its failed inquiries are history now (resolve would forget them at its next run).
        if let Err(e) = ledger.clear_inquiry(&done.guid) {
            cli::stderr_line(
                "inspect",
                log::Level::Warn,
                &format!(
                    "approve {id}: cannot clear the failed inquiries of {}: {e}",
                    done.guid
                ),
            );
        }
    }
    print(verb, &done, json)
}

/// The row as the request saw it, unchanged long enough, and (not booked) the core's word
/// still proving it: `Ok(what the inquiry said now)`, or `Err(why not)`.
fn checked_again(
    ledger: &dyn Store,
    r: &SettleRequest,
    core: cli::Core,
) -> anyhow::Result<Result<Option<String>, String>> {
    let Some(row) = ledger.read(&r.guid)? else {
        return Ok(Err(format!("the row of {} is gone", r.guid)));
    };
    if row.state != r.seen_state || row.attempts != Some(r.seen_attempts) {
        return Ok(Err(row_changed(ledger, r)?));
    }
    let (transfer, request) = match stored_transfer(&row) {
        Ok(x) => x,
        Err(why) => return Ok(Err(format!("{why}: no reply can be built for it"))),
    };
    // The change is what `settle` builds from this row, whatever wrote the request.
    if let Err(why) = as_settle_builds(r, transfer.amount, request) {
        return Ok(Err(format!(
            "the request is not one `inspect settle` makes ({why}); reject it"
        )));
    }
    let not_booked = (r.outcome == NOT_BOOKED).then_some(r.min_age_secs.unwrap_or(0));
    if let Some(Some(need)) = unchanged_for(row.state, not_booked)
        && let Err(why) = need.check(ledger, &r.guid, row.state)
    {
        return Ok(Err(why.to_string()));
    }
    if not_booked.is_none() {
        return Ok(Ok(None));
    }
    let client = core.client()?;
    Ok(match doubt(ledger, &client, &transfer, request)? {
        None => Ok(Some(NEVER_BOOKED.to_string())),
        // The core now says it booked it: approving would have reprocess book it again,
        // forced or not (a forced request is one made while the core could not be asked, or
        // could not be believed, never against its 200).
        Some((what, _)) if r.forced && what.starts_with(ANSWERS_BOOKED) => Err(format!(
            "{what}, which the forced request did not know; reject the request (settle \
             --booked with that booking)"
        )),
        // The maker asked to settle it without that proof, and says so in the reason.
        Some((what, _)) if r.forced => Ok(Some(what)),
        Some((what, _)) => Err(format!(
            "{what}: it no longer proves \"never booked\"; reject the request"
        )),
    })
}

/// Whether the request's change is the one `settle` builds from the row's stored request:
/// booked, DONE/0000 with a booking of the request's amount (the reply its header and that
/// booking); not booked, FAILED/E902 header only, with its age guard. A request written by
/// other means than the tool is carried out only if it is one the tool could have made.
fn as_settle_builds(r: &SettleRequest, amount: u64, request: &[u8]) -> Result<(), String> {
    let code = |c: &wire::Code| String::from_utf8_lossy(c).into_owned();
    let expected = match r.outcome.as_str() {
        BOOKED => {
            let reply = wire::parse_reply(&r.response)?;
            let booked = reply.booking.map(|b| b.amount);
            if booked != Some(amount) {
                return Err(format!(
                    "its reply books {booked:?}, the request's amount is {amount}"
                ));
            }
            let body: &[u8; wire::BOOKING_BODY_LEN] = r
                .response
                .get(wire::HEADER_LEN..)
                .and_then(|b| b.try_into().ok())
                .ok_or("its reply has no booking body")?;
            (
                State::Done,
                code(&wire::OK),
                wire::reply_to(request, &wire::OK, Some(body)),
            )
        }
        NOT_BOOKED if r.min_age_secs.is_none() => return Err("no age guard".into()),
        NOT_BOOKED => (
            State::Failed,
            code(&wire::E_NOT_SENT),
            wire::reply_to(request, &wire::E_NOT_SENT, None),
        ),
        other => return Err(format!("outcome {other:?}")),
    };
    let (to, code, reply) = expected;
    if (r.to_state, &r.rsp_code) != (to, &code) {
        return Err(format!(
            "{} asks for {}/{}, not {to}/{code}",
            r.outcome, r.to_state, r.rsp_code
        ));
    }
    if r.response != reply {
        return Err(format!(
            "its reply is not the {to}/{code} reply of the row's stored request"
        ));
    }
    Ok(())
}

/// What the history adds to the request's reason: the checker's, and the inquiry's answer now.
fn approval_note(reason: Option<&str>, inquiry: Option<&str>) -> Option<String> {
    let inquiry = inquiry.map(|i| format!("inquiry at approval: {i}"));
    match (reason, inquiry) {
        (Some(r), Some(i)) => Some(format!("{r}; {i}")),
        (r, i) => r.map(str::to_string).or(i),
    }
}

/// The refusal of a request whose row is no longer as it saw it.
fn row_changed(ledger: &dyn Store, r: &SettleRequest) -> anyhow::Result<String> {
    let now = ledger.read(&r.guid)?.map_or("gone".to_string(), |row| {
        format!(
            "now {}/{}, attempts {}",
            row.state,
            row.rsp_code.as_deref().unwrap_or("-"),
            row.attempts.map_or("-".into(), |a| a.to_string())
        )
    });
    Ok(format!(
        "the row of {} changed since the request ({now}; the request saw {}, attempts {}): \
         the request stays pending; reject it, and look again with `inspect show {}`",
        r.guid, r.seen_state, r.seen_attempts, r.guid
    ))
}

fn print(verb: &str, r: &SettleRequest, json: bool) -> anyhow::Result<u8> {
    let reply = ReplyView::of(&r.response).map_err(anyhow::Error::msg)?;
    let approved = r.status == Status::Approved;
    if json {
        let mut v = json!(r);
        v["reply"] = json!(reply);
        v["written"] = json!(approved);
        return Ok(cli::print_object("inspect", v, EXIT_SETTLED));
    }
    let change = change_line(
        r.seen_state,
        r.to_state,
        &r.rsp_code,
        r.seen_attempts,
        r.min_age_secs,
    );
    let checker = r.checker.as_deref().unwrap_or("-");
    cli::outln!(
        "{verb} {}: settle {}: {change}, asked by {}, {} by {checker}, reason: {}",
        r.id,
        r.guid,
        r.maker,
        r.status.as_str(),
        r.reason
    );
    if let Some(why) = &r.decision_reason {
        cli::outln!("{}: {why}", if approved { "approval" } else { "rejection" });
    }
    cli::outln!("reply: {}", reply.line());
    cli::outln!(
        "{}",
        if approved {
            "written"
        } else {
            "closed: the row is unchanged"
        }
    );
    Ok(EXIT_SETTLED)
}
