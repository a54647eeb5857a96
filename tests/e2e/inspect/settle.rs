//! `inspect settle`: an operator settles one GUID in doubt on evidence from outside the
//! relay. `--booked` makes it DONE/0000 with the reply resolve would have built from the
//! booking (a resend then gets exactly that reply, and resolve leaves the row alone);
//! `--not-booked` makes it FAILED/E902 only while the core's inquiry answers 404 (then
//! reprocess books it, once), unless `--force`, and only for a row unchanged for `--min-age`
//! (300 s by default). Only from UNKNOWN, or SENT unchanged for the stale-sent floor; one
//! guarded statement; `--dry-run` writes nothing; the history names the operator and the
//! reason.
//!
//! What the tests share is here; the tests, by what they settle: `booked`, `not_booked`,
//! which rows (`rows`), how old a row must be for `--not-booked` (`min_age`), and `--dry-run`
//! and the flags (`usage`).

// Paths relative to this file's folder, as in `inspect.rs`.
#[path = "settle/booked.rs"]
mod booked;
#[path = "settle/min_age.rs"]
mod min_age;
#[path = "settle/not_booked.rs"]
mod not_booked;
#[path = "settle/rows.rs"]
mod rows;
#[path = "settle/usage.rs"]
mod usage;

use ledger::state::HistoryRow;
use serde_json::{Value, json};

use super::inspect;
use crate::util::*;

/// `--booked` flags for the core's booking JSON `b`.
fn booked_flags(b: &Value) -> Vec<String> {
    vec![
        "--booked".into(),
        "--core-ref".into(),
        b["core_ref"].as_str().expect("core_ref").into(),
        "--amount".into(),
        b["amount"].as_u64().expect("amount").to_string(),
        "--booked-at".into(),
        b["booked_at"].as_str().expect("booked_at").into(),
    ]
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// `inspect --db DB settle GUID ARGS… --reason R --operator O`
fn settle(db: &TempLedger, guid: &str, args: &[&str], reason: &str, operator: &str) -> Run {
    inspect(
        db,
        &[
            &["settle", guid][..],
            args,
            &["--reason", reason, "--operator", operator],
        ]
        .concat(),
    )
}

/// A transfer the scene's core booked and the ledger holds as DONE/0000, a day old: what
/// the canary of `settle --not-booked` asks about.
fn booked_canary(s: &Scene, guid: &str) {
    let m = msg(guid, 1, "");
    s.core().book(&m);
    s.put(RowSpec::of(&m, State::Done).code("0000").age(DAY));
}

fn history(db: &TempLedger, guid: &str) -> Vec<HistoryRow> {
    db.store().history(guid).expect("read the history")
}

/// A refusal: exit 1, one line on stderr naming the GUID and `why`, nothing on stdout.
#[track_caller]
fn assert_refused(r: &Run, guid: &str, why: &str) {
    r.expect_code(EXIT_FATAL);
    let err = r.stderr();
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(
        err.contains(&format!("settle {guid}: refused: ")) && err.contains(why),
        "{why:?} in: {err}"
    );
    assert!(err.contains("nothing written"), "{err}");
    assert_eq!(r.stdout(), "");
}
