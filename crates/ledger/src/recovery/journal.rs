//! The core's journal entered into a recovering ledger (contract §11), by `restore` into the
//! ledger it puts in place and by `inspect recovery --journal` into one in use, on either
//! backend: a booking at or after the recovery mark's `since` is written DONE/`0000` for a
//! GUID without a row, or settles a FAILED, UNKNOWN or SENT row DONE/`0000`, one guarded
//! statement each, the history saying why. A GUID the journal shows booked twice (two
//! core_refs) is reported and left: which of its bookings the channel was answered with is for
//! an investigator to say, not for us. Every write is guarded, so a relay working on the same
//! ledger meanwhile is never overwritten: a row that appears or moves on is left and reported.

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use wire::{BOOKING_BODY_LEN, GUID_LEN, OK, TX_TRNF};

use crate::error::{LedgerError, Result};
use crate::recovery::Booked;
use crate::state::{Change, Row, State};
use crate::store::Store;

/// One booking of the core's journal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalBooking {
    pub guid: String,
    pub core_ref: String,
    pub amount: u64,
    /// RFC 3339 with an offset.
    pub booked_at: String,
    /// Where the booking was read (the journal file), for messages.
    pub source: String,
}

/// What the journal's bookings came to, counted by GUID.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct JournalApplied {
    /// Distinct bookings given (identical lines are one).
    pub bookings: u64,
    /// GUIDs without a row, written DONE/`0000` from their booking.
    pub written: u64,
    /// FAILED, UNKNOWN or SENT rows settled DONE/`0000`.
    pub settled: u64,
    /// GUIDs whose row was DONE already: left as they are.
    pub already_done: u64,
    /// GUIDs whose bookings all fall before the recovery window: left as they are.
    pub before_window: u64,
    /// GUIDs the journal shows booked more than once (two core_refs): reported, left.
    pub doubles: Vec<String>,
    /// GUIDs left for another reason (a RECEIVED row, another amount, a booking no reply can
    /// carry, a row that changed meanwhile), with why.
    pub left: Vec<LeftGuid>,
}

/// What the journal changed, in words (one line).
impl fmt::Display for JournalApplied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} bookings, {} written, {} settled, {} already done, {} before the window, {} \
             doubles",
            self.bookings,
            self.written,
            self.settled,
            self.already_done,
            self.before_window,
            self.doubles.len()
        )?;
        if !self.doubles.is_empty() {
            write!(f, " (left: {})", self.doubles.join(", "))?;
        }
        write!(f, ", {} left", self.left.len())?;
        if !self.left.is_empty() {
            let left: Vec<String> = self
                .left
                .iter()
                .map(|l| format!("{}: {}", l.guid, l.why))
                .collect();
            write!(f, " ({})", left.join("; "))?;
        }
        Ok(())
    }
}

/// A GUID of the journal that was left as it was, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LeftGuid {
    pub guid: String,
    pub why: String,
}

/// The journal is bad: nothing may be entered from it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct JournalError(pub String);

/// Who enters the journal, as the rows' history names it.
#[derive(Debug, Clone, Copy)]
pub struct EnteredBy<'a> {
    /// The tool (`restore`, `inspect recovery`), the start of each row's history reason.
    pub tool: &'a str,
    /// Who the history names (`None`: the store's program).
    pub who: Option<&'a str>,
}

/// One distinct booking, its instant read.
#[derive(Debug, Clone, Copy)]
struct Entry<'a> {
    booking: &'a JournalBooking,
    at: i64,
}

/// The journal's distinct bookings by GUID (identical lines, even from two files, are one).
#[derive(Debug, Default)]
pub struct Grouped<'a> {
    by_guid: BTreeMap<&'a str, Vec<Entry<'a>>>,
    bookings: u64,
}

/// Groups `all` by GUID, before anything is written. Two bookings of one GUID with one
/// core_ref that differ otherwise make the journal bad (contract §10), as does a `booked_at`
/// that is not RFC 3339: the restore is refused, naming the journal and the GUID.
pub fn group(all: &[JournalBooking]) -> std::result::Result<Grouped<'_>, JournalError> {
    let mut g = Grouped::default();
    for booking in all {
        let at = instant(&booking.booked_at).ok_or_else(|| {
            JournalError(format!(
                "journal {}: guid {:?}: booked_at {:?} is not RFC 3339 with an offset",
                booking.source, booking.guid, booking.booked_at
            ))
        })?;
        let entries = g.by_guid.entry(&booking.guid).or_default();
        match entries
            .iter()
            .find(|e| e.booking.core_ref == booking.core_ref)
        {
            Some(e) if (e.booking.amount, e.at) == (booking.amount, at) => {}
            Some(e) => {
                return Err(JournalError(format!(
                    "journal {}: guid {:?} core_ref {:?} is booked with another amount or \
                     booked_at than in {}",
                    booking.source, booking.guid, booking.core_ref, e.booking.source
                )));
            }
            None => {
                entries.push(Entry { booking, at });
                g.bookings += 1;
            }
        }
    }
    Ok(g)
}

