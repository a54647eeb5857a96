//! The scripted core: a journal of what it booked (per GUID, each booking), and for each POST
//! an outcome drawn from the run's generator — booked, rejected, refused (never sent), booked
//! or rejected with the answer too late (the relay hears a read timeout; the answer may come
//! later as a late reply), a request still on its way when the relay gave up (it lands at a
//! later step, `deliver`, and at the latest [`REACH_MS`] after it was sent, by the run's
//! clock), an HTTP 500, a reset after booking. Inquiries answer from the journal, truthfully,
//! whatever may still be on its way. Not idempotent: a POST that lands books, every time.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use core_api::{Core, InquiryDetail, Outcome, PendingAnswer};
use wire::{BOOKING_BODY_LEN, Transfer};

use crate::sched::Sched;

pub type Body = [u8; BOOKING_BODY_LEN];

/// The longest a request the relay gave up on stays on its way, in milliseconds of the run's
/// clock: then it has landed. The protocol's timing assumption is resolve's `--min-age`
/// (less the second the ledger's timestamps round away) being at least this long.
pub const REACH_MS: i64 = 3_000;

/// A POST the relay gave up on that has not reached the core yet.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub guid: String,
    pub amount: u64,
    /// Whether it books when it lands (else the core rejects it).
    pub books: bool,
    /// When it has landed at the latest (the run's clock, ms).
    pub by_ms: i64,
}

#[derive(Default)]
struct Journal {
    booked: HashMap<String, Vec<Body>>,
    in_flight: Vec<Delivery>,
    next_ref: u64,
}

pub struct SimCore {
    sched: Arc<Sched>,
    journal: Mutex<Journal>,
    /// The end of a run: every POST is answered at once, booked or rejected.
    settling: AtomicBool,
}

/// The late answer of a call given up at its read timeout.
struct Pending {
    guid: String,
    answer: Option<Outcome>,
}

impl PendingAnswer for Pending {
    fn guid(&self) -> &str {
        &self.guid
    }

    fn wait(self: Box<Self>, _until: Instant) -> Option<Outcome> {
        self.answer
    }
}

impl SimCore {
    pub fn new(sched: Arc<Sched>) -> SimCore {
        SimCore {
            sched,
            journal: Mutex::default(),
            settling: AtomicBool::new(false),
        }
    }

    fn journal(&self) -> MutexGuard<'_, Journal> {
        self.journal.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn settle_mode(&self) {
        self.settling.store(true, Ordering::SeqCst);
    }

    /// Books `guid` for `amount` once more; the booking's body.
    fn book(&self, guid: &str, amount: u64) -> Body {
        let mut j = self.journal();
        j.next_ref += 1;
        let core_ref = format!("R{}", j.next_ref);
        let body =
            wire::booking_body(&core_ref, amount, "2026-12-06T10:00:00Z").expect("a valid booking");
        j.booked.entry(guid.to_string()).or_default().push(body);
        body
    }

    /// Bookings per GUID.
    pub fn bookings(&self) -> HashMap<String, Vec<Body>> {
        self.journal().booked.clone()
    }

    /// Requests still on their way.
    pub fn in_flight(&self) -> usize {
        self.journal().in_flight.len()
    }

    /// Lets one request on its way (the `k`-th, modulo) land: it books, or is rejected.
    pub fn deliver(&self, k: usize) {
        let d = {
            let mut j = self.journal();
            if j.in_flight.is_empty() {
                return;
            }
            let n = j.in_flight.len();
            j.in_flight.remove(k % n)
        };
        self.land(d);
    }

    fn land(&self, d: Delivery) {
        if std::env::var_os("SIM_TRACE").is_some() {
            eprintln!("core: delivered {} books={}", d.guid, d.books);
        }
        if d.books {
            self.book(&d.guid, d.amount);
        }
    }

    /// Lands every request whose time on its way is up: before the core acts or answers,
    /// which is the same as at that moment (nothing saw the core in between).
    fn land_overdue(&self) {
        let now = self.sched.clock().now_ms();
        let due: Vec<Delivery> = {
            let mut j = self.journal();
            let (due, rest) = j.in_flight.drain(..).partition(|d| d.by_ms <= now);
            j.in_flight = rest;
            due
        };
        due.into_iter().for_each(|d| self.land(d));
    }

    /// One POST: its outcome, and the answer that may still come.
    fn post(&self, t: &Transfer) -> (Outcome, Option<Outcome>) {
        self.sched.pause();
        self.land_overdue();
        let roll = if self.settling.load(Ordering::SeqCst) {
            self.sched.below(10) * 5 // booked or rejected only
        } else {
            self.sched.below(100)
        };
        let reject = || Outcome::Rejected(*b"B001");
        let timeout = || Outcome::Unknown("read timeout".into());
        let answer = match roll {
            0..40 => {
                let body = self.book(&t.guid, t.amount);
                (Outcome::Booked(body), None)
            }
            40..50 => (reject(), None),
            50..58 => (Outcome::NotSent("connection refused".into()), None),
            58..68 => {
                let body = self.book(&t.guid, t.amount);
                let late = (self.sched.below(2) == 0).then_some(Outcome::Booked(body));
                (timeout(), late)
            }
            68..76 => (timeout(), Some(reject())),
            76..88 => {
                let books = self.sched.below(2) == 0;
                self.journal().in_flight.push(Delivery {
                    guid: t.guid.clone(),
                    amount: t.amount,
                    books,
                    by_ms: self.sched.clock().now_ms() + REACH_MS,
                });
                (timeout(), None)
            }
            88..94 => (Outcome::Unknown("HTTP 500".into()), None),
            _ => {
                self.book(&t.guid, t.amount);
                (Outcome::Unknown("connection reset".into()), None)
            }
        };
        if std::env::var_os("SIM_TRACE").is_some() {
            eprintln!(
                "core: POST {} -> {:?} (late {:?}); in flight {}",
                t.guid,
                answer.0,
                answer.1,
                self.in_flight()
            );
        }
        // The core has acted; the relay has not heard yet (it may die here).
        self.sched.pause();
        answer
    }
}

impl Core for SimCore {
    fn deadline(&self) -> Duration {
        Duration::from_millis(500)
    }

    fn post_transfer(&self, t: &Transfer) -> Outcome {
        self.post(t).0
    }

    fn post_transfer_keeping_late(
        &self,
        t: &Transfer,
    ) -> (Outcome, Option<Box<dyn PendingAnswer>>) {
        let (outcome, late) = self.post(t);
        let pending =
            matches!(outcome, Outcome::Unknown(ref why) if why == "read timeout").then(|| {
                Box::new(Pending {
                    guid: t.guid.clone(),
                    answer: late,
                }) as Box<dyn PendingAnswer>
            });
        (outcome, pending)
    }

    fn inquire_detail(&self, t: &Transfer) -> InquiryDetail {
        self.sched.pause();
        self.land_overdue();
        let j = self.journal();
        match j.booked.get(&t.guid).and_then(|b| b.first()) {
            None => InquiryDetail::NotFound,
            Some(body) => InquiryDetail::Booked(*body),
        }
    }
}
