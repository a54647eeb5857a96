//! A core that answers from a script (its POSTs and, in recovery mode, its inquiries), and
//! what the tests build their requests and replies from: a SQLite ledger in a temporary
//! directory, the request of a GUID, its replies as exact bytes.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use engine::core::{Core, PendingAnswer};
use engine::core::{InquiryDetail, Outcome};
use engine::events::{Events, LateReply};
use ledger::sqlite::Ledger;
use ledger::state::{Change, State};
use ledger::store::Store;
use wire::{BOOKING_BODY_LEN, Transfer};

/// One call to the core as the script has it: what happens while it runs (another writer
/// moving the row, say), what it comes to, and, for a call that timed out, the answer
/// still to come (sent by the test through the channel `late` returned).
pub struct Call {
    during: Option<Box<dyn FnOnce() + Send>>,
    outcome: Outcome,
    late: Option<Receiver<Option<Outcome>>>,
}

impl Call {
    pub fn answers(outcome: Outcome) -> Call {
        Call {
            during: None,
            outcome,
            late: None,
        }
    }

    /// Times out waiting for the answer: UNKNOWN, with the answer still to come through the
    /// returned sender (`None` sent: nothing usable came).
    pub fn times_out() -> (Call, Sender<Option<Outcome>>) {
        let (tx, rx) = mpsc::channel();
        let call = Call {
            late: Some(rx),
            ..Call::answers(Outcome::Unknown("read timed out".into()))
        };
        (call, tx)
    }

    /// Runs `f` while the call is in flight, before it comes to its outcome.
    pub fn during(mut self, f: impl FnOnce() + Send + 'static) -> Call {
        self.during = Some(Box::new(f));
        self
    }
}

/// An inquiry's answer, and what happens while it is in flight.
type Answer = (InquiryDetail, Option<Box<dyn FnOnce() + Send>>);

/// The scripted core: each POST takes the next call of the script, each inquiry the next
/// answer of its own script; one more of either is a test bug.
pub struct Scripted {
    calls: Mutex<VecDeque<Call>>,
    posted: Mutex<Vec<String>>,
    answers: Mutex<VecDeque<Answer>>,
    asked: Mutex<Vec<String>>,
}

impl Scripted {
    pub fn new(calls: impl IntoIterator<Item = Call>) -> Scripted {
        Scripted {
            calls: Mutex::new(calls.into_iter().collect()),
            posted: Mutex::default(),
            answers: Mutex::default(),
            asked: Mutex::default(),
        }
    }

    /// The answers of the inquiries, in order.
    pub fn inquiries(self, answers: impl IntoIterator<Item = InquiryDetail>) -> Scripted {
        let answers = answers.into_iter().map(|a| (a, None));
        self.answers.lock().unwrap().extend(answers);
        self
    }

    /// One more inquiry answer, with `f` run while the inquiry is in flight.
    pub fn inquiry_during(
        self,
        answer: InquiryDetail,
        f: impl FnOnce() + Send + 'static,
    ) -> Scripted {
        let during: Box<dyn FnOnce() + Send> = Box::new(f);
        self.answers
            .lock()
            .unwrap()
            .push_back((answer, Some(during)));
        self
    }

    /// The GUIDs asked about so far, in order.
    pub fn asked(&self) -> Vec<String> {
        self.asked.lock().unwrap().clone()
    }

    /// Adds calls to the end of the script.
    pub fn then(&self, calls: impl IntoIterator<Item = Call>) {
        self.calls.lock().unwrap().extend(calls);
    }

    /// The GUIDs posted so far, in order.
    pub fn posted(&self) -> Vec<String> {
        self.posted.lock().unwrap().clone()
    }

    fn call(&self, t: &Transfer) -> Call {
        self.posted.lock().unwrap().push(t.guid.clone());
        let call = self.calls.lock().unwrap().pop_front();
        let mut call = call.unwrap_or_else(|| panic!("an unscripted call to the core: {t:?}"));
        if let Some(f) = call.during.take() {
            f();
        }
        call
    }
}

impl Core for Scripted {
    fn deadline(&self) -> Duration {
        Duration::from_millis(200)
    }

    fn post_transfer(&self, t: &Transfer) -> Outcome {
        self.call(t).outcome
    }

    fn post_transfer_keeping_late(
        &self,
        t: &Transfer,
    ) -> (Outcome, Option<Box<dyn PendingAnswer>>) {
        let call = self.call(t);
        let pending = call.late.map(|answer| {
            Box::new(Pending {
                guid: t.guid.clone(),
                answer,
            }) as Box<dyn PendingAnswer>
        });
        (call.outcome, pending)
    }

    fn inquire_detail(&self, t: &Transfer) -> InquiryDetail {
        self.asked.lock().unwrap().push(t.guid.clone());
        let answer = self.answers.lock().unwrap().pop_front();
        let (answer, during) = answer.unwrap_or_else(|| panic!("an unscripted inquiry: {t:?}"));
        if let Some(f) = during {
            f();
        }
        answer
    }
}

