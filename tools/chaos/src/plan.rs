//! What the run does, decided by the seed alone: each channel's sequence of actions and the
//! schedule of relay kills and core outages. Nothing here looks at replies or clocks, so the
//! same `--seed` replays the same actions (only their timing differs).

use std::time::Duration;

use fastrand::Rng;
use ledger::wire::{self, Transfer};

/// The seed of one independent stream: `stream` is a channel index, or one of the constants
/// below. SplitMix64 of the mix, so that neighbouring indexes give unrelated streams.
pub fn stream_seed(seed: u64, stream: u64) -> u64 {
    let mut z = seed ^ stream.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The stream of the kill schedule (channel indexes are far below it).
pub const SCHEDULE_STREAM: u64 = u64::MAX / 2;

/// What the memo asks the core simulator to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Memo {
    Normal,
    Slow,
    Drop,
    Fail500,
    Reject,
}

impl Memo {
    pub fn of(memo: &str) -> Memo {
        [
            ("SLOW", Memo::Slow),
            ("DROP", Memo::Drop),
            ("FAIL500", Memo::Fail500),
            ("REJECT", Memo::Reject),
        ]
        .into_iter()
        .find(|(p, _)| memo.starts_with(p))
        .map_or(Memo::Normal, |(_, m)| m)
    }

    pub fn name(self) -> &'static str {
        match self {
            Memo::Normal => "normal",
            Memo::Slow => "SLOW",
            Memo::Drop => "DROP",
            Memo::Fail500 => "FAIL500",
            Memo::Reject => "REJECT",
        }
    }
}

/// One request to send: its GUID, the exact message (without length prefix) and its memo.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub guid: String,
    pub msg: Vec<u8>,
    pub memo: Memo,
}

/// One step of a channel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// A transfer under a GUID never used before.
    New(Request),
    /// The byte-identical request of an earlier GUID of this channel (`index` into its
    /// history), as a channel that timed out would send it.
    Resend { index: usize, req: Request },
    /// A new GUID sent twice at about the same time, from two connections.
    InFlight(Request),
    /// An earlier GUID (`index`) with another amount: the relay must say `E904`.
    OtherAmount { index: usize, req: Request },
}

/// A step and the pause a channel takes before it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    pub pause: Duration,
    pub action: Action,
}

/// One channel's plan: an endless, seed-determined sequence of steps.
pub struct Planner {
    rng: Rng,
    channel: usize,
    next_guid: u64,
    /// Every new GUID this channel has sent (New and InFlight), in order.
    history: Vec<(Transfer, Request)>,
}

impl Planner {
    pub fn new(seed: u64, channel: usize) -> Planner {
        Planner {
            rng: Rng::with_seed(stream_seed(seed, channel as u64)),
            channel,
            next_guid: 0,
            history: Vec::new(),
        }
    }

    pub fn next_step(&mut self) -> Step {
        let pause = Duration::from_millis(self.rng.u64(0..=8));
        let roll = self.rng.u32(0..100);
        let action = match roll {
            _ if self.history.is_empty() => Action::New(self.fresh(None)),
            0..=61 => Action::New(self.fresh(None)),
            62..=81 => {
                let index = self.pick_earlier();
                Action::Resend {
                    index,
                    req: self.history[index].1.clone(),
                }
            }
            82..=93 => {
                // Half of them SLOW, so that the twin surely finds the first one in flight.
                let memo = if self.rng.bool() {
                    Memo::Slow
                } else {
                    Memo::Normal
                };
                let req = self.fresh(Some(memo));
                Action::InFlight(req)
            }
            _ => {
                let index = self.pick_earlier();
                let mut t = self.history[index].0.clone();
                let delta = self.rng.u64(1..=1000);
                t.amount = if t.amount > delta {
                    t.amount - delta
                } else {
                    t.amount + delta
                };
                let msg = wire::encode_request(&t).expect("a changed amount stays valid");
                Action::OtherAmount {
                    index,
                    req: Request {
                        guid: t.guid,
                        msg,
                        memo: self.history[index].1.memo,
                    },
                }
            }
        };
        Step { pause, action }
    }

