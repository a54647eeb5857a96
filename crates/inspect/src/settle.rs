//! `settle`: an operator's settlement of one GUID in doubt, on evidence from outside the
//! relay. The only command of `inspect` that writes, and then one guarded statement: from
//! UNKNOWN `AND state = 'UNKNOWN' AND attempts = n`; from SENT also only if the row has not
//! changed for the stale-sent floor (no relay can still be waiting for the core on it); and
//! `--not-booked`, from either, only if the row has not changed for `--min-age` (default 300
//! s, resolve's deployed default, never under the floor): a 404 proves "never booked" only
//! once the core cannot still be working on the request, and a core may take longer than the
//! floor (contract §12). The history names `operator:NAME` and the reason.
//!
//! `--booked`: DONE/0000, the reply built from the booking exactly as resolve builds it from
//! an inquiry (`wire::booking_body`, `wire::reply_to` on the stored request).
//! `--not-booked`: FAILED/E902 (so that reprocess may resend it), only while the core's
//! inquiry answers 404 and that core passes resolve's canary (it answers 200 for the ledger's
//! newest booking; a ledger without one has no canary, and is refused too), unless `--force`
//! (which the reason then says, with what the canary or the inquiry said).
//!
//! Exit 0: settled (or, with `--dry-run`, would be). Exit 1: refused (no such row, a state
//! that is not settled by hand, a row too young, a stored request that cannot carry a reply, a
//! canary that failed or is missing, an inquiry that did not answer 404, a row that changed
//! meanwhile), one line on stderr (with `--json` one object on stdout too), nothing written.

use clap::error::ErrorKind;
use cli::{EXIT_FATAL, EXIT_SETTLED};
use core_client::{CoreClient, Inquiry};
use engine::transfer::STALE_SENT_FLOOR;
use ledger::{Access, Change, Db, State, Store};
use serde::Serialize;
use serde_json::json;
use wire::{self, BOOKING_BODY_LEN, Transfer};

use engine::batch::{self, Canary, stored_transfer};

use crate::show::{ReplyView, rfc3339_of_reply_time};
use crate::{SettleArgs, usage_error};

/// `--min-age` unless given: resolve's deployed default (`RESOLVE_MIN_AGE` in its wrapper),
/// so that a settlement by hand believes a 404 no sooner than resolve would.
pub const DEFAULT_MIN_AGE_SECS: u64 = 300;

/// `--min-age`: at least the stale-sent floor, the least this command ever waited: below it
/// a relay may still be waiting for the core, and the core may still be working.
pub fn min_age_secs(s: &str) -> Result<u64, String> {
    let secs: u64 = s.parse().map_err(|e| format!("{e}"))?;
    let floor = STALE_SENT_FLOOR.as_secs();
    if secs < floor {
        return Err(format!(
            "must be at least {floor} seconds: the core may still be working on a younger \
             row, and a 404 would prove nothing yet (it must exceed the core's longest \
             processing time, as resolve's --min-age)"
        ));
    }
    Ok(secs)
}

/// What the operator says about the GUID.
enum Decision {
    /// The core booked it: the reply body, checked when the flags were read.
    Booked {
        amount: u64,
        body: [u8; BOOKING_BODY_LEN],
    },
    /// The core never booked it; `force`: even if its inquiry does not answer 404. Only for
    /// a row unchanged for `min_age` seconds.
    NotBooked {
        force: bool,
        core: cli::Core,
        min_age: u64,
    },
}

/// A settlement as the flags give it, checked as far as it can be without the ledger.
pub struct Order {
    guid: String,
    decision: Decision,
    reason: String,
    operator: String,
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
            Decision::Booked { amount, body }
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
            operator: a.operator,
            dry_run: a.dry_run,
        }
    }
}

/// What a settlement did, or would do.
#[derive(Serialize)]
struct Settlement {
    guid: String,
    from: State,
    to: State,
    rsp_code: String,
    /// The attempt the settlement is guarded by (the row's `attempts`).
    attempt: i64,
    /// Only if the row has not changed for this long (from SENT).
    unchanged_for_secs: Option<u64>,
    who: String,
    reason: String,
    /// What the core's inquiry answered (`--not-booked`).
    inquiry: Option<String>,
    reply: ReplyView,
    dry_run: bool,
    written: bool,
}

/// Why nothing was written: one line on stderr (and with `--json` one object, with the
/// `tool`, `error` and `exit` every failure object has, so that a script reads any tool's
/// failure alike), exit 1.
fn refuse(guid: &str, json: bool, why: &str) -> anyhow::Result<u8> {
    let line = format!("settle {guid}: refused: {why}; nothing written");
    if json {
        let v = json!({
            "guid": guid,
            "written": false,
            "refused": why,
            "error": line,
            "exit": EXIT_FATAL,
        });
        cli::print_object("inspect", v, EXIT_FATAL);
    }
    cli::stderr_line("inspect", log::Level::Error, &line);
    Ok(EXIT_FATAL)
}

