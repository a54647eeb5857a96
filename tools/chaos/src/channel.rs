//! A channel: one thread, a persistent connection to each relay (reopened whenever the relay
//! went away), playing its planner's steps one after another, each sent to the relay its
//! router says, and recording every request with what came back. A relay that cannot be
//! reached is passed over for the next one, as a load balancer would. With `--http`, a
//! share of the sends go through the relays' HTTP door instead (`crate::http`): every
//! third channel mostly, the others now and then, so that resends of a GUID cross doors.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use testkit::Chan;
use testkit::channel::is_timeout;
use testkit::tls_client::Dialer;

use crate::http::HttpConn;
use crate::plan::{Action, Planner, Request, Router};

/// How long a channel waits for a reply: longer means the relay hangs. The longest a relay
/// takes (docs/tools.md, *How long an answer can take*): the claim's ledger wait (5 s), the
/// core call (the run's connect + read timeouts, 0.5 s), 10 s retrying a result it cannot
/// write (engine's `RECORD_WINDOW`) and that last write's own wait (5 s): 20.5 s. A Patroni
/// failover under a result being recorded takes that long (scripts/chaos_patroni.sh, seed 1:
/// three replies at 15.26 s, when this was 15 s).
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(25);

/// The pause after an `E902` or an `E905`.
const BACKOFF_PAUSE: Duration = Duration::from_millis(200);
/// How long the second sender of an in-flight pair tries to connect.
const TWIN_CONNECT: Duration = Duration::from_secs(2);
/// How long one connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    New,
    Resend,
    /// The first of an in-flight pair (a new GUID).
    InFlightFirst,
    /// The second of an in-flight pair, sent at about the same time from another thread.
    InFlightTwin,
    OtherAmount,
}

/// What came back for one request.
#[derive(Clone, Debug)]
pub enum Answer {
    Reply(Vec<u8>),
    /// The connection broke before a reply (the relay was killed), or could not be opened.
    NoReply(String),
    /// No reply within `REPLY_TIMEOUT` from a relay that kept the connection open.
    Timeout,
    /// Bytes that are not a reply frame.
    Garbage(String),
}

/// One request as sent, with its answer.
#[derive(Clone, Debug)]
pub struct Sent {
    pub channel: usize,
    pub kind: Kind,
    pub req: Request,
    pub answer: Answer,
    /// For `OtherAmount`: a reply implying a ledger row had been received for this GUID
    /// before it was sent, so the answer must be `E904`.
    pub row_known: bool,
    /// Seconds since the start of the run, when it was sent.
    pub at: f64,
    /// The relay it was sent to (index into `Ctx::relays`).
    pub relay: usize,
    /// Through the relay's HTTP door (`--http`), not a frame.
    pub http: bool,
}

impl Sent {
    pub fn code(&self) -> Option<String> {
        match &self.answer {
            Answer::Reply(r) if r.len() >= wire::HEADER_LEN => {
                Some(String::from_utf8_lossy(&r[41..45]).into_owned())
            }
            _ => None,
        }
    }
}

pub struct Ctx {
    /// Every relay's address; relay `i` keeps its port across restarts.
    pub relays: Vec<SocketAddr>,
    /// How channels connect: plain TCP, or one TLS identity each (channel `i` the
    /// `i % len`th).
    pub dialers: Vec<Dialer>,
    pub stop: Arc<AtomicBool>,
    pub start: Instant,
    /// Every relay's `--http-listen` address (empty: no HTTP door, every send a frame).
    pub http: Vec<SocketAddr>,
}

impl Ctx {
    /// Whether channel `index`'s next send goes through the HTTP door: 3 in 4 of the sends
    /// of every third channel, 1 in 4 of the others'.
    fn http_door(&self, index: usize, rng: &mut fastrand::Rng) -> bool {
        !self.http.is_empty() && (rng.u8(0..4) == 0) != (index % 3 == 2)
    }
}

