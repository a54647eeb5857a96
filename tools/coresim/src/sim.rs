//! The simulated core: routing, memo directives and the book of bookings.
//!
//! Kept free of any HTTP library so that what the core *decides* can be read (and
//! tested) apart from how the answer travels.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Mutex, MutexGuard};
use std::thread;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Map, Number, Value, json};
use time::OffsetDateTime;
use time::macros::format_description;

use crate::journal::{Entry, Journal};

/// The transfer body of contract §3. Every field is required so that a relay
/// sending an incomplete request hears about it (400) instead of booking garbage.
#[derive(Deserialize)]
#[expect(
    dead_code,
    reason = "required by the contract, irrelevant to the simulator"
)]
struct TransferRequest {
    guid: String,
    tx_code: String,
    from_account: String,
    to_account: String,
    amount: Number,
    memo: String,
}

/// What the memo asks the simulator to do, matched by prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Directive {
    /// Ours, beyond the contract's four: `SLOW`'s wait, then `REJECT`'s answer (a late
    /// business rejection, for the relay's late-reply tests).
    SlowReject,
    Slow,
    Drop,
    Fail500,
    Reject,
    Normal,
}

impl Directive {
    /// Longest first: `SLOWREJECT` also starts with `SLOW`.
    const PREFIXES: [(&str, Directive); 5] = [
        ("SLOWREJECT", Directive::SlowReject),
        ("SLOW", Directive::Slow),
        ("DROP", Directive::Drop),
        ("FAIL500", Directive::Fail500),
        ("REJECT", Directive::Reject),
    ];

    pub fn of(memo: &str) -> Self {
        Self::PREFIXES
            .iter()
            .find(|(prefix, _)| memo.starts_with(prefix))
            .map_or(Directive::Normal, |&(_, directive)| directive)
    }

    pub fn name(self) -> &'static str {
        match self {
            Directive::SlowReject => "SLOWREJECT",
            Directive::Slow => "SLOW",
            Directive::Drop => "DROP",
            Directive::Fail500 => "FAIL500",
            Directive::Reject => "REJECT",
            Directive::Normal => "-",
        }
    }
}

/// How the answer must travel back.
#[derive(Debug, PartialEq)]
pub enum Reply {
    Json(u16, Value),
    /// Close the connection without a single response byte.
    Drop,
}

/// A decision plus what the request log line needs to say about it.
#[derive(Debug)]
pub struct Outcome {
    pub reply: Reply,
    pub guid: Option<String>,
    pub directive: Directive,
}

impl Outcome {
    fn plain(reply: Reply) -> Self {
        Outcome {
            reply,
            guid: None,
            directive: Directive::Normal,
        }
    }

    pub fn bad_request(message: &str) -> Self {
        Self::plain(error(400, "B400", message))
    }
}

#[derive(Clone)]
struct Booking {
    guid: String,
    core_ref: String,
    amount: Number,
    booked_at: String,
}

impl Booking {
    fn to_json(&self) -> Value {
        json!({
            "guid": self.guid,
            "core_ref": self.core_ref,
            "amount": self.amount,
            "booked_at": self.booked_at,
        })
    }
}

struct Book {
    /// Every booking per GUID, oldest first: GET answers with the first, `_stats`
    /// counts them all, because double bookings are what the tests hunt for.
    by_guid: BTreeMap<String, Vec<Booking>>,
    bookings: u64,
    inquiries: u64,
    /// The number of the last `core_ref` handed out. Starts at the start time in seconds
    /// followed by seven zero digits, so that `core_ref`s stay unique within a run and, in
    /// practice, across restarts; with a journal, at least the highest one on file.
    last_ref: u64,
    /// Where bookings are made durable first (`--journal`); `None`: memory only.
    journal: Option<Journal>,
}

pub struct Core {
    book: Mutex<Book>,
    slow: Duration,
    /// How long an inquiry waits before it is answered (`--inquiry-ms`).
    inquiry_delay: Duration,
}

impl Core {
    /// A core that forgets everything when it stops.
    pub fn new(slow: Duration) -> Self {
        let start = u64::try_from(OffsetDateTime::now_utc().unix_timestamp()).unwrap_or(0);
        Core {
            book: Mutex::new(Book {
                by_guid: BTreeMap::new(),
                bookings: 0,
                inquiries: 0,
                last_ref: start * 10_000_000,
                journal: None,
            }),
            slow,
            inquiry_delay: Duration::ZERO,
        }
    }

