//! After the run: the ledger, the core's books and what every channel was told, held against
//! each other. Each finding names its GUID and carries its evidence.
//!
//! Here the checks of every send and row, (a) to (f); the check of the rows late replies
//! settled, (h), in `late_replies`; reconcile's report over the ledger and the core's
//! journal, (i), in `reconcile`; the evidence printed with a finding in `evidence`.

mod evidence;
mod late_replies;
mod reconcile;
#[cfg(test)]
mod tests;

pub use self::evidence::evidence;
pub use self::late_replies::late;
pub use self::reconcile::{Reconciled, parse as parse_reconcile, reconciled};

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::thread;

use ledger::{Row, State};
use serde_json::Value;
use testkit::CoreHttp;

use crate::channel::{Answer, Kind, Sent, implies_row};
use crate::plan::Memo;

/// One broken promise.
#[derive(Debug, Clone)]
pub struct Violation {
    pub check: &'static str,
    pub guid: String,
    pub what: String,
}

/// The outcome of the checks: per check, how many cases were examined and what failed.
#[derive(Default)]
pub struct Checks {
    pub examined: BTreeMap<&'static str, usize>,
    pub violations: Vec<Violation>,
}

impl Checks {
    fn case(&mut self, check: &'static str) {
        *self.examined.entry(check).or_default() += 1;
    }

    fn fail(&mut self, check: &'static str, guid: &str, what: String) {
        self.violations.push(Violation {
            check,
            guid: guid.to_string(),
            what,
        });
    }

    pub fn failed(&self, check: &str) -> usize {
        self.violations.iter().filter(|v| v.check == check).count()
    }
}

pub const A: &str = "(a)";
pub const B: &str = "(b)";
pub const C: &str = "(c)";
pub const D: &str = "(d)";
pub const E: &str = "(e)";
pub const F: &str = "(f)";
/// Reported after the process check `(g)`.
pub const H: &str = "(h)";
/// Reported after `(h)`.
pub const I: &str = "(i)";

/// What each check promises, for the report.
pub const TITLES: [(&str, &str); 6] = [
    (A, "no GUID booked more than once at the core"),
    (
        B,
        "core bookings <-> DONE/0000 rows, one to one, stored reply = booking",
    ),
    (
        C,
        "every 0000 or B001 a channel received = the ledger's stored reply",
    ),
    (
        D,
        "every GUID a channel was answered for (not E900/E905) has a row",
    ),
    (
        E,
        "every reply fits its request (GUID, amount, code vs memo, E904)",
    ),
    (F, "after quiescing, every row settled as its memo says"),
];

/// What check `(h)` promises.
pub const LATE_TITLE: &str =
    "every row a late reply settled (relay logs) is DONE with its code and attempt, booked once";

/// What check `(i)` promises.
pub const RECONCILE_TITLE: &str =
    "reconcile (ledger vs the core's journal, whole run): 0 breaks, 0 pending";

/// A booking as the core's inquiry returns it.
#[derive(Debug, Clone)]
pub struct Booking {
    pub core_ref: String,
    pub amount: u64,
    pub booked_at: String,
}

fn booking_of(v: &Value) -> Option<Booking> {
    Some(Booking {
        core_ref: v["core_ref"].as_str()?.to_string(),
        amount: v["amount"].as_u64()?,
        booked_at: v["booked_at"].as_str()?.to_string(),
    })
}

/// Inquires every GUID at the core, a few at a time: GUID → booking (None: 404/error text).
pub fn fetch_bookings(
    core: &CoreHttp,
    guids: &[String],
) -> HashMap<String, Result<Booking, String>> {
    let out = Mutex::new(HashMap::new());
    let chunk = guids.len().div_ceil(8).max(1);
    thread::scope(|scope| {
        for part in guids.chunks(chunk) {
            let out = &out;
            scope.spawn(move || {
                for g in part {
                    let got = match core.request("GET", &format!("/v1/transfers/{g}"), None) {
                        Ok((200, body)) => serde_json::from_str::<Value>(&body)
                            .ok()
                            .and_then(|v| booking_of(&v))
                            .ok_or_else(|| format!("unreadable booking {body:?}")),
                        Ok((status, body)) => Err(format!("HTTP {status} {body}")),
                        Err(e) => Err(format!("{e:#}")),
                    };
                    out.lock().unwrap().insert(g.clone(), got);
                }
            });
        }
    });
    out.into_inner().unwrap()
}

