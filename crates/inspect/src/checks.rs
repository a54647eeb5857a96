//! The checks a settlement by hand rests on, made when `settle` records the request and again
//! when `approve` carries it out (contract §12): which rows are settled by hand and how long
//! each must have been left alone, and whether the core's word proves "never booked" (the
//! canary, then the inquiry). A refusal is one line, and with `--json` one object.

use cli::EXIT_FATAL;
use core_client::{CoreClient, Inquiry};
use engine::batch::{self, Canary};
use engine::transfer::STALE_SENT_FLOOR;
use ledger::{State, Store};
use serde_json::json;
use wire::{self, Transfer};

use crate::show::{ReplyView, rfc3339_of_reply_time};

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

/// Why nothing was written: one line on stderr, `{subject}: refused: {why}; nothing written`
/// (and with `--json` one object, `fields` plus the `error` and `exit` every failure object
/// has, so that a script reads any tool's failure alike), exit 1.
pub fn refuse(
    subject: &str,
    fields: serde_json::Value,
    json: bool,
    why: &str,
) -> anyhow::Result<u8> {
    let line = format!("{subject}: refused: {why}; nothing written");
    if json {
        let mut v = fields;
        v["written"] = json!(false);
        v["refused"] = json!(why);
        v["error"] = json!(line);
        v["exit"] = json!(EXIT_FATAL);
        cli::print_object("inspect", v, EXIT_FATAL);
    }
    cli::stderr_line("inspect", log::Level::Error, &line);
    Ok(EXIT_FATAL)
}

/// How long a row must have been left alone before it is settled, and why.
pub struct Unchanged {
    pub secs: u64,
    /// `--min-age` (`--not-booked`), rather than the stale-sent floor.
    min_age: bool,
    why: &'static str,
}

impl Unchanged {
    /// The refusal of a row `age` seconds old (`None`: no age could be read): how old it is,
    /// what it must reach and why, and when to try again.
    pub fn refusal(&self, state: State, age: Option<f64>) -> String {
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

    /// Refused unless the row has been unchanged this long (only to say why: the guard in
    /// the statement decides).
    pub fn check(&self, ledger: &dyn Store, guid: &str, state: State) -> anyhow::Result<()> {
        let age = ledger.row_age_secs(guid)?;
        if age.is_some_and(|age| age >= self.secs as f64) {
            return Ok(());
        }
        Err(anyhow::Error::msg(self.refusal(state, age)))
    }
}

/// Whether a row in `state` is settled by hand (`None`: not), as booked (`not_booked`: `None`)
/// or not booked after `--min-age` (`Some(min_age)`), and if so how long it must have been
/// left alone first (`Some(None)`: no wait).
pub fn unchanged_for(state: State, not_booked: Option<u64>) -> Option<Option<Unchanged>> {
    let floor = STALE_SENT_FLOOR.as_secs();
    let need = match (state, not_booked) {
        (State::Unknown, None) => None,
        (State::Sent, None) => Some(Unchanged {
            secs: floor,
            min_age: false,
            why: "a relay may still be waiting for the core on it",
        }),
        // `--min-age` is never under the floor, so it covers a SENT row's relay too.
        (State::Sent, Some(min_age)) => Some(Unchanged {
            secs: min_age.max(floor),
            min_age: true,
            why: "a relay may still be waiting for the core on it, and the core may still be \
                  working on it: a 404 proves nothing while it may",
        }),
        (State::Unknown, Some(min_age)) => Some(Unchanged {
            secs: min_age.max(floor),
            min_age: true,
            why: "the core may still be working on it, and a 404 proves nothing while it may",
        }),
        _ => return None,
    };
    Some(need)
}

/// The refusal of a row in a state that is not settled by hand.
pub fn not_settled_by_hand(state: State, rsp_code: Option<&str>) -> String {
    format!(
        "the row is {state}/{}: only an UNKNOWN row, or a SENT row unchanged for {} s, is \
         settled by hand",
        rsp_code.unwrap_or("-"),
        STALE_SENT_FLOOR.as_secs()
    )
}

/// Why the core's answer does not prove "never booked", and what the operator can do about
/// it; `None`: it does (a 404 from a core that knows the ledger's bookings). The canary runs
/// first, as resolve's does: a 404 from a core that does not answer 200 for the ledger's
/// newest booking (another environment's core, a wrong path), or from a core nothing can be
/// checked against (no booking in the ledger yet), proves nothing.
pub fn doubt(
    ledger: &dyn Store,
    client: &CoreClient,
    transfer: &Transfer,
    request: &[u8],
) -> anyhow::Result<Option<(String, &'static str)>> {
    let force = "--force to ask to settle it on the core's written word anyway";
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
                    "{ANSWERS_BOOKED}: it booked this GUID (core_ref {}, amount {}, \
                     booked_at {})",
                    r.core_ref.unwrap_or_default(),
                    r.amount.unwrap_or_default(),
                    rfc3339_of_reply_time(&r.booked_at.unwrap_or_default())
                ),
                "settle --booked with that booking (--force does not apply to a booking)",
            ))
        }
        Inquiry::Error(why) => Some((
            format!("the core's inquiry did not answer 404 ({why})"),
            "nothing proves it was never booked; --force to ask to settle it anyway",
        )),
    })
}

/// What the inquiry said, as the request and the history record it.
pub const NEVER_BOOKED: &str = "404 (never booked)";

/// A request's outcomes, as `settle` records them.
pub const BOOKED: &str = "booked";
pub const NOT_BOOKED: &str = "not-booked";

/// How a doubt that is the core's own word "booked" begins.
pub const ANSWERS_BOOKED: &str = "the core's inquiry answers 200";
