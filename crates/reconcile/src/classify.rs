//! The six classes of CONTRACT §10, in its order, the first that applies: `double`, `ghost`,
//! `pending`, `matched`, `mismatch`, `missing`. A GUID is reported when it has a booking in
//! the window or a DONE/`0000` row placed in the window (by its stored reply's `booked_at`,
//! by `updated_at` when the reply cannot be read); it is then classified from all its
//! bookings and its row, wherever their times fall.
//!
//! v1.3: a DONE/`0000` row whose stored reply names a core_ref other than that of the GUID's
//! one booking is `double`, not `mismatch`: the reply is the core's word that it booked the
//! GUID under that core_ref, and the journal shows another booking, so the core booked it at
//! least twice, even when the other booking fell on a day whose export was not read.
//!
//! The ledger is fed one row at a time ([`Reconciler::row`]); each row takes its GUID's
//! bookings out of the journal, so that what is left at the end ([`Reconciler::finish`]) is
//! the bookings without a row.

use ledger::{ReconcileRow, State};
use serde::Serialize;

use std::ops::Range;

use crate::journal::{Booking, Journal};
use crate::reply::{self, Stored};
use crate::time::{Secs, format_rfc3339, parse_ledger};
use crate::window::Window;

/// A reported GUID's class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Class {
    Double,
    Ghost,
    Pending,
    Matched,
    Mismatch,
    Missing,
}

impl Class {
    pub const ALL: [Class; 6] = [
        Class::Double,
        Class::Ghost,
        Class::Pending,
        Class::Matched,
        Class::Mismatch,
        Class::Missing,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Class::Double => "double",
            Class::Ghost => "ghost",
            Class::Pending => "pending",
            Class::Matched => "matched",
            Class::Mismatch => "mismatch",
            Class::Missing => "missing",
        }
    }

    pub fn is_break(self) -> bool {
        !matches!(self, Class::Pending | Class::Matched)
    }
}

/// A booking as a report shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ShownBooking {
    pub core_ref: String,
    pub amount: u64,
    pub booked_at: String,
}

impl ShownBooking {
    fn of(b: &Booking<'_>) -> ShownBooking {
        ShownBooking {
            core_ref: b.core_ref.to_string(),
            amount: b.amount,
            booked_at: format_rfc3339(b.booked_at),
        }
    }
}

/// The ledger's side of a break: its row, and the booking its stored reply tells of (or
/// why none can be read; nothing for a row that is not DONE/`0000`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ShownRow {
    pub state: &'static str,
    pub rsp_code: Option<String>,
    pub updated_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reply: Option<ShownBooking>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reply_error: Option<String>,
}

/// One break: its class, its GUID, and what each side says (`ledger` null: no row), with
/// why the two sides disagree where the class alone does not say it (a `double` with one
/// booking in the journal, a `mismatch` on a field).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Break {
    pub class: Class,
    pub guid: String,
    pub journal: Vec<ShownBooking>,
    pub ledger: Option<ShownRow>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

impl Break {
    /// `class guid: journal …; ledger …[; why]`.
    pub fn line(&self) -> String {
        let journal = match self.journal.as_slice() {
            [] => "no booking".to_string(),
            bs => {
                let each: Vec<String> = bs.iter().map(shown).collect();
                format!("{} booking(s) [{}]", bs.len(), each.join(", "))
            }
        };
        let ledger = match &self.ledger {
            None => "no row".to_string(),
            Some(r) => {
                let code = r.rsp_code.as_deref().unwrap_or("NULL");
                let what = match (&r.reply, &r.reply_error) {
                    (Some(b), _) => format!(" reply [{}]", shown(b)),
                    (None, Some(e)) => format!(" ({e})"),
                    (None, None) => String::new(),
                };
                format!("{} {code}{what} updated_at {}", r.state, r.updated_at)
            }
        };
        let why = self
            .why
            .as_ref()
            .map_or(String::new(), |w| format!("; {w}"));
        format!(
            "{} {}: journal {journal}; ledger {ledger}{why}",
            self.class.as_str(),
            self.guid
        )
    }
}

fn shown(b: &ShownBooking) -> String {
    format!("{} {} {}", b.core_ref, b.amount, b.booked_at)
}