/// Plays channel `index` until `ctx.stop` is set; returns what it sent.
pub fn run(seed: u64, index: usize, ctx: &Ctx) -> Vec<Sent> {
    let mut planner = Planner::new(seed, index);
    let mut router = Router::new(seed, index, ctx.relays.len());
    let mut conns: Vec<Option<Chan>> = ctx.relays.iter().map(|_| None).collect();
    let mut https: Vec<Option<HttpConn>> = ctx.relays.iter().map(|_| None).collect();
    // The doors have a stream of their own: the plan and its digest stay as they were.
    let mut doors = fastrand::Rng::with_seed(seed ^ 0xd00d_0000 ^ index as u64);
    let mut sent = Vec::new();
    // Per GUID of this channel's history: a reply implying a row has been seen.
    let mut row_known: Vec<bool> = Vec::new();
    while !ctx.stop.load(Ordering::Relaxed) {
        let step = planner.next_step();
        let route = router.route(&step.action);
        thread::sleep(step.pause);
        // Told "not sent" (the core is down) or "cannot write the ledger" (the database server
        // is restarting), a channel lets it rest a moment rather than fill the ledger with
        // FAILED rows, or the relay's log with E905s, at full speed.
        if sent
            .last()
            .is_some_and(|s: &Sent| matches!(s.code().as_deref(), Some("E902" | "E905")))
        {
            thread::sleep(BACKOFF_PAUSE);
        }
        let http = ctx.http_door(index, &mut doors);
        let mut one = |kind, req, known| {
            let to = route.to;
            if http {
                send_http(ctx, &mut https, to, index, kind, req, known)
            } else {
                send_one(ctx, &mut conns, to, index, kind, req, known)
            }
        };
        match step.action {
            Action::New(req) => {
                row_known.push(false);
                let h = row_known.len() - 1;
                let Some(s) = one(Kind::New, req, false) else {
                    break;
                };
                row_known[h] |= implies_row(&s);
                sent.push(s);
            }
            Action::Resend { index: h, req } => {
                let Some(s) = one(Kind::Resend, req, false) else {
                    break;
                };
                row_known[h] |= implies_row(&s);
                sent.push(s);
            }
            Action::OtherAmount { index: h, req } => {
                let known = row_known[h];
                let Some(s) = one(Kind::OtherAmount, req, known) else {
                    break;
                };
                sent.push(s);
            }
            Action::InFlight(req) => {
                row_known.push(false);
                let h = row_known.len() - 1;
                let (first, twin) =
                    send_twins(ctx, &mut conns, (route.to, route.twin), index, &req);
                for s in first.into_iter().chain(twin) {
                    row_known[h] |= implies_row(&s);
                    sent.push(s);
                }
            }
        }
    }
    sent
}

/// Any reply but E900/E905 means the relay found or made a row for the GUID.
pub fn implies_row(s: &Sent) -> bool {
    matches!(s.code().as_deref(), Some(c) if c != "E900" && c != "E905")
}

/// Sends one request to relay `to` (or the next one that can be reached) on the persistent
/// connection, (re)connecting first. `None`: the run stopped before it could be sent.
fn send_one(
    ctx: &Ctx,
    conns: &mut [Option<Chan>],
    to: usize,
    channel: usize,
    kind: Kind,
    req: Request,
    row_known: bool,
) -> Option<Sent> {
    let relay = ensure_connected(ctx, conns, to, channel, None)?;
    let at = ctx.start.elapsed().as_secs_f64();
    let answer = exchange(conns[relay].as_mut()?, &req.msg);
    if !matches!(answer, Answer::Reply(_)) {
        conns[relay] = None; // whatever broke, start afresh
    }
    Some(Sent {
        channel,
        kind,
        req,
        answer,
        row_known,
        at,
        relay,
        http: false,
    })
}

/// As `send_one`, through relay `to`'s HTTP door (or the next one's that can be reached).
fn send_http(
    ctx: &Ctx,
    conns: &mut [Option<HttpConn>],
    to: usize,
    channel: usize,
    kind: Kind,
    req: Request,
    row_known: bool,
) -> Option<Sent> {
    let n = ctx.http.len();
    let relay = loop {
        if let Some(r) = (0..n).map(|k| (to + k) % n).find(|&r| {
            conns[r].is_some() || {
                conns[r] = HttpConn::connect(&ctx.http[r], CONNECT_TIMEOUT, REPLY_TIMEOUT).ok();
                conns[r].is_some()
            }
        }) {
            break r;
        }
        if ctx.stop.load(Ordering::Relaxed) {
            return None;
        }
        thread::sleep(Duration::from_millis(50));
    };
    let at = ctx.start.elapsed().as_secs_f64();
    let (answer, reuse) = conns[relay].as_mut()?.exchange(&req.msg);
    if !reuse {
        conns[relay] = None;
    }
    Some(Sent {
        channel,
        kind,
        req,
        answer,
        row_known,
        at,
        relay,
        http: true,
    })
}

