//! `settle`: an operator's **request** to settle one GUID in doubt, on evidence from outside
//! the relay (contract §12). It changes no row: it records the GUID, the state and attempts
//! the row has now, the change asked for with its evidence, the reason, who asks (the system's
//! identity, never a flag) and an expiry (`--expires`, 24 h by default), and prints the
//! request's id; another person carries it out with `inspect approve ID` (`approve.rs`).
//!
//! The checks are the ones a settlement always made, run now and again at the approval: only
//! from UNKNOWN, or from SENT unchanged for the stale-sent floor (no relay can still be
//! waiting for the core on it); `--not-booked`, from either, only for a row unchanged for
//! `--min-age` (default 300 s, resolve's deployed default, never under the floor), since a 404
//! proves "never booked" only once the core cannot still be working on the request.
//!
//! `--booked`: DONE/0000, the reply built from the booking exactly as resolve builds it from
//! an inquiry (`wire::booking_body`, `wire::reply_to` on the stored request), with the
//! request's amount. `--not-booked`: FAILED/E902 (so that reprocess may resend it), only while
//! the core's inquiry answers 404 and that core passes resolve's canary, unless `--force`
//! (which the reason then says, with what the canary or the inquiry said).
//!
//! Exit 0: requested (or, with `--dry-run`, would be). Exit 1: refused (no such row, a state
//! that is not settled by hand, a row too young, a stored request that cannot carry a reply, a
//! canary that failed or is missing, an inquiry that did not answer 404), one line on stderr
//! (with `--json` one object on stdout too), nothing written.

use clap::error::ErrorKind;
use cli::EXIT_SETTLED;
use engine::batch::stored_transfer;
use ledger::settle_request::NewRequest;
use ledger::{Access, Db, State};
use serde::Serialize;
use serde_json::json;
use wire::{self, BOOKING_BODY_LEN};

use crate::checks::{
    self, ANSWERS_BOOKED, BOOKED, NEVER_BOOKED, NOT_BOOKED, doubt, not_settled_by_hand,
    unchanged_for,
};
use crate::show::ReplyView;
use crate::{SettleArgs, usage_error};

/// What the operator says about the GUID.
enum Decision {
    /// The core booked it: the reply body, checked when the flags were read.
    Booked {
        amount: u64,
        body: [u8; BOOKING_BODY_LEN],
        evidence: String,
    },
    /// The core never booked it; `force`: even if its inquiry does not answer 404. Only for
    /// a row unchanged for `min_age` seconds.
    NotBooked {
        force: bool,
        core: cli::Core,
        min_age: u64,
    },
}

/// A settlement request as the flags give it, checked as far as it can be without the ledger.
pub struct Order {
    guid: String,
    decision: Decision,
    reason: String,
    expires_in_secs: u64,
    dry_run: bool,
}

impl Order {
    /// The flags, with the booking checked as resolve would check the core's JSON: a
    /// booking the reply cannot carry is a usage error (exit 2) naming its flag.
    pub fn from_args(a: SettleArgs) -> Order {
        let decision = if a.booked {
            let (core_ref, amount, booked_at) = match (a.core_ref, a.amount, a.booked_at) {
                (Some(r), Some(n), Some(t)) => (r, n, t),
                _ => unreachable!("clap requires --core-ref, --amount and --booked-at"),
            };
            let body = wire::booking_body(&core_ref, amount, &booked_at).unwrap_or_else(|e| {
                let flag = ["core_ref", "amount", "booked_at"]
                    .into_iter()
                    .find(|f| e.0.starts_with(f))
                    .map_or("--booked".to_string(), |f| {
                        format!("--{}", f.replace('_', "-"))
                    });
                usage_error(
                    ErrorKind::ValueValidation,
                    format!("invalid value for {flag}: {e}"),
                )
            });
            let evidence = format!(
                "the core's booking: core_ref {core_ref}, amount {amount}, booked_at {booked_at}"
            );
            Decision::Booked {
                amount,
                body,
                evidence,
            }
        } else {
            Decision::NotBooked {
                force: a.force,
                core: a.core.with(&a.timeouts),
                min_age: a.min_age,
            }
        };
        Order {
            guid: a.guid,
            decision,
            reason: a.reason,
            expires_in_secs: a.expires,
            dry_run: a.dry_run,
        }
    }
}

/// What a request asks for, made or (with `--dry-run`) not.
#[derive(Serialize)]
struct Requested {
    guid: String,
    /// The request's id (`None`: a dry run).
    request: Option<i64>,
    outcome: &'static str,
    from: State,
    to: State,
    rsp_code: String,
    /// The attempt the change is guarded by (the row's `attempts`).
    attempt: i64,
    /// Only if the row has not changed for this long.
    unchanged_for_secs: Option<u64>,
    maker: String,
    reason: String,
    /// What the core's inquiry answered (`--not-booked`).
    inquiry: Option<String>,
    reply: ReplyView,
    expires_at: Option<String>,
    dry_run: bool,
    requested: bool,
    /// Always false: a request changes no row (as a refusal or a dry run says too).
    written: bool,
}

