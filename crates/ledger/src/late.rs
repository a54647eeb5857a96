//! Late replies: the core's answer to a call the relay gave up on at its read timeout.
//!
//! The relay answers `E901` and records UNKNOWN at the read timeout, as always. But the
//! connection to the core is not thrown away: it is kept, and a background thread goes on
//! reading it for up to `--late-reply-ms`. If the answer comes and is a booking or a business
//! rejection, the row moves UNKNOWN → DONE with the reply the channel would have got — one
//! guarded statement that names the attempt — and the next resend gets it instead of `E901`.
//!
//! The common path pays nothing for this: the call is made on the connection thread as
//! before, and only a call that timed out hands its connection to another thread. The
//! connection is caught where ureq drops it: every transport the relay's connector makes is
//! wrapped in `Capturing`, which, when it is dropped after a read timed out on it, offers
//! its inner transport to the slot `capture` armed on this thread for this call.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use log::{info, warn};
use ureq::Error;
use ureq::unversioned::transport::{Buffers, NextTimeout, Transport};

use crate::core_client::{Ours, Outcome, outcome_of};
use crate::metrics::metrics;
use crate::state::{Change, State};
use crate::store::Store;
use crate::transfer::{RECORD_WINDOW, record_result};
use crate::wire;

thread_local! {
    /// `Some(slot)` while a call that may be caught is running on this thread.
    static SLOT: RefCell<Option<Option<Box<dyn Transport>>>> = const { RefCell::new(None) };
}

/// Runs `call` with the slot armed; returns its result and the connection it timed out on,
/// if any.
pub fn capture<T>(call: impl FnOnce() -> T) -> (T, Option<Box<dyn Transport>>) {
    SLOT.with(|s| *s.borrow_mut() = Some(None));
    let out = call();
    let caught = SLOT.with(|s| s.borrow_mut().take().flatten());
    (out, caught)
}

/// A transport of the relay's own connector: the inner one, watched for a read timeout.
#[derive(Debug)]
pub struct Capturing {
    inner: Option<Box<dyn Transport>>,
    timed_out: bool,
}

impl Capturing {
    pub fn new(inner: Box<dyn Transport>) -> Capturing {
        Capturing {
            inner: Some(Box::new(Counted::new(inner))),
            timed_out: false,
        }
    }

    fn inner(&mut self) -> &mut Box<dyn Transport> {
        self.inner.as_mut().expect("present until drop")
    }
}

impl Transport for Capturing {
    fn buffers(&mut self) -> &mut dyn Buffers {
        self.inner().buffers()
    }
    fn transmit_output(&mut self, amount: usize, timeout: NextTimeout) -> Result<(), Error> {
        self.inner().transmit_output(amount, timeout)
    }
    fn await_input(&mut self, timeout: NextTimeout) -> Result<bool, Error> {
        let r = self.inner().await_input(timeout);
        if matches!(r, Err(Error::Timeout(_))) {
            self.timed_out = true;
        }
        r
    }
    fn is_open(&mut self) -> bool {
        self.inner().is_open()
    }
    fn is_tls(&self) -> bool {
        self.inner.as_ref().is_some_and(|t| t.is_tls())
    }
}

impl Drop for Capturing {
    fn drop(&mut self) {
        if !self.timed_out {
            return;
        }
        let Some(inner) = self.inner.take() else {
            return;
        };
        SLOT.with(|s| {
            if let Some(slot) = s.borrow_mut().as_mut() {
                *slot = Some(inner);
            }
        });
    }
}

/// A transport counted in `txrelay_core_connections` from its creation to its drop, wherever
/// it goes: a call, ureq's keep-alive pool, a late-reply waiter.
#[derive(Debug)]
struct Counted(Box<dyn Transport>);

impl Counted {
    fn new(inner: Box<dyn Transport>) -> Counted {
        metrics().core_connections.inc();
        Counted(inner)
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        metrics().core_connections.dec();
    }
}

impl Transport for Counted {
    fn buffers(&mut self) -> &mut dyn Buffers {
        self.0.buffers()
    }
    fn transmit_output(&mut self, amount: usize, timeout: NextTimeout) -> Result<(), Error> {
        self.0.transmit_output(amount, timeout)
    }
    fn maybe_await_input(&mut self, timeout: NextTimeout) -> Result<bool, Error> {
        self.0.maybe_await_input(timeout)
    }
    fn await_input(&mut self, timeout: NextTimeout) -> Result<bool, Error> {
        self.0.await_input(timeout)
    }
    fn is_open(&mut self) -> bool {
        self.0.is_open()
    }
    fn is_tls(&self) -> bool {
        self.0.is_tls()
    }
}

/// A call to the core given up at the read timeout, whose connection is still open.
pub struct LateCall {
    pub(crate) transport: Box<dyn Transport>,
    /// The transfer the answer must be a booking of.
    pub(crate) ours: Ours,
}