    /// The same core, each of whose inquiries waits `delay` before it is answered.
    pub fn inquiry_delay(self, delay: Duration) -> Self {
        Core {
            inquiry_delay: delay,
            ..self
        }
    }

    /// A core whose bookings survive a restart: loads the journal at `path` (created if
    /// missing) and appends every new booking to it before counting or answering it.
    pub fn with_journal(slow: Duration, path: &Path) -> anyhow::Result<Self> {
        let (journal, entries) = Journal::open(path)?;
        let core = Core::new(slow);
        {
            let mut book = core.lock();
            for entry in entries {
                let numbered = entry
                    .core_ref
                    .strip_prefix('C')
                    .and_then(|digits| digits.parse::<u64>().ok());
                if let Some(n) = numbered {
                    book.last_ref = book.last_ref.max(n);
                }
                book.bookings += 1;
                book.by_guid
                    .entry(entry.guid.clone())
                    .or_default()
                    .push(Booking {
                        guid: entry.guid,
                        core_ref: entry.core_ref,
                        amount: entry.amount,
                        booked_at: entry.booked_at,
                    });
            }
            log::info!(
                "journal {}: {} bookings of {} GUIDs loaded",
                path.display(),
                book.bookings,
                book.by_guid.len()
            );
            book.journal = Some(journal);
        }
        Ok(core)
    }

    /// Decides the answer to one request. May sleep (SLOW), so call it off the accept loop.
    pub fn handle(&self, method: &str, url: &str, body: &[u8]) -> Outcome {
        let path = url.split_once('?').map_or(url, |(path, _)| path);
        if method == "POST" && path == "/v1/transfers" {
            return self.transfer(body);
        }
        if method == "GET" && path == "/_stats" {
            return Outcome::plain(Reply::Json(200, self.stats()));
        }
        if method == "GET"
            && let Some(guid) = path.strip_prefix("/v1/transfers/")
        {
            return Outcome {
                reply: self.inquire(guid),
                guid: Some(guid.to_owned()),
                directive: Directive::Normal,
            };
        }
        Outcome::plain(not_found())
    }

    fn transfer(&self, body: &[u8]) -> Outcome {
        let request: TransferRequest = match serde_json::from_slice(body) {
            Ok(request) => request,
            Err(e) => return Outcome::bad_request(&format!("bad transfer request: {e}")),
        };
        let directive = Directive::of(&request.memo);
        let reply = match directive {
            Directive::Fail500 => error(500, "E500", "simulated core failure"),
            Directive::Reject => error(422, "B001", "rejected by simulator"),
            Directive::SlowReject => {
                thread::sleep(self.slow);
                error(422, "B001", "rejected by simulator, late")
            }
            Directive::Drop => match self.book(&request) {
                Ok(_) => Reply::Drop,
                Err(e) => journal_failure(&e),
            },
            Directive::Slow => {
                thread::sleep(self.slow);
                self.book(&request)
                    .map_or_else(|e| journal_failure(&e), |b| Reply::Json(200, b.to_json()))
            }
            Directive::Normal => self
                .book(&request)
                .map_or_else(|e| journal_failure(&e), |b| Reply::Json(200, b.to_json())),
        };
        Outcome {
            reply,
            guid: Some(request.guid),
            directive,
        }
    }

    /// Books unconditionally: the real core is not idempotent, and neither is this one.
    /// With a journal the booking is on file before it is counted or answered; if it cannot
    /// be written, nothing is booked.
    fn book(&self, request: &TransferRequest) -> anyhow::Result<Booking> {
        let booked_at = now_rfc3339();
        let mut book = self.lock();
        let booking = Booking {
            guid: request.guid.clone(),
            core_ref: format!("C{:017}", book.last_ref + 1),
            amount: request.amount.clone(),
            booked_at,
        };
        if let Some(journal) = book.journal.as_mut() {
            journal.append(&Entry {
                guid: booking.guid.clone(),
                core_ref: booking.core_ref.clone(),
                amount: booking.amount.clone(),
                booked_at: booking.booked_at.clone(),
            })?;
        }
        book.last_ref += 1;
        book.bookings += 1;
        book.by_guid
            .entry(request.guid.clone())
            .or_default()
            .push(booking.clone());
        Ok(booking)
    }

    fn inquire(&self, guid: &str) -> Reply {
        if !self.inquiry_delay.is_zero() {
            thread::sleep(self.inquiry_delay);
        }
        let mut book = self.lock();
        // A relay's start probe (a GUID never sent, server::core_probe) is not an inquiry about
        // a transfer: the tests count those.
        if !guid.starts_with("txrelay-start-probe-") {
            book.inquiries += 1;
        }
        match book.by_guid.get(guid).and_then(|all| all.first()) {
            Some(booking) => Reply::Json(200, booking.to_json()),
            None => not_found(),
        }
    }