/// The memo of a row's stored request.
pub fn row_memo(row: &Row) -> Option<Memo> {
    let req = row.request.as_deref()?;
    wire::parse_request(req).ok().map(|t| Memo::of(&t.memo))
}

/// `2026-12-02T09:30:12Z` → `20261202093012`.
fn compact(rfc3339: &str) -> String {
    rfc3339.chars().filter(char::is_ascii_digit).collect()
}

/// Runs every check. `by_guid`: the core's `/_stats` counts; `bookings`: its inquiry
/// answers for those GUIDs.
pub fn run(
    sents: &[Sent],
    rows: &[Row],
    by_guid: &BTreeMap<String, u64>,
    bookings: &HashMap<String, Result<Booking, String>>,
) -> Checks {
    let mut c = Checks::default();
    let by_row: HashMap<&str, &Row> = rows.iter().map(|r| (r.guid.as_str(), r)).collect();

    // (a) no double booking.
    for (g, &n) in by_guid {
        c.case(A);
        if n != 1 {
            c.fail(
                A,
                g,
                format!("booked {n} times by the core (/_stats by_guid)"),
            );
        }
    }

    // (b) bookings -> DONE/0000 rows with the same core_ref and amount.
    for g in by_guid.keys() {
        c.case(B);
        let row = by_row.get(g.as_str());
        let booking = match bookings.get(g) {
            Some(Ok(b)) => b,
            Some(Err(e)) => {
                c.fail(B, g, format!("counted in /_stats but inquiry failed: {e}"));
                continue;
            }
            None => {
                c.fail(B, g, "counted in /_stats but not inquired".into());
                continue;
            }
        };
        let Some(row) = row else {
            c.fail(B, g, format!("booked ({booking:?}) but no ledger row"));
            continue;
        };
        if row.state != State::Done || row.rsp_code.as_deref() != Some("0000") {
            c.fail(
                B,
                g,
                format!(
                    "booked ({booking:?}) but the row is {} {} (attempts {:?})",
                    row.state,
                    row.rsp_code.as_deref().unwrap_or("-"),
                    row.attempts
                ),
            );
            continue;
        }
        let stored = row
            .response
            .as_deref()
            .map(wire::parse_reply)
            .map(|r| r.map(|r| r.booking));
        match stored {
            Some(Ok(Some(b)))
                if b.core_ref == booking.core_ref
                    && b.amount == booking.amount
                    && b.booked_at == compact(&booking.booked_at) => {}
            other => c.fail(
                B,
                g,
                format!(
                    "stored reply {other:?} does not match the core's booking {booking:?} (response {:?})",
                    row.response.as_deref().map(String::from_utf8_lossy)
                ),
            ),
        }
    }
    // ... and every DONE/0000 row has exactly one booking.
    for row in rows {
        if row.state == State::Done && row.rsp_code.as_deref() == Some("0000") {
            c.case(B);
            match by_guid.get(&row.guid) {
                Some(1) => {}
                n => c.fail(
                    B,
                    &row.guid,
                    format!(
                        "DONE/0000 row (response {:?}) but the core counts {n:?} bookings",
                        row.response.as_deref().map(String::from_utf8_lossy)
                    ),
                ),
            }
        }
    }

    for s in sents {
        let g = s.req.guid.as_str();
        let row = by_row.get(g);
        // (c) a 0000 reply (and a business rejection: also a stored final reply) is the
        // stored reply, byte for byte.
        if let (Some("0000" | "B001"), Answer::Reply(reply)) = (s.code().as_deref(), &s.answer) {
            c.case(C);
            match row.and_then(|r| r.response.as_deref()) {
                Some(stored) if stored == reply.as_slice() => {}
                stored => c.fail(
                    C,
                    g,
                    format!(
                        "channel {} ({:?}, t={:.2}s) got {:?}; the ledger holds {:?}",
                        s.channel,
                        s.kind,
                        s.at,
                        String::from_utf8_lossy(reply),
                        stored.map(String::from_utf8_lossy)
                    ),
                ),
            }
        }
        // (d) an answer implying a row: the row is still there.
        if implies_row(s) {
            c.case(D);
            if row.is_none() {
                c.fail(
                    D,
                    g,
                    format!(
                        "channel {} ({:?}, t={:.2}s) was answered {}, but the ledger has no row",
                        s.channel,
                        s.kind,
                        s.at,
                        s.code().unwrap_or_default()
                    ),
                );
            }
        }
        // (e) the reply fits the request.
        check_reply(&mut c, s);
    }

    // (f) every row settled as its memo says.
    for row in rows {
        c.case(F);
        let memo = row_memo(row);
        let code = row.rsp_code.as_deref().unwrap_or("-");
        let ok = match (memo, row.state, code) {
            (Some(Memo::Normal | Memo::Slow | Memo::Drop), State::Done, "0000") => true,
            (Some(Memo::Reject), State::Done, "B001") => true,
            // The simulator answers FAIL500 with 500 for ever: UNKNOWN until an inquiry
            // finds it never booked (FAILED/E902), which reprocess resends, and so on.
            (Some(Memo::Fail500), State::Unknown, "E901") => true,
            (Some(Memo::Fail500), State::Failed, "E902") => true,
            _ => false,
        };
        if !ok {
            c.fail(
                F,
                &row.guid,
                format!(
                    "row left {} {code} (attempts {:?}, updated {}) for a {} request",
                    row.state,
                    row.attempts,
                    row.updated_at,
                    memo.map_or("unreadable", Memo::name)
                ),
            );
        }
    }
    c
}