/// A timed-out call's answer, which comes when the test sends it.
struct Pending {
    guid: String,
    answer: Receiver<Option<Outcome>>,
}

impl PendingAnswer for Pending {
    fn guid(&self) -> &str {
        &self.guid
    }

    fn wait(self: Box<Self>, until: Instant) -> Option<Outcome> {
        let left = until.saturating_duration_since(Instant::now());
        self.answer.recv_timeout(left).ok().flatten()
    }
}

/// A fresh SQLite ledger in a temporary directory (kept while the `TempDir` lives).
pub fn ledger() -> (tempfile::TempDir, Arc<Mutex<Ledger>>) {
    let dir = tempfile::tempdir().unwrap();
    let l = Ledger::open(&dir.path().join("l.db")).unwrap();
    (dir, Arc::new(Mutex::new(l)))
}

/// The transfer request of `guid`: 1500 from account 1 to account 2.
pub fn request(guid: &str) -> Vec<u8> {
    wire::encode_request(&Transfer {
        guid: guid.into(),
        from_account: "00000000000001".into(),
        to_account: "00000000000002".into(),
        amount: 1500,
        memo: "rent".into(),
    })
    .unwrap()
}

/// The core's booking `core_ref` of 1500, as the reply carries it.
pub fn booking(core_ref: &str) -> [u8; BOOKING_BODY_LEN] {
    wire::booking_body(core_ref, 1500, "2026-12-02T09:30:12Z").unwrap()
}

/// The exact reply to `guid`'s request with `code` and, after it, `body`.
pub fn reply(guid: &str, code: &str, body: &str) -> Vec<u8> {
    format!("RTRNF{guid:<36}{code}{body}").into_bytes()
}

/// The booking body of `booking("C1")`, spelled out.
pub const C1: &str = "C1                000000000150020261202093012";

/// The row's state and attempts.
pub fn state(store: &impl Store, guid: &str) -> (State, Option<i64>) {
    let row = store.read(guid).unwrap().expect("a row");
    (row.state, row.attempts)
}

/// A late call kept by [`Recorder`]: the answer still to come, its attempt and request.
type Kept = (Box<dyn PendingAnswer>, i64, Vec<u8>);

/// An events sink that keeps what it is told, with no thread of its own: the calls whose
/// answer is late (the test settles them, `settle_late`, when and where it chooses), late
/// answers that arrived and rows they settled, possible double bookings. Each test's own.
#[derive(Default)]
pub struct Recorder {
    kept: Mutex<Vec<Kept>>,
    pub arrived: AtomicU64,
    pub settled: AtomicU64,
    pub double_bookings: AtomicU64,
}

impl Events for Recorder {
    fn keeps_late_calls(&self) -> bool {
        true
    }

    fn late_call(&self, call: Box<dyn PendingAnswer>, attempt: i64, msg: Vec<u8>) {
        self.kept.lock().unwrap().push((call, attempt, msg));
    }

    fn possible_double_booking(&self) {
        self.double_bookings.fetch_add(1, Ordering::Relaxed);
    }

    fn late_reply(&self, what: LateReply) {
        let n = match what {
            LateReply::Arrived => &self.arrived,
            LateReply::Settled => &self.settled,
        };
        n.fetch_add(1, Ordering::Relaxed);
    }
}

impl Recorder {
    /// Calls kept for a late answer, not settled yet.
    pub fn waiting(&self) -> usize {
        self.kept.lock().unwrap().len()
    }

    /// Waits for each kept call's answer (the tests send them; 30 s at most) and settles its
    /// row on `store` as the relay's waiters would (`engine::late::settle`), in order.
    pub fn settle_late(&self, store: &dyn Store) {
        let kept = std::mem::take(&mut *self.kept.lock().unwrap());
        for (call, attempt, msg) in kept {
            let guid = call.guid().to_string();
            if let Some(outcome) = call.wait(Instant::now() + Duration::from_secs(30)) {
                engine::late::settle(store, self, &guid, outcome, attempt, &msg);
            }
        }
    }

    /// Late answers that arrived, and UNKNOWN rows they settled.
    pub fn late_counts(&self) -> (u64, u64) {
        (
            self.arrived.load(Ordering::Relaxed),
            self.settled.load(Ordering::Relaxed),
        )
    }
}

/// Moves `guid` as another writer would (resolve, an operator): from `from` on `attempt`
/// to `to` with `code` and the reply with `code` and `body`; it must land.
pub fn settle(
    store: &impl Store,
    guid: &str,
    (from, attempt): (State, i64),
    to: State,
    code: &str,
    body: &str,
) {
    let response = reply(guid, code, body);
    let code = code.as_bytes().try_into().expect("4 characters");
    let change = Change::new(guid, from, Some(attempt), to, code, response).by("resolve");
    assert!(store.transition(&change).unwrap(), "{change:?}");
}
