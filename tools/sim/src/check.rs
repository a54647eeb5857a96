//! What a run must come to, judged against the core's journal (the truth):
//! - no GUID booked twice;
//! - every `0000` a channel got is what the ledger's row says, byte for byte, and every
//!   channel that got `0000` for a GUID got the same bytes;
//! - no `0000` for a GUID the core never booked, and no acknowledged row lost;
//! - every GUID the core booked has a DONE row with its booking, or had one that purge
//!   deleted (its history says so);
//! - every row settled (DONE) once the run's end has resolved and reprocessed what was left.

use std::collections::HashMap;

use ledger::state::State;
use ledger::store::Store;

use crate::core::Body;

/// An answer a channel got.
#[derive(Debug, Clone)]
pub struct Answered {
    pub guid: String,
    pub reply: Vec<u8>,
    pub detail: Option<String>,
}

/// What was wrong, if anything.
#[derive(Debug, Default)]
pub struct Verdict {
    pub violations: Vec<String>,
}

impl Verdict {
    pub fn passed(&self) -> bool {
        self.violations.is_empty()
    }
}

/// Whether every row is DONE.
pub fn all_settled(store: &dyn Store) -> bool {
    store
        .all_rows()
        .map(|rows| rows.iter().all(|r| r.state == State::Done))
        .unwrap_or(false)
}

/// Whether `guid`'s row was deleted by purge: its history's last row is a DONE row's
/// deletion for the retention.
fn purged(store: &dyn Store, guid: &str) -> bool {
    store
        .history(guid)
        .unwrap_or_default()
        .last()
        .is_some_and(|h| {
            h.from_state.as_deref() == Some("DONE")
                && h.to_state.is_none()
                && h.reason
                    .as_deref()
                    .is_some_and(|r| r.starts_with("retention"))
        })
}

fn code(reply: &[u8]) -> &[u8] {
    reply.get(41..45).unwrap_or_default()
}

pub fn check(
    store: &dyn Store,
    bookings: &HashMap<String, Vec<Body>>,
    answers: &[Answered],
) -> Verdict {
    let mut v = Verdict::default();
    let rows = match store.all_rows() {
        Ok(rows) => rows,
        Err(e) => {
            v.violations.push(format!("the ledger cannot be read: {e}"));
            return v;
        }
    };
    let rows: HashMap<&str, _> = rows.iter().map(|r| (r.guid.as_str(), r)).collect();
    let mut guids: Vec<&String> = bookings.keys().collect();
    guids.sort();
    for guid in guids {
        let booked = &bookings[guid];
        if booked.len() > 1 {
            v.violations
                .push(format!("{guid} booked {} times by the core", booked.len()));
            for h in store.history(guid).unwrap_or_default() {
                v.violations.push(format!(
                    "    history: {} -> {} attempt {:?} {} {}",
                    h.from_state.as_deref().unwrap_or("-"),
                    h.to_state.as_deref().unwrap_or("-"),
                    h.attempts,
                    h.rsp_code.as_deref().unwrap_or("-"),
                    h.reason.as_deref().unwrap_or("")
                ));
            }
        }
        match rows.get(guid.as_str()) {
            None if purged(store, guid) => {}
            None => v.violations.push(format!("{guid} booked but has no row")),
            Some(r) if r.state != State::Done || r.rsp_code.as_deref() != Some("0000") => {
                v.violations.push(format!(
                    "{guid} booked but its row is {} {}",
                    r.state,
                    r.rsp_code.as_deref().unwrap_or("-")
                ))
            }
            Some(r) => {
                let body = r.response.as_deref().and_then(|b| b.get(45..));
                if body != Some(&booked[0][..]) {
                    v.violations.push(format!(
                        "{guid}'s row carries another booking than the core's"
                    ));
                }
            }
        }
    }
    let mut first_ok: HashMap<&str, &[u8]> = HashMap::new();
    for a in answers.iter().filter(|a| code(&a.reply) == b"0000") {
        if !bookings.contains_key(&a.guid) {
            v.violations
                .push(format!("{} answered 0000 but never booked", a.guid));
        }
        match rows.get(a.guid.as_str()) {
            Some(r) if r.response.as_deref() == Some(&a.reply[..]) => {}
            None if purged(store, &a.guid) => {}
            _ => v.violations.push(format!(
                "{}: a channel got 0000 that the ledger does not say byte for byte",
                a.guid
            )),
        }
        if let Some(first) = first_ok.insert(&a.guid, &a.reply)
            && first != &a.reply[..]
        {
            v.violations
                .push(format!("{}: two different 0000 replies", a.guid));
        }
    }
    let mut unsettled: Vec<String> = rows
        .values()
        .filter(|r| r.state != State::Done)
        .map(|r| format!("{} {}", r.guid, r.state))
        .collect();
    unsettled.sort();
    if !unsettled.is_empty() {
        v.violations
            .push(format!("not settled: {}", unsettled.join(", ")));
    }
    v
}