    /// Mostly one of the last few GUIDs (a channel resends soon), sometimes any.
    fn pick_earlier(&mut self) -> usize {
        let n = self.history.len();
        if self.rng.u32(0..10) < 7 {
            n - 1 - self.rng.usize(0..n.min(20))
        } else {
            self.rng.usize(0..n)
        }
    }

    fn memo_kind(&mut self) -> Memo {
        match self.rng.u32(0..100) {
            0..=72 => Memo::Normal,
            73..=84 => Memo::Slow,
            85..=91 => Memo::Drop,
            92..=94 => Memo::Fail500,
            _ => Memo::Reject,
        }
    }

    /// A request under a new GUID, recorded in the history.
    fn fresh(&mut self, memo: Option<Memo>) -> Request {
        let memo = memo.unwrap_or_else(|| self.memo_kind());
        // GUIDs of varied length and alphabet, unique per channel and step.
        let tail_len = self.rng.usize(0..=16);
        let tail: String = (0..tail_len)
            .map(|_| {
                let pool = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz._-";
                char::from(pool[self.rng.usize(0..pool.len())])
            })
            .collect();
        let guid = format!("c{:03}-{:06}{}", self.channel, self.next_guid, tail);
        self.next_guid += 1;
        let text = match memo {
            Memo::Normal => "rent",
            Memo::Slow => "SLOW rent",
            Memo::Drop => "DROP rent",
            Memo::Fail500 => "FAIL500 rent",
            Memo::Reject => "REJECT rent",
        };
        let t = Transfer {
            guid: guid.clone(),
            from_account: format!("{:014}", self.rng.u64(1..100_000_000_000_000)),
            to_account: format!("{:014}", self.rng.u64(1..100_000_000_000_000)),
            amount: self.rng.u64(1..=10_000_000),
            memo: format!("{text} {}", self.next_guid),
        };
        let msg = wire::encode_request(&t).expect("generated requests are valid");
        let req = Request { guid, msg, memo };
        self.history.push((t, req.clone()));
        req
    }
}

/// A disruption, at an offset from the start of the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Disruption {
    KillRelay,
    StartRelay,
    KillCore,
    StartCore,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    pub at: Duration,
    pub what: Disruption,
}

/// The kill schedule for a run of `secs`: the relay is SIGKILLed every 1–4 s and restarted
/// after 0–300 ms; the core is SIGKILLed every 3–8 s of uptime and restarted after 0.5–2 s.
/// Sorted by time; the two streams interleave freely.
pub fn schedule(seed: u64, secs: u64) -> Vec<Event> {
    let mut rng = Rng::with_seed(stream_seed(seed, SCHEDULE_STREAM));
    let end = Duration::from_secs(secs);
    let mut events = Vec::new();
    let relay = (Disruption::KillRelay, Disruption::StartRelay);
    let core = (Disruption::KillCore, Disruption::StartCore);
    outages(&mut rng, end, &mut events, relay, (1000, 4000), (0, 300));
    outages(&mut rng, end, &mut events, core, (3000, 8000), (500, 2000));
    // Stable: a kill and a start at the same millisecond keep their order.
    events.sort_by_key(|e| e.at);
    events
}

/// One server's outages until `end`: up for `up` ms (drawn from that range), killed, down
/// for `down` ms, started, and so on.
fn outages(
    rng: &mut Rng,
    end: Duration,
    events: &mut Vec<Event>,
    (kill, start): (Disruption, Disruption),
    up: (u64, u64),
    down: (u64, u64),
) {
    let ms = |rng: &mut Rng, (lo, hi): (u64, u64)| Duration::from_millis(rng.u64(lo..=hi));
    let mut t = ms(rng, up);
    while t < end {
        events.push(Event { at: t, what: kill });
        let back = t + ms(rng, down);
        events.push(Event {
            at: back,
            what: start,
        });
        t = back + ms(rng, up);
    }
}

/// FNV-1a, for printing short digests of a plan (stable across Rust versions).
pub struct Digest(u64);