/// `settle GUID …`: a settlement request recorded, or nothing.
pub fn settle(db: &Db, json: bool, o: Order) -> anyhow::Result<u8> {
    let guid = o.guid.as_str();
    let refused = |why: &str| {
        checks::refuse(
            &format!("settle {guid}"),
            json!({ "guid": guid, "requested": false }),
            json,
            why,
        )
    };
    // A dry run writes nothing, so it opens the ledger as the read-only views do.
    let access = if o.dry_run {
        Access::ReadOnly
    } else {
        Access::Tool
    };
    let ledger = db.open(access, "inspect")?;
    let Some(row) = ledger.read(guid)? else {
        return refused("no row for this GUID");
    };
    let not_booked = match &o.decision {
        Decision::Booked { .. } => None,
        Decision::NotBooked { min_age, .. } => Some(*min_age),
    };
    let Some(young) = unchanged_for(row.state, not_booked) else {
        return refused(&not_settled_by_hand(row.state, row.rsp_code.as_deref()));
    };
    if let Some(need) = &young
        && let Err(why) = need.check(ledger.as_ref(), guid, row.state)
    {
        return refused(&why.to_string());
    }
    let Some(attempt) = row.attempts else {
        return refused("the row has no attempt count to guard the settlement with");
    };
    let (transfer, request) = match stored_transfer(&row) {
        Ok(x) => x,
        Err(why) => return refused(&format!("{why}: no reply can be built for it")),
    };
    let (outcome, to, code, body, reason, evidence, forced) = match o.decision {
        Decision::Booked {
            amount,
            body,
            evidence,
        } => {
            if amount != transfer.amount {
                return refused(&format!(
                    "--amount {amount} is not the request's amount {}: check the core's booking",
                    transfer.amount
                ));
            }
            let e = evidence;
            (
                BOOKED,
                State::Done,
                wire::OK,
                Some(body),
                o.reason,
                e,
                false,
            )
        }
        Decision::NotBooked { force, core, .. } => {
            let client = core.client()?;
            match doubt(ledger.as_ref(), &client, &transfer, request)? {
                None => {
                    let e = NEVER_BOOKED.to_string();
                    (
                        NOT_BOOKED,
                        State::Failed,
                        wire::E_NOT_SENT,
                        None,
                        o.reason,
                        e,
                        false,
                    )
                }
                // --force is for a core that cannot be asked or believed, never against its
                // own 200: that is a booking, to settle --booked with.
                Some((what, hint)) if what.starts_with(ANSWERS_BOOKED) => {
                    return refused(&format!("{what}; {hint}"));
                }
                Some((what, _)) if force => (
                    NOT_BOOKED,
                    State::Failed,
                    wire::E_NOT_SENT,
                    None,
                    format!("{}; forced without a 404 ({what})", o.reason),
                    what,
                    true,
                ),
                Some((what, hint)) => return refused(&format!("{what}; {hint}")),
            }
        }
    };
    let response = wire::reply_to(request, &code, body.as_ref());
    let new = NewRequest {
        guid: guid.to_string(),
        seen_state: row.state,
        seen_attempts: attempt,
        outcome,
        to,
        rsp_code: String::from_utf8_lossy(&code).into_owned(),
        response: response.clone(),
        evidence: evidence.clone(),
        forced,
        min_age_secs: young.as_ref().map(|u| u.secs),
        reason: reason.clone(),
        expires_in_secs: o.expires_in_secs,
    };
    let mut r = Requested {
        guid: guid.to_string(),
        request: None,
        outcome,
        from: row.state,
        to,
        rsp_code: new.rsp_code.clone(),
        attempt,
        unchanged_for_secs: new.min_age_secs,
        maker: ledger.identity()?,
        reason,
        inquiry: (outcome == NOT_BOOKED).then_some(evidence),
        reply: ReplyView::of(&response).map_err(anyhow::Error::msg)?,
        expires_at: None,
        dry_run: o.dry_run,
        requested: false,
        written: false,
    };
    if !o.dry_run {
        let id = ledger.make_settle_request(&new)?;
        let made = ledger.settle_request(id)?.ok_or_else(|| {
            anyhow::anyhow!("settlement request {id} was made but cannot be read")
        })?;
        r.request = Some(id);
        r.maker = made.maker;
        r.expires_at = Some(made.expires_at);
        r.requested = true;
    }
    print(&r, json);
    Ok(EXIT_SETTLED)
}

/// `STATE -> TO/CODE (if state S, attempts N[, unchanged for S s])`: the change and its guard,
/// as `settle`, `approve` and `requests` say it.
pub fn change_line(
    from: State,
    to: State,
    code: &str,
    attempt: i64,
    unchanged: Option<u64>,
) -> String {
    let guard = match unchanged {
        Some(secs) => format!("state {from}, attempts {attempt}, unchanged for {secs} s"),
        None => format!("state {from}, attempts {attempt}"),
    };
    format!("{from} -> {to}/{code} (if {guard})")
}

fn print(r: &Requested, json: bool) {
    if json {
        cli::print_object("inspect", json!(r), EXIT_SETTLED);
        return;
    }
    let change = change_line(r.from, r.to, &r.rsp_code, r.attempt, r.unchanged_for_secs);
    let head = match r.request {
        Some(id) => format!("settle {}: request {id}: {change}", r.guid),
        None => format!("settle {}: {change}", r.guid),
    };
    cli::outln!("{head}, asked by {}, reason: {}", r.maker, r.reason);
    if let Some(i) = &r.inquiry {
        cli::outln!("inquiry: {i}");
    }
    cli::outln!("reply: {}", r.reply.line());
    match (r.request, &r.expires_at) {
        (Some(id), Some(until)) => cli::outln!(
            "requested: pending until {until}; another person carries it out with `inspect \
             approve {id}` or closes it with `inspect reject {id} --reason TEXT`"
        ),
        _ => cli::outln!("dry run: nothing written"),
    }
}