/// What became of one GUID's booking.
enum Outcome {
    Written,
    Settled,
    AlreadyDone,
    Left(String),
}

/// Enters the bookings of `g` at or after `since` (RFC 3339 UTC) into `store`.
pub fn apply(
    store: &dyn Store,
    g: &Grouped<'_>,
    since: &str,
    by: EnteredBy<'_>,
) -> Result<JournalApplied> {
    let since = instant(since).ok_or_else(|| LedgerError::BadInstant(since.to_string()))?;
    let mut done = JournalApplied {
        bookings: g.bookings,
        ..JournalApplied::default()
    };
    for (guid, entries) in &g.by_guid {
        if entries.iter().all(|e| e.at < since) {
            done.before_window += 1;
            continue;
        }
        if entries.len() > 1 {
            done.doubles.push(guid.to_string());
            continue;
        }
        match enter(store, entries[0].booking, by)? {
            Outcome::Written => done.written += 1,
            Outcome::Settled => done.settled += 1,
            Outcome::AlreadyDone => done.already_done += 1,
            Outcome::Left(why) => done.left.push(LeftGuid {
                guid: guid.to_string(),
                why,
            }),
        }
    }
    Ok(done)
}

/// Enters one booking: a new DONE/`0000` row, or a guarded settle of the GUID's row.
fn enter(store: &dyn Store, b: &JournalBooking, by: EnteredBy<'_>) -> Result<Outcome> {
    if !wire::valid_guid(b.guid.as_bytes()) {
        return Ok(Outcome::Left("not a GUID a channel can send".into()));
    }
    let body = match wire::booking_body(&b.core_ref, b.amount, &b.booked_at) {
        Ok(body) => body,
        Err(e) => return Ok(Outcome::Left(format!("no reply can carry it: {e}"))),
    };
    let reason = format!(
        "{}: the core's journal shows it booked (core_ref {})",
        by.tool, b.core_ref
    );
    let Some(row) = store.read(&b.guid)? else {
        let booked = Booked {
            guid: b.guid.clone(),
            tx_code: TX_TRNF.to_string(),
            request: None,
            response: reply_for_guid(&b.guid, &body),
            channel: None,
            who: by.who.map(str::to_string),
            reason,
        };
        return Ok(if store.record_booked(&booked)? {
            Outcome::Written
        } else {
            Outcome::Left("a row for it appeared meanwhile".into())
        });
    };
    match row.state {
        State::Done => Ok(Outcome::AlreadyDone),
        State::Received => Ok(Outcome::Left(
            "its row is RECEIVED (restore settles FAILED, UNKNOWN and SENT rows only)".into(),
        )),
        State::Failed | State::Unknown | State::Sent => {
            let reply = match reply_for_row(&row, b, &body) {
                Ok(reply) => reply,
                Err(why) => return Ok(Outcome::Left(why)),
            };
            let mut change = Change::new(&b.guid, row.state, row.attempts, State::Done, OK, reply)
                .because(reason);
            change.who = by.who.map(str::to_string);
            Ok(if store.transition(&change)? {
                Outcome::Settled
            } else {
                Outcome::Left("its row changed meanwhile".into())
            })
        }
    }
}

/// The `0000` reply for a row the booking settles: built from its stored request's header
/// when it holds this GUID's request, from the GUID alone when it holds none (or one that is
/// not this GUID's). A stored request for another amount is no request of this booking's:
/// the row is left for an operator.
fn reply_for_row(
    row: &Row,
    b: &JournalBooking,
    body: &[u8; BOOKING_BODY_LEN],
) -> std::result::Result<Vec<u8>, String> {
    let Some(request) = &row.request else {
        return Ok(reply_for_guid(&b.guid, body));
    };
    match wire::parse_request(request) {
        Ok(t) if t.guid == b.guid && t.amount != b.amount => Err(format!(
            "its stored request is for amount {}, the booking for {} (core_ref {})",
            t.amount, b.amount, b.core_ref
        )),
        Ok(t) if t.guid == b.guid => Ok(wire::reply_to(request, &OK, Some(body))),
        _ => Ok(reply_for_guid(&b.guid, body)),
    }
}

/// The `0000` reply for `guid` with no request to echo: what a `TRNF` request for `guid`
/// would have been answered (`wire::reply_to` reads only the tx_code and guid fields of the
/// header it is given).
fn reply_for_guid(guid: &str, body: &[u8; BOOKING_BODY_LEN]) -> Vec<u8> {
    let header = format!("Q{TX_TRNF}{guid:<GUID_LEN$}");
    wire::reply_to(header.as_bytes(), &OK, Some(body))
}

/// An RFC 3339 instant as seconds since the epoch.
fn instant(rfc3339: &str) -> Option<i64> {
    OffsetDateTime::parse(rfc3339, &Rfc3339)
        .ok()
        .map(OffsetDateTime::unix_timestamp)
}
