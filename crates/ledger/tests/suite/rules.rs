//! The rules of `ledger::rules`, said once in Rust, against each backend's SQL that says
//! them in its WHERE: on a ledger holding every combination that matters (each state, E902
//! or another code, attempts below, at and above the cap, inquiries below and at the limit),
//! the rows the SQL selects are exactly those the Rust rule names.

use std::collections::BTreeSet;

use ledger::rules;
use ledger::{Row, State};

use crate::backend::{Backend, Hand, hand};

const MAX_ATTEMPTS: i64 = 3;
const MAX_INQUIRIES: u32 = 2;

fn names(rows: impl IntoIterator<Item = String>) -> BTreeSet<String> {
    rows.into_iter().collect()
}

pub fn the_sql_selects_what_the_rules_say(b: &Backend) {
    let mut made: Vec<(String, &str, Option<&str>, i64)> = Vec::new();
    for state in ["SENT", "UNKNOWN", "FAILED", "DONE", "RECEIVED"] {
        for code in [Some("E902"), Some("E901"), None] {
            for attempts in [1, MAX_ATTEMPTS - 1, MAX_ATTEMPTS, MAX_ATTEMPTS + 1] {
                let guid = format!("{state}-{}-{attempts}", code.unwrap_or("none"));
                made.push((guid, state, code, attempts));
            }
        }
    }
    let rows: Vec<Hand<'_>> = made
        .iter()
        .map(|(g, state, code, attempts)| hand(g, state, *code, *attempts, 120))
        .collect();
    b.put(&rows);
    let s = b.tool();
    // Inquiry failures: one GUID in three none, one below the limit, one at it.
    for (i, (g, ..)) in made.iter().enumerate() {
        for _ in 0..(i % 3) {
            s.record_inquiry_failure(g, "no answer", 60).unwrap();
        }
    }
    let all: Vec<Row> = s.all_rows().unwrap();
    assert_eq!(all.len(), made.len());

    let want =
        |f: &dyn Fn(&Row) -> bool| names(all.iter().filter(|r| f(r)).map(|r| r.guid.clone()));
    let resendable = want(&|r| rules::resendable(r, MAX_ATTEMPTS));
    let at_cap = want(&|r| rules::at_attempt_cap(r, MAX_ATTEMPTS));
    assert!(!resendable.is_empty() && !at_cap.is_empty());

    let got = names(
        s.select_resendable(MAX_ATTEMPTS, None)
            .unwrap()
            .into_iter()
            .map(|r| r.guid),
    );
    assert_eq!(got, resendable, "reprocess's selection");
    let capped = s.at_attempt_cap(MAX_ATTEMPTS, 1000).unwrap();
    assert_eq!(capped.total as usize, at_cap.len(), "the count at the cap");
    assert_eq!(
        names(capped.first.into_iter().map(|r| r.guid)),
        at_cap,
        "the rows at the cap"
    );
    // Needs an operator: in doubt, inquiries exhausted .
    let records = b.inquiry_records();
    let state_of = |g: &str| all.iter().find(|r| r.guid == g).map(|r| r.state).unwrap();
    let needs = names(
        records
            .iter()
            .filter(|i| rules::needs_operator(state_of(&i.guid), i, MAX_INQUIRIES))
            .map(|i| i.guid.clone()),
    );
    assert!(!needs.is_empty());
    let got = names(
        s.needs_operator(MAX_INQUIRIES)
            .unwrap()
            .into_iter()
            .map(|i| i.guid),
    );
    assert_eq!(got, needs, "resolve's given-up GUIDs");
    let first = s.needs_operator_first(MAX_INQUIRIES, 1000).unwrap();
    let got = names(first.first.into_iter().map(|i| i.guid));
    assert_eq!(got, needs, "the given-up GUIDs' page");
    // The re-claim for a resend takes exactly the resendable rows (each once; last, since it moves them to SENT).
    let reclaimed = names(
        all.iter()
            .filter(|r| {
                s.reclaim_for_resend(&r.guid, MAX_ATTEMPTS)
                    .unwrap()
                    .is_some()
            })
            .map(|r| r.guid.clone()),
    );
    assert_eq!(reclaimed, resendable, "reprocess's re-claim");

    assert!(rules::in_doubt(State::Unknown) && rules::in_doubt(State::Sent));
}