/// Sends the same new request from this thread (persistent connection, to relay `to.0`) and
/// from a helper thread (its own connection, to relay `to.1`), released together by a
/// barrier. Returns what was sent (either may be missing if the run stopped before it could
/// be sent).
fn send_twins(
    ctx: &Ctx,
    conns: &mut [Option<Chan>],
    to: (usize, usize),
    channel: usize,
    req: &Request,
) -> (Option<Sent>, Option<Sent>) {
    let barrier = Barrier::new(2);
    thread::scope(|scope| {
        let helper = scope.spawn(|| {
            let mut own: Vec<Option<Chan>> = ctx.relays.iter().map(|_| None).collect();
            let relay = ensure_connected(ctx, &mut own, to.1, channel, Some(TWIN_CONNECT));
            barrier.wait();
            let relay = relay?;
            let at = ctx.start.elapsed().as_secs_f64();
            let answer = exchange(own[relay].as_mut()?, &req.msg);
            Some(Sent {
                channel,
                kind: Kind::InFlightTwin,
                req: req.clone(),
                answer,
                row_known: false,
                at,
                relay,
                http: false,
            })
        });
        let mine = ensure_connected(ctx, conns, to.0, channel, None);
        barrier.wait();
        let first = mine.map(|relay| {
            let at = ctx.start.elapsed().as_secs_f64();
            let stream = conns[relay].as_mut().expect("connected");
            let answer = exchange(stream, &req.msg);
            if !matches!(answer, Answer::Reply(_)) {
                conns[relay] = None;
            }
            Sent {
                channel,
                kind: Kind::InFlightFirst,
                req: req.clone(),
                answer,
                row_known: false,
                at,
                relay,
                http: false,
            }
        });
        let twin = helper.join().ok().flatten();
        (first, twin)
    })
}

/// The relay a request goes to: `want` if its connection is open or can be opened, else
/// the next relay that can be (in order, from `want`). Retries every 50 ms while none can
/// be reached, until `ctx.stop` is set or `limit` (if any) passes. Channel `channel`
/// connects with its own dialer (its TLS identity).
fn ensure_connected(
    ctx: &Ctx,
    conns: &mut [Option<Chan>],
    want: usize,
    channel: usize,
    limit: Option<Duration>,
) -> Option<usize> {
    let dialer = &ctx.dialers[channel % ctx.dialers.len()];
    let deadline = limit.map(|l| Instant::now() + l);
    let n = ctx.relays.len();
    loop {
        for relay in (0..n).map(|k| (want + k) % n) {
            if conns[relay].is_some() {
                return Some(relay);
            }
            if ctx.stop.load(Ordering::Relaxed) || deadline.is_some_and(|d| Instant::now() >= d) {
                return None;
            }
            match dialer.connect(&ctx.relays[relay], CONNECT_TIMEOUT, REPLY_TIMEOUT) {
                // A connect to a port nobody listens on can, rarely, connect the socket to
                // itself (same address both ends): that is not the relay.
                Ok(c) if c.stream().local_addr().ok() == c.stream().peer_addr().ok() => {}
                Ok(c) => {
                    conns[relay] = Some(c);
                    return Some(relay);
                }
                Err(_) => {}
            }
        }
        thread::sleep(Duration::from_millis(50));
    }
}

/// Sends one request and reads one reply.
fn exchange(chan: &mut Chan, msg: &[u8]) -> Answer {
    if let Err(e) = chan.send(msg) {
        return Answer::NoReply(format!("write: {e}"));
    }
    match chan.recv() {
        Ok(reply) => Answer::Reply(reply),
        Err(e) if e.kind() == io::ErrorKind::InvalidData => Answer::Garbage(e.to_string()),
        Err(e) if is_timeout(&e) => Answer::Timeout,
        Err(e) => Answer::NoReply(format!("reply: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::{RELAY_CONNECT_MS, RELAY_READ_MS};

    #[test]
    fn a_channel_waits_as_long_as_a_relay_may_take() {
        let record_window = Duration::from_secs(10);
        let core = Duration::from_millis(RELAY_CONNECT_MS + RELAY_READ_MS);
        let longest = ledger::sqlite::BUSY_TIMEOUT * 2 + core + record_window;
        assert!(REPLY_TIMEOUT > longest, "{REPLY_TIMEOUT:?} <= {longest:?}");
    }
}
