//! A worker: one thread, one connection, a closed loop. Each request is a new transfer or,
//! with probability `--resend-ratio`, a byte-identical resend of a GUID this connection
//! already got a reply for, which must get the same reply again. `Tally` holds its counts.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use testkit::CoreHttp;
use wire::{self, Transfer};

use crate::conn::{Fail, RelayConn, Target};
use crate::http::HttpConn;
use crate::latency::Latencies;
use crate::load::{Mode, Plan};
use crate::rng::Rng;

/// GUIDs remembered per connection for resends; beyond this a random one is replaced.
const RESEND_MEMORY: usize = 100_000;

/// One connection's counts; merged into the run's.
#[derive(Default)]
pub struct Tally {
    pub lat: Latencies,
    pub codes: BTreeMap<String, u64>,
    /// Measured requests that got a valid reply.
    pub requests: u64,
    pub new_requests: u64,
    pub resends: u64,
    pub resend_slots: u64,
    // The checks below count in every phase (pool booking and warm-up included).
    pub mismatches: u64,
    pub malformed: u64,
    pub errors: u64,
    pub timeouts: u64,
    pub connects: u64,
    pub pool_finished: u64,
    pub last_end: Option<Instant>,
}

impl Tally {
    pub fn merge(&mut self, o: Tally) {
        self.lat.merge(o.lat);
        for (k, v) in o.codes {
            *self.codes.entry(k).or_default() += v;
        }
        self.requests += o.requests;
        self.new_requests += o.new_requests;
        self.resends += o.resends;
        self.resend_slots += o.resend_slots;
        self.mismatches += o.mismatches;
        self.malformed += o.malformed;
        self.errors += o.errors;
        self.timeouts += o.timeouts;
        self.connects += o.connects;
        self.pool_finished += o.pool_finished;
        self.last_end = self.last_end.max(o.last_end);
    }
}

/// A GUID this connection got a reply for: its request bytes and, if it was `0000`, the
/// reply every later resend must get byte for byte.
struct Sent {
    msg: Vec<u8>,
    booked: Option<Vec<u8>>,
}

pub struct Worker {
    id: u32,
    plan: Arc<Plan>,
    rng: Rng,
    counter: u64,
    target: Target,
    done: Vec<Sent>,
    t: Tally,
}