impl Digest {
    pub fn new() -> Digest {
        Digest(0xcbf2_9ce4_8422_2325)
    }

    pub fn add(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }

    pub fn value(&self) -> u64 {
        self.0
    }
}

/// A digest of the first `steps` steps of every channel and of the schedule: equal digests
/// mean the same actions in the same order.
pub fn plan_digest(seed: u64, channels: usize, steps: usize, events: &[Event]) -> u64 {
    let mut d = Digest::new();
    for c in 0..channels {
        let mut p = Planner::new(seed, c);
        for _ in 0..steps {
            let step = p.next_step();
            d.add(&step.pause.as_millis().to_le_bytes());
            let (tag, req) = match &step.action {
                Action::New(r) => (0u8, r),
                Action::Resend { req, .. } => (1, req),
                Action::InFlight(r) => (2, r),
                Action::OtherAmount { req, .. } => (3, req),
            };
            d.add(&[tag]);
            d.add(&req.msg);
        }
    }
    for e in events {
        d.add(&e.at.as_millis().to_le_bytes());
        d.add(&[e.what as u8]);
    }
    d.value()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_steps() {
        let mut a = Planner::new(7, 3);
        let mut b = Planner::new(7, 3);
        for _ in 0..500 {
            assert_eq!(a.next_step(), b.next_step());
        }
    }

    #[test]
    fn channels_and_seeds_differ() {
        let first = |seed, ch| Planner::new(seed, ch).next_step();
        assert_ne!(first(7, 3), first(7, 4));
        assert_ne!(first(7, 3), first(8, 3));
    }

    #[test]
    fn steps_are_valid_and_guids_unique() {
        let mut p = Planner::new(1, 31);
        let mut new = std::collections::HashSet::new();
        for _ in 0..2000 {
            match p.next_step().action {
                Action::New(r) | Action::InFlight(r) => {
                    assert!(wire::parse_request(&r.msg).is_ok());
                    assert!(new.insert(r.guid), "GUID reused for a new transfer");
                }
                Action::Resend { req, .. } => assert!(new.contains(&req.guid)),
                Action::OtherAmount { req, .. } => {
                    assert!(new.contains(&req.guid));
                    assert!(wire::parse_request(&req.msg).is_ok());
                }
            }
        }
    }

    #[test]
    fn resend_is_byte_identical_and_other_amount_differs() {
        let mut p = Planner::new(3, 0);
        let mut seen = std::collections::HashMap::new();
        for _ in 0..2000 {
            match p.next_step().action {
                Action::New(r) | Action::InFlight(r) => {
                    seen.insert(r.guid.clone(), r.msg);
                }
                Action::Resend { req, .. } => assert_eq!(seen[&req.guid], req.msg),
                Action::OtherAmount { req, .. } => assert_ne!(seen[&req.guid], req.msg),
            }
        }
    }

    #[test]
    fn schedule_is_deterministic_sorted_and_within_the_run() {
        let a = schedule(5, 60);
        assert_eq!(a, schedule(5, 60));
        assert_ne!(a, schedule(6, 60));
        assert!(a.windows(2).all(|w| w[0].at <= w[1].at));
        let kills = a.iter().filter(|e| e.what == Disruption::KillRelay).count();
        assert!((12..=60).contains(&kills), "{kills} relay kills in 60 s");
        assert!(a.iter().any(|e| e.what == Disruption::KillCore));
        // Every kill is followed by its start.
        for (kill, start) in [
            (Disruption::KillRelay, Disruption::StartRelay),
            (Disruption::KillCore, Disruption::StartCore),
        ] {
            let k = a.iter().filter(|e| e.what == kill).count();
            let s = a.iter().filter(|e| e.what == start).count();
            assert_eq!(k, s);
        }
    }

    #[test]
    fn memo_prefixes() {
        assert_eq!(Memo::of("SLOW rent 1"), Memo::Slow);
        assert_eq!(Memo::of("FAIL500 x"), Memo::Fail500);
        assert_eq!(Memo::of("rent SLOW"), Memo::Normal);
    }
}