/// A DONE/`0000` row's readable reply against the GUID's one booking: `matched` when they
/// agree; `double` when the reply names another core_ref (CONTRACT §10, v1.3: the core gave
/// the relay one booking and the journal holds another, so it booked the GUID at least
/// twice); `mismatch` when only the amount or booked_at differ (one booking, told otherwise).
/// The reason names what each side says.
fn compare(guid: &str, s: &Stored, b: &Booking<'_>) -> (Class, Option<String>) {
    if s.core_ref != b.core_ref {
        let why = format!(
            "the ledger's reply names core_ref {}, the journal's one booking {}: the core \
             booked {guid} at least twice (the reply's booking is not in the journal read)",
            s.core_ref, b.core_ref
        );
        return (Class::Double, Some(why));
    }
    let mut differ = Vec::new();
    if s.amount != b.amount {
        differ.push(format!(
            "the reply's amount {} is not the journal's {}",
            s.amount, b.amount
        ));
    }
    if s.booked_at != b.booked_at {
        differ.push(format!(
            "the reply's booked_at {} is not the journal's {}",
            format_rfc3339(s.booked_at),
            format_rfc3339(b.booked_at)
        ));
    }
    if differ.is_empty() {
        (Class::Matched, None)
    } else {
        (Class::Mismatch, Some(differ.join(", ")))
    }
}

/// A count and a sum of amounts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Total {
    pub count: u64,
    pub amount: u64,
}

impl Total {
    fn add(&mut self, amount: u64) {
        self.count += 1;
        self.amount = self.amount.saturating_add(amount);
    }
}

/// Control totals over the window: the journal's bookings (their `booked_at` in it), and the
/// ledger's DONE/`0000` rows placed in it (the amounts of their readable replies).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Totals {
    pub journal: Total,
    pub ledger: Total,
}

/// The window as printed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ShownWindow {
    pub from: String,
    pub to: String,
}

/// The reconciliation's outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Report {
    pub window: ShownWindow,
    pub counts: Counts,
    pub breaks: Vec<Break>,
    pub totals: Totals,
}

/// GUIDs per class, exactly the six.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub double: u64,
    pub ghost: u64,
    pub pending: u64,
    pub matched: u64,
    pub mismatch: u64,
    pub missing: u64,
}

impl Counts {
    pub fn get(&self, c: Class) -> u64 {
        match c {
            Class::Double => self.double,
            Class::Ghost => self.ghost,
            Class::Pending => self.pending,
            Class::Matched => self.matched,
            Class::Mismatch => self.mismatch,
            Class::Missing => self.missing,
        }
    }

    fn bump(&mut self, c: Class) {
        *match c {
            Class::Double => &mut self.double,
            Class::Ghost => &mut self.ghost,
            Class::Pending => &mut self.pending,
            Class::Matched => &mut self.matched,
            Class::Mismatch => &mut self.mismatch,
            Class::Missing => &mut self.missing,
        } += 1;
    }

    pub fn breaks(&self) -> u64 {
        Class::ALL
            .iter()
            .filter(|c| c.is_break())
            .map(|&c| self.get(c))
            .sum()
    }
}

impl Report {
    /// The summary line: the window, every class's count, the control totals.
    pub fn summary(&self) -> String {
        let c = &self.counts;
        format!(
            "reconcile: window [{}, {}): {} double, {} ghost, {} pending, {} matched, \
             {} mismatch, {} missing; journal {} bookings amount {}; ledger {} DONE/0000 \
             amount {}",
            self.window.from,
            self.window.to,
            c.double,
            c.ghost,
            c.pending,
            c.matched,
            c.mismatch,
            c.missing,
            self.totals.journal.count,
            self.totals.journal.amount,
            self.totals.ledger.count,
            self.totals.ledger.amount
        )
    }
}

/// Reconciles a journal against ledger rows fed one at a time.
pub struct Reconciler {
    journal: Journal,
    /// Entries whose GUID has a row.
    seen: Vec<bool>,
    window: Window,
    counts: Counts,
    breaks: Vec<Break>,
    totals: Totals,
}

impl Reconciler {
    pub fn new(journal: Journal, window: Window) -> Reconciler {
        let mut totals = Totals::default();
        for i in 0..journal.len() {
            let b = journal.booking(i);
            if window.contains(b.booked_at) {
                totals.journal.add(b.amount);
            }
        }
        Reconciler {
            seen: vec![false; journal.len()],
            journal,
            window,
            counts: Counts::default(),
            breaks: Vec::new(),
            totals,
        }
    }

    fn booked_in_window(&self, bookings: &Range<usize>) -> bool {
        bookings
            .clone()
            .any(|i| self.window.contains(self.journal.booking(i).booked_at))
    }