    fn stats(&self) -> Value {
        let book = self.lock();
        let by_guid: Map<String, Value> = book
            .by_guid
            .iter()
            .map(|(guid, all)| (guid.clone(), Value::from(all.len())))
            .collect();
        json!({
            "bookings": book.bookings,
            "by_guid": by_guid,
            "inquiries": book.inquiries,
        })
    }

    /// A handler thread that panicked must not take every later request down with it.
    fn lock(&self) -> MutexGuard<'_, Book> {
        self.book
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

fn error(status: u16, code: &str, message: &str) -> Reply {
    Reply::Json(status, json!({ "code": code, "message": message }))
}

/// The journal could not be written: nothing was booked, and the client hears a 5xx (to the
/// relay: outcome unknown, which an inquiry then settles as "never booked").
fn journal_failure(e: &anyhow::Error) -> Reply {
    log::error!("booking refused: {e:#}");
    error(500, "E500", "cannot write the journal; nothing booked")
}

fn not_found() -> Reply {
    error(404, "N404", "not found")
}

fn now_rfc3339() -> String {
    OffsetDateTime::now_utc()
        .format(format_description!(
            "[year]-[month]-[day]T[hour]:[minute]:[second]Z"
        ))
        .expect("a UTC timestamp of this era always formats")
}

#[cfg(test)]
mod tests {
    use super::*;

    const BODY: &str = r#"{"guid":"G1","tx_code":"TRNF","from_account":"00000000000001","to_account":"00000000000002","amount":1500,"memo":"rent"}"#;

    fn json_of(outcome: Outcome) -> (u16, Value) {
        match outcome.reply {
            Reply::Json(status, value) => (status, value),
            Reply::Drop => panic!("unexpected drop"),
        }
    }

    #[test]
    fn directives_match_by_prefix() {
        assert_eq!(Directive::of("SLOW down"), Directive::Slow);
        assert_eq!(Directive::of("SLOWREJECT it"), Directive::SlowReject);
        assert_eq!(Directive::of("DROP"), Directive::Drop);
        assert_eq!(Directive::of("FAIL500x"), Directive::Fail500);
        assert_eq!(Directive::of("REJECT"), Directive::Reject);
        assert_eq!(Directive::of("rent SLOW"), Directive::Normal);
        assert_eq!(Directive::of(""), Directive::Normal);
    }

    #[test]
    fn booking_has_contract_shape() {
        let core = Core::new(Duration::ZERO);
        let (status, body) = json_of(core.handle("POST", "/v1/transfers", BODY.as_bytes()));
        assert_eq!(status, 200);
        assert_eq!(body["guid"], "G1");
        assert_eq!(body["amount"], 1500);
        let core_ref = body["core_ref"].as_str().unwrap();
        assert_eq!(core_ref.len(), 18);
        assert!(core_ref.starts_with('C'));
        assert!(core_ref[1..].bytes().all(|b| b.is_ascii_digit()));
        let booked_at = body["booked_at"].as_str().unwrap();
        assert_eq!(booked_at.len(), "2026-12-02T09:30:12Z".len());
        assert!(booked_at.ends_with('Z'));
        let parsed =
            OffsetDateTime::parse(booked_at, &time::format_description::well_known::Rfc3339);
        assert!(parsed.is_ok(), "{booked_at}");
    }

    #[test]
    fn bad_bodies_are_400_and_book_nothing() {
        let core = Core::new(Duration::ZERO);
        for body in ["", "{", r#"{"guid":"G1"}"#, r#"[1,2]"#] {
            let (status, answer) = json_of(core.handle("POST", "/v1/transfers", body.as_bytes()));
            assert_eq!(status, 400, "{body}");
            assert_eq!(answer["code"], "B400");
        }
        let amount_as_text = BODY.replace("1500", "\"1500\"");
        let (status, _) = json_of(core.handle("POST", "/v1/transfers", amount_as_text.as_bytes()));
        assert_eq!(status, 400);
        assert_eq!(core.stats()["bookings"], 0);
    }

    #[test]
    fn unknown_routes_are_404() {
        let core = Core::new(Duration::ZERO);
        for (method, url) in [("GET", "/"), ("PUT", "/v1/transfers"), ("POST", "/_stats")] {
            let (status, _) = json_of(core.handle(method, url, b""));
            assert_eq!(status, 404, "{method} {url}");
        }
    }
}