impl Worker {
    pub fn new(id: u32, plan: Arc<Plan>) -> Worker {
        let target = match &plan.core {
            Some(url) => Target::Direct(CoreHttp::new(url, plan.timeout)),
            None if plan.http => Target::Http(HttpConn::new(&plan.relay, plan.timeout)),
            None => Target::Relay(RelayConn::new(&plan.relay, plan.timeout, plan.tls.clone())),
        };
        let rng = Rng::new(plan.seed ^ u64::from(id + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        Worker {
            id,
            plan,
            rng,
            counter: 0,
            target,
            done: Vec::new(),
            t: Tally::default(),
        }
    }

    fn new_transfer(&mut self) -> Transfer {
        self.counter += 1;
        let digits = |r: &mut Rng| format!("{:014}", r.below(100_000_000_000_000));
        Transfer {
            guid: format!("{}-{:x}-{:x}", self.plan.prefix, self.id, self.counter),
            from_account: digits(&mut self.rng),
            to_account: digits(&mut self.rng),
            amount: 1 + self.rng.below(9_999_999),
            memo: format!("loadgen {}", self.id),
        }
    }

    fn remember(&mut self, sent: Sent) {
        if self.done.len() < RESEND_MEMORY {
            self.done.push(sent);
        } else {
            let i = self.rng.below(self.done.len() as u64) as usize;
            self.done[i] = sent;
        }
    }

    pub fn run(mut self, pool_share: u32, ready: &Barrier, go: &Barrier) -> Tally {
        // A connection that cannot be made now shows up as errors in the first requests.
        let _ = self.target.ensure_connected();
        if self.plan.mode == Mode::Replay {
            for _ in 0..pool_share {
                let t = self.new_transfer();
                if let Some((code, _)) = self.exchange(&t, None, false)
                    && !code.starts_with('E')
                {
                    self.t.pool_finished += 1;
                }
            }
        }
        ready.wait();
        go.wait();
        let (measure_start, deadline) = {
            let times = self.plan.times.get().expect("set before go");
            (times.measure_start, times.deadline)
        };
        loop {
            let now = Instant::now();
            let measuring = now >= measure_start;
            if measuring {
                if deadline.is_some_and(|d| now >= d) {
                    break;
                }
                if let Some(q) = self.plan.quota
                    && self.plan.issued.fetch_add(1, Ordering::Relaxed) >= q
                {
                    break;
                }
            }
            let resend = match self.plan.mode {
                Mode::Replay if self.done.is_empty() => {
                    // Nothing finished to resend: the pool booking failed (counted).
                    break;
                }
                Mode::Replay => Some(self.rng.below(self.done.len() as u64) as usize),
                Mode::Relay if !self.done.is_empty() && self.rng.chance(self.plan.resend_ratio) => {
                    Some(self.rng.below(self.done.len() as u64) as usize)
                }
                Mode::Direct if measuring && self.rng.chance(self.plan.resend_ratio) => {
                    self.t.resend_slots += 1;
                    None
                }
                _ => None,
            };
            match resend {
                Some(i) => {
                    let msg = std::mem::take(&mut self.done[i].msg);
                    let t = wire::parse_request(&msg).expect("our own request");
                    self.exchange(&t, Some((i, msg)), measuring);
                }
                None => {
                    let t = self.new_transfer();
                    self.exchange(&t, None, measuring);
                }
            }
        }
        self.t.connects = self.target.connects();
        self.t
    }

    /// One request, timed and checked. `resend` is the remembered GUID's slot and request
    /// bytes. Returns the code and reply bytes when the reply was valid.
    fn exchange(
        &mut self,
        t: &Transfer,
        resend: Option<(usize, Vec<u8>)>,
        measuring: bool,
    ) -> Option<(String, Option<Vec<u8>>)> {
        let msg = match &resend {
            Some((_, m)) => m.clone(),
            None => wire::encode_request(t).expect("generated transfers are valid"),
        };
        let started = Instant::now();
        let result = self.target.call(t, &msg);
        let ended = Instant::now();
        let answer = match result {
            Ok(a) => a,
            Err(f) => {
                match f {
                    Fail::Broken { what, timeout } => {
                        self.t.errors += 1;
                        if timeout {
                            self.t.timeouts += 1;
                        }
                        if self.t.errors <= 3 {
                            eprintln!("loadgen: connection {}: {} : {what}", self.id, t.guid);
                        }
                        // Do not spin on a relay that refuses connections.
                        thread::sleep(Duration::from_millis(10));
                    }
                    Fail::Malformed(why) => {
                        self.t.malformed += 1;
                        eprintln!("loadgen: connection {}: malformed reply: {why}", self.id);
                    }
                }
                if let Some((i, m)) = resend {
                    self.done[i].msg = m;
                }
                return None;
            }
        };
        if measuring {
            self.t.lat.record(ended - started);
            self.t.requests += 1;
            *self.t.codes.entry(answer.code.clone()).or_default() += 1;
            self.t.last_end = Some(ended);
            if resend.is_some() {
                self.t.resends += 1;
            } else {
                self.t.new_requests += 1;
            }
        }
        match resend {
            Some((i, m)) => {
                let slot = &mut self.done[i];
                slot.msg = m;
                match (&slot.booked, &answer.bytes) {
                    (Some(want), Some(got)) if want != got => {
                        self.t.mismatches += 1;
                        eprintln!(
                            "loadgen: resend of {} got {:?}, first reply was {:?}",
                            t.guid,
                            String::from_utf8_lossy(got),
                            String::from_utf8_lossy(want)
                        );
                    }
                    (None, Some(got)) if answer.code == "0000" => slot.booked = Some(got.clone()),
                    _ => {}
                }
            }
            None if self.plan.mode != Mode::Direct => {
                let finished = !answer.code.starts_with('E');
                if self.plan.mode == Mode::Relay || finished {
                    let booked = (answer.code == "0000")
                        .then(|| answer.bytes.clone())
                        .flatten();
                    self.remember(Sent { msg, booked });
                }
            }
            None => {}
        }
        Some((answer.code, answer.bytes))
    }
}
