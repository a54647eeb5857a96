//! The capture of a call given up at its read timeout (the transport half of late replies;
//! the waiter that settles rows is the engine's `late`).
//!
//! The relay answers `E901` and records UNKNOWN at the read timeout, as always, but the
//! connection to the core is not thrown away: it is kept so that a background thread can go
//! on reading it for up to `--late-reply-ms`. The common path pays nothing for this: the call
//! is made on the connection thread as before, and only a call that timed out hands its
//! connection on. The connection is caught where ureq drops it: every transport the relay's
//! connector makes is wrapped in `Capturing`, which, when it is dropped after a read timed out
//! on it, offers its inner transport to the slot `capture` armed on this thread for this call.

use std::cell::RefCell;
use std::time::Instant;

use ureq::Error;
use ureq::unversioned::transport::{Buffers, NextTimeout, Transport};

use crate::observe;
use crate::{Ours, Outcome, outcome_of};

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
        observe::connection_opened();
        Counted(inner)
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        observe::connection_closed();
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
    pub transport: Box<dyn Transport>,
    /// The transfer the answer must be a booking of.
    pub ours: Ours,
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