/// `settle GUID …`: one guarded statement, or nothing.
pub fn settle(db: &Db, json: bool, o: Order) -> anyhow::Result<u8> {
    let guid = o.guid.as_str();
    let refused = |why: &str| refuse(guid, json, why);
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
    let floor = STALE_SENT_FLOOR.as_secs();
    let Some(young) = unchanged_for(row.state, &o.decision) else {
        return refused(&format!(
            "the row is {}/{}: only an UNKNOWN row, or a SENT row unchanged for {floor} s, is \
             settled by hand",
            row.state,
            row.rsp_code.as_deref().unwrap_or("-")
        ));
    };
    if let Some(need) = &young {
        // Only to say why; the guard in the statement decides.
        let age = ledger.row_age_secs(guid)?;
        if !age.is_some_and(|age| age >= need.secs as f64) {
            return refused(&need.refusal(row.state, age));
        }
    }
    let Some(attempt) = row.attempts else {
        return refused("the row has no attempt count to guard the settlement with");
    };
    let (transfer, request) = match stored_transfer(&row) {
        Ok(x) => x,
        Err(why) => return refused(&format!("{why}: no reply can be built for it")),
    };
    let who = format!("operator:{}", o.operator);
    let (to, code, body, reason, inquiry) = match o.decision {
        Decision::Booked { amount, body } => {
            if amount != transfer.amount {
                return refused(&format!(
                    "--amount {amount} is not the request's amount {}: check the core's booking",
                    transfer.amount
                ));
            }
            (State::Done, wire::OK, Some(body), o.reason, None)
        }
        Decision::NotBooked { force, core, .. } => {
            let client = core.client()?;
            let doubt = doubt(ledger.as_ref(), &client, &transfer, request)?;
            match doubt {
                None => (
                    State::Failed,
                    wire::E_NOT_SENT,
                    None,
                    o.reason,
                    Some("404 (never booked)".to_string()),
                ),
                Some((what, _)) if force => (
                    State::Failed,
                    wire::E_NOT_SENT,
                    None,
                    format!("{}; forced without a 404 ({what})", o.reason),
                    Some(what),
                ),
                Some((what, hint)) => return refused(&format!("{what}; {hint}")),
            }
        }
    };
    let mut change = Change::new(
        guid,
        row.state,
        Some(attempt),
        to,
        code,
        wire::reply_to(request, &code, body.as_ref()),
    )
    .by(who.clone())
    .because(reason.clone());
    if let Some(need) = &young {
        change = change.if_unchanged_for(need.secs);
    }
    let mut s = Settlement {
        guid: guid.to_string(),
        from: row.state,
        to,
        rsp_code: change.code_str().to_string(),
        attempt,
        unchanged_for_secs: change.min_age_secs,
        who,
        reason,
        inquiry,
        reply: ReplyView::of(&change.response).map_err(anyhow::Error::msg)?,
        dry_run: o.dry_run,
        written: false,
    };
    if !o.dry_run {
        if !ledger.transition(&change)? {
            let now = ledger.read(guid)?.map_or("gone".to_string(), |r| {
                format!(
                    "now {}/{}, attempts {}",
                    r.state,
                    r.rsp_code.as_deref().unwrap_or("-"),
                    r.attempts.map_or("-".into(), |a| a.to_string())
                )
            });
            return refused(&format!(
                "the row changed meanwhile ({now}); look again with `inspect show {guid}`"
            ));
        }
        s.written = true;
        // Its failed inquiries are history now (resolve would forget them at its next run).
        if let Err(e) = ledger.clear_inquiry(guid) {
            cli::stderr_line(
                "inspect",
                log::Level::Warn,
                &format!("settle {guid}: cannot clear its failed inquiries: {e}"),
            );
        }
    }
    print(&s, json);
    Ok(EXIT_SETTLED)
}

/// How long a row must have been left alone before it is settled, and why.
struct Unchanged {
    secs: u64,
    /// `--min-age` (`--not-booked`), rather than the stale-sent floor.
    min_age: bool,
    why: &'static str,
}