fn check_reply(c: &mut Checks, s: &Sent) {
    let g = s.req.guid.as_str();
    let reply = match &s.answer {
        Answer::Reply(r) => r,
        Answer::Garbage(what) => {
            c.case(E);
            c.fail(
                E,
                g,
                format!("channel {} got a bad frame: {what}", s.channel),
            );
            return;
        }
        Answer::Timeout => {
            c.case(E);
            c.fail(
                E,
                g,
                format!(
                    "channel {} ({:?}, t={:.2}s): no reply within {:?} on an open connection",
                    s.channel,
                    s.kind,
                    s.at,
                    crate::channel::REPLY_TIMEOUT
                ),
            );
            return;
        }
        Answer::NoReply(_) => return,
    };
    c.case(E);
    let mut bad = |what: String| {
        c.fail(
            E,
            g,
            format!(
                "channel {} ({:?}, t={:.2}s, {} memo): {what}; reply {:?}",
                s.channel,
                s.kind,
                s.at,
                s.req.memo.name(),
                String::from_utf8_lossy(reply)
            ),
        );
    };
    let r = match wire::parse_reply(reply) {
        Ok(r) => r,
        Err(e) => return bad(format!("unparsable reply: {e}")),
    };
    if r.guid != g || r.tx_code != "TRNF" {
        return bad(format!("reply for {:?}/{:?}", r.tx_code, r.guid));
    }
    let amount = wire::parse_request(&s.req.msg)
        .map(|t| t.amount)
        .unwrap_or_default();
    let memo = s.req.memo;
    match r.code.as_str() {
        "0000" => {
            if matches!(memo, Memo::Fail500 | Memo::Reject) {
                bad("0000 for a request the core never books".into());
            } else if r.booking.as_ref().map(|b| b.amount) != Some(amount) {
                bad(format!(
                    "0000 for another amount than the request's {amount}"
                ));
            }
        }
        "E900" => bad("E900 for a valid request".into()),
        "E901" | "E902" | "E903" | "E904" | "E905" => {}
        code if memo == Memo::Reject && code == "B001" => {}
        code => bad(format!("unexpected code {code}")),
    }
    // E905: the relay could not use its ledger (a database server restarting), so it could
    // not read the row either; it called nothing and changed nothing.
    if s.kind == Kind::OtherAmount && s.row_known && !matches!(r.code.as_str(), "E904" | "E905") {
        bad("another amount under a GUID with a row was not answered E904 (nor E905)".into());
    }
}