    /// One ledger row.
    pub fn row(&mut self, row: ReconcileRow) {
        let bookings = self.journal.find(&row.guid);
        if let Some(b) = &bookings {
            self.seen[b.clone()].fill(true);
        }
        let done_0000 = row.state == State::Done && row.rsp_code.as_deref() == Some("0000");
        let stored: Option<Result<Stored, String>> = if done_0000 {
            Some(match &row.response {
                Some(r) => reply::decode(r),
                None => Err("no stored reply".into()),
            })
        } else {
            None
        };
        let placed: Option<Secs> = match &stored {
            None => None,
            Some(Ok(s)) => Some(s.booked_at),
            Some(Err(_)) => parse_ledger(&row.updated_at),
        };
        let row_in = placed.is_some_and(|t| self.window.contains(t));
        let booked_in = bookings.as_ref().is_some_and(|b| self.booked_in_window(b));
        if !row_in && !booked_in {
            return;
        }
        if row_in {
            let amount = match &stored {
                Some(Ok(s)) => s.amount,
                _ => 0,
            };
            self.totals.ledger.add(amount);
        }
        let reply = match &stored {
            Some(Ok(s)) => Some(s),
            _ => None,
        };
        let (class, why) = match &bookings {
            None => (Class::Missing, None),
            Some(b) if b.len() > 1 => (Class::Double, self.unseen_reply(&row.guid, b, reply)),
            Some(b) => match row.state {
                State::Failed => (Class::Ghost, None),
                State::Done if !done_0000 => (Class::Ghost, None),
                State::Unknown | State::Sent | State::Received => (Class::Pending, None),
                State::Done => match reply {
                    Some(s) => compare(&row.guid, s, &self.journal.booking(b.start)),
                    None => (Class::Mismatch, None),
                },
            },
        };
        self.counts.bump(class);
        if class.is_break() {
            let (reply, reply_error) = match stored {
                Some(Ok(s)) => (
                    Some(ShownBooking {
                        core_ref: s.core_ref,
                        amount: s.amount,
                        booked_at: format_rfc3339(s.booked_at),
                    }),
                    None,
                ),
                Some(Err(e)) => (None, Some(e)),
                None => (None, None),
            };
            self.breaks.push(Break {
                class,
                journal: self.shown_all(bookings),
                guid: row.guid,
                ledger: Some(ShownRow {
                    state: row.state.as_str(),
                    rsp_code: row.rsp_code,
                    updated_at: row.updated_at,
                    reply,
                    reply_error,
                }),
                why,
            });
        }
    }

    /// For a GUID the journal shows booked more than once: when the stored reply names none
    /// of those bookings, the core booked it once more than the journal shows (the reply's
    /// booking is in an export not read), and the operator must not look for it among them.
    fn unseen_reply(
        &self,
        guid: &str,
        bookings: &Range<usize>,
        reply: Option<&Stored>,
    ) -> Option<String> {
        let s = reply?;
        let named = bookings
            .clone()
            .any(|i| self.journal.booking(i).core_ref == s.core_ref);
        (!named).then(|| {
            format!(
                "the ledger's reply names core_ref {}, none of the journal's {} bookings: the \
                 core booked {guid} at least {} times",
                s.core_ref,
                bookings.len(),
                bookings.len() + 1
            )
        })
    }

    fn shown_all(&self, bookings: Option<Range<usize>>) -> Vec<ShownBooking> {
        let mut v: Vec<ShownBooking> = bookings
            .into_iter()
            .flatten()
            .map(|i| ShownBooking::of(&self.journal.booking(i)))
            .collect();
        v.sort_by(|a, b| (&a.booked_at, &a.core_ref).cmp(&(&b.booked_at, &b.core_ref)));
        v
    }

    /// The report, once every row has been fed: the bookings left have no row.
    pub fn finish(mut self) -> Report {
        let groups: Vec<Range<usize>> = self
            .journal
            .groups()
            .filter(|g| !self.seen[g.start])
            .collect();
        for bookings in groups {
            if !self.booked_in_window(&bookings) {
                continue;
            }
            let guid = self.journal.guid(bookings.start).to_string();
            let class = if bookings.len() > 1 {
                Class::Double
            } else {
                Class::Ghost
            };
            self.counts.bump(class);
            self.breaks.push(Break {
                class,
                guid,
                journal: self.shown_all(Some(bookings)),
                ledger: None,
                why: None,
            });
        }
        self.breaks
            .sort_by(|a, b| (a.class, &a.guid).cmp(&(b.class, &b.guid)));
        Report {
            window: ShownWindow {
                from: format_rfc3339(self.window.from),
                to: format_rfc3339(self.window.to),
            },
            counts: self.counts,
            breaks: self.breaks,
            totals: self.totals,
        }
    }
}

#[cfg(test)]
mod tests;