impl Unchanged {
    /// The refusal of a row `age` seconds old (`None`: no age could be read): how old it is,
    /// what it must reach and why, and when to try again.
    fn refusal(&self, state: State, age: Option<f64>) -> String {
        let what = if self.min_age {
            format!("--min-age ({} s)", self.secs)
        } else {
            format!("the stale-sent floor ({} s)", self.secs)
        };
        match age {
            Some(age) => {
                let age = age.max(0.0).floor() as u64;
                format!(
                    "the row is {state} and changed {age} s ago, less than {what}: {}; try again \
                     in {} s",
                    self.why,
                    self.secs.saturating_sub(age).max(1)
                )
            }
            None => format!(
                "the row is {state} and its age cannot be read, so it cannot be shown to be at \
                 least {what}: {}",
                self.why
            ),
        }
    }
}

/// Whether a row in `state` is settled by `decision` (`None`: not by hand), and if so how long
/// it must have been left alone first (`Some(None)`: no wait).
fn unchanged_for(state: State, decision: &Decision) -> Option<Option<Unchanged>> {
    let floor = STALE_SENT_FLOOR.as_secs();
    let sent = "a relay may still be waiting for the core on it";
    let working = "the core may still be working on it, and a 404 proves nothing while it may";
    let need = match (state, decision) {
        (State::Unknown, Decision::Booked { .. }) => None,
        (State::Sent, Decision::Booked { .. }) => Some(Unchanged {
            secs: floor,
            min_age: false,
            why: sent,
        }),
        // `--min-age` is never under the floor, so it covers a SENT row's relay too.
        (State::Sent, Decision::NotBooked { min_age, .. }) => Some(Unchanged {
            secs: (*min_age).max(floor),
            min_age: true,
            why: "a relay may still be waiting for the core on it, and the core may still be \
                  working on it: a 404 proves nothing while it may",
        }),
        (State::Unknown, Decision::NotBooked { min_age, .. }) => Some(Unchanged {
            secs: (*min_age).max(floor),
            min_age: true,
            why: working,
        }),
        _ => return None,
    };
    Some(need)
}

/// Why the core's answer does not prove "never booked", and what the operator can do about
/// it; `None`: it does (a 404 from a core that knows the ledger's bookings). The canary runs
/// first, as resolve's does: a 404 from a core that does not answer 200 for the ledger's
/// newest booking (another environment's core, a wrong path), or from a core nothing can be
/// checked against (no booking in the ledger yet), proves nothing.
fn doubt(
    ledger: &dyn Store,
    client: &CoreClient,
    transfer: &Transfer,
    request: &[u8],
) -> anyhow::Result<Option<(String, &'static str)>> {
    let force = "--force to settle it on the core's written word anyway";
    match batch::canary(ledger, client)? {
        Canary::Passed { .. } => {}
        Canary::Failed(f) => {
            return Ok(Some((
                format!("{f}: its inquiry's 404 proves nothing"),
                force,
            )));
        }
        Canary::NoBooking => {
            return Ok(Some((
                "no canary: the ledger holds no booked transfer (DONE/0000) to check --core \
                 with, so a 404 would prove nothing"
                    .to_string(),
                force,
            )));
        }
    }
    Ok(match client.inquire(transfer) {
        Inquiry::NotFound => None,
        Inquiry::Booked(b) => {
            let r = ReplyView::of(&wire::reply_to(request, &wire::OK, Some(&b)))
                .map_err(anyhow::Error::msg)?;
            Some((
                format!(
                    "the core's inquiry answers 200: it booked this GUID (core_ref {}, amount {}, \
                     booked_at {})",
                    r.core_ref.unwrap_or_default(),
                    r.amount.unwrap_or_default(),
                    rfc3339_of_reply_time(&r.booked_at.unwrap_or_default())
                ),
                "settle --booked with that booking (--force would let reprocess book it again)",
            ))
        }
        Inquiry::Error(why) => Some((
            format!("the core's inquiry did not answer 404 ({why})"),
            "nothing proves it was never booked; --force to settle it anyway",
        )),
    })
}

fn print(s: &Settlement, json: bool) {
    if json {
        cli::print_object("inspect", json!(s), EXIT_SETTLED);
        return;
    }
    let guard = match s.unchanged_for_secs {
        Some(secs) => format!(
            "state {}, attempts {}, unchanged for {secs} s",
            s.from, s.attempt
        ),
        None => format!("state {}, attempts {}", s.from, s.attempt),
    };
    cli::outln!(
        "settle {}: {} -> {}/{} (if {guard}), by {}, reason: {}",
        s.guid,
        s.from,
        s.to,
        s.rsp_code,
        s.who,
        s.reason
    );
    if let Some(i) = &s.inquiry {
        cli::outln!("inquiry: {i}");
    }
    cli::outln!("reply: {}", s.reply.line());
    cli::outln!(
        "{}",
        if s.written {
            "written"
        } else {
            "dry run: nothing written"
        }
    );
}