impl LateCall {
    /// Reads the rest of the answer until `until`. `None`: nothing usable came (the core
    /// stayed silent, closed the connection, or sent something that is not an HTTP answer).
    pub fn wait(mut self, until: Instant) -> Option<Outcome> {
        loop {
            if let Some(answer) = parse(self.transport.buffers().input()) {
                return answer.map(|(status, body)| outcome_of(status, body, self.ours.clone()));
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() || self.transport.buffers().input_append_buf().is_empty() {
                return None;
            }
            let timeout = NextTimeout {
                after: left.into(),
                reason: ureq::Timeout::RecvResponse,
                ..NextTimeout::default()
            };
            match self.transport.await_input(timeout) {
                Ok(true) => {}
                Ok(false) | Err(_) => {
                    // Closed or timed out: an answer may still be complete in the buffer.
                    return parse(self.transport.buffers().input())
                        .flatten()
                        .map(|(status, body)| outcome_of(status, body, self.ours.clone()));
                }
            }
        }
    }
}

/// A complete HTTP/1.1 answer with a `Content-Length` body in `input`: `None` while more is
/// needed, `Some(None)` if it can never be one (garbage, or a body framing we do not take).
fn parse(input: &[u8]) -> Option<Option<(u16, &[u8])>> {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut resp = httparse::Response::new(&mut headers);
    let head_len = match resp.parse(input) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return None,
        Err(_) => return Some(None),
    };
    let status = resp.code?;
    let length = resp
        .headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case("content-length"))
        .and_then(|h| {
            std::str::from_utf8(h.value)
                .ok()?
                .trim()
                .parse::<usize>()
                .ok()
        });
    let Some(length) = length else {
        return Some(None);
    };
    let body = input.get(head_len..head_len + length)?;
    Some(Some((status, body)))
}

/// The background waiters: bounded, counted, and waited for at shutdown.
pub struct LateReplies {
    store: Arc<dyn Store>,
    wait: Duration,
    max: usize,
    waiting: Mutex<usize>,
    done: Condvar,
    pub counts: LateCounts,
}

/// What late replies came to, for logs and metrics.
#[derive(Debug, Default)]
pub struct LateCounts {
    /// Calls handed to a background waiter.
    pub adopted: AtomicU64,
    /// Calls dropped because `max` were already waiting.
    pub dropped: AtomicU64,
    /// Answers that came, whatever they were.
    pub arrived: AtomicU64,
    /// UNKNOWN rows they moved to DONE.
    pub settled: AtomicU64,
}

impl LateReplies {
    pub fn new(store: Arc<dyn Store>, wait: Duration, max: usize) -> LateReplies {
        LateReplies {
            store,
            wait,
            max,
            waiting: Mutex::new(0),
            done: Condvar::new(),
            counts: LateCounts::default(),
        }
    }

    /// Calls waiting right now.
    pub fn waiting(&self) -> usize {
        *self.lock()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, usize> {
        self.waiting.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits in the background for the answer to `call`, whose row is UNKNOWN on `attempt`
    /// with request `msg`; settles it if the answer is a booking or a rejection.
    pub fn adopt(self: &Arc<Self>, call: LateCall, attempt: i64, msg: Vec<u8>) {
        {
            let mut waiting = self.lock();
            if *waiting >= self.max {
                drop(waiting);
                metrics().late_dropped.inc();
                let n = self.counts.dropped.fetch_add(1, Ordering::Relaxed) + 1;
                warn!(
                    "guid={} late reply not awaited: {} calls already waiting ({n} dropped so far)",
                    call.ours.guid, self.max
                );
                return;
            }
            *waiting += 1;
            metrics().late_waiting.set(*waiting as i64);
        }
        metrics().late_adopted.inc();
        self.counts.adopted.fetch_add(1, Ordering::Relaxed);
        let this = Arc::clone(self);
        let until = Instant::now() + self.wait;
        let spawned = std::thread::Builder::new()
            .name("late-reply".into())
            .stack_size(256 * 1024)
            .spawn(move || {
                let guid = call.ours.guid.clone();
                this.settle(&guid, call.wait(until), attempt, &msg);
                this.release();
            });
        if let Err(e) = spawned {
            warn!("cannot start a late-reply thread: {e}");
            self.release();
        }
    }

    fn settle(&self, guid: &str, outcome: Option<Outcome>, attempt: i64, msg: &[u8]) {
        let Some(outcome) = outcome else {
            info!(
                "guid={guid} no late reply within {} ms",
                self.wait.as_millis()
            );
            return;
        };
        metrics().late_arrived.inc();
        self.counts.arrived.fetch_add(1, Ordering::Relaxed);
        let (code, body) = match &outcome {
            Outcome::Booked(body) => (wire::OK, Some(body)),
            Outcome::Rejected(code) => (*code, None),
            Outcome::NotSent(why) | Outcome::Unknown(why) => {
                info!("guid={guid} late reply settles nothing: {why}");
                return;
            }
        };
        let change = Change::new(
            guid,
            State::Unknown,
            Some(attempt),
            State::Done,
            code,
            wire::reply_to(msg, &code, body),
        )
        .because("late reply");
        // Recorded like any result: retried while the ledger fails, and if the row moved on
        // (resolve took a 404 from the core still at work: FAILED), put right.
        let by = Instant::now() + RECORD_WINDOW;
        let (_, made) = record_result(self.store.as_ref(), msg, change, by);
        if made {
            metrics().late_settled.inc();
            self.counts.settled.fetch_add(1, Ordering::Relaxed);
            info!(
                "guid={guid} late reply {}: settled DONE (attempt {attempt})",
                String::from_utf8_lossy(&code)
            );
        } else {
            info!(
                "guid={guid} late reply {} came after the row moved on; left to it",
                String::from_utf8_lossy(&code)
            );
        }
    }

    /// One waiter is done.
    fn release(&self) {
        let mut waiting = self.lock();
        *waiting -= 1;
        metrics().late_waiting.set(*waiting as i64);
        drop(waiting);
        self.done.notify_all();
    }

    /// Waits until no call is waiting any more (each ends by its own deadline).
    pub fn wait_all(&self) {
        let mut waiting = self.lock();
        while *waiting > 0 {
            info!("waiting for {} late repl(ies)", *waiting);
            waiting = self.done.wait(waiting).unwrap_or_else(|e| e.into_inner());
        }
    }
}
