//! What the run does, decided by the seed alone: each channel's sequence of actions and the
//! schedule of relay kills and core outages. Nothing here looks at replies or clocks, so the
//! same `--seed` replays the same actions (only their timing differs).

use std::time::Duration;

use fastrand::Rng;
use wire::{self, Transfer};

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

/// A disruption, at an offset from the start of the run. Relays are numbered from 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Disruption {
    KillRelay(usize),
    StartRelay(usize),
    KillCore,
    StartCore,
    /// The database server is stopped in immediate mode (every connection cut, no
    /// checkpoint: a crash as far as its data is concerned) …
    StopDb,
    /// … and started again.
    StartDb,
}

impl Disruption {
    /// Its bytes in the plan's digest: relay 0's events and the core's keep the bytes they
    /// had before there were several relays and a database, so old digests still match.
    fn digest_bytes(self) -> Vec<u8> {
        match self {
            Disruption::KillRelay(0) => vec![0],
            Disruption::StartRelay(0) => vec![1],
            Disruption::KillCore => vec![2],
            Disruption::StartCore => vec![3],
            Disruption::StopDb => vec![4],
            Disruption::StartDb => vec![5],
            Disruption::KillRelay(i) => vec![0, i as u8, (i >> 8) as u8],
            Disruption::StartRelay(i) => vec![1, i as u8, (i >> 8) as u8],
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    pub at: Duration,
    pub what: Disruption,
}

/// What the schedule disrupts besides the core and the first relay.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Targets {
    /// How many relays there are (at least 1).
    pub relays: usize,
    /// Whether the database is a server of the run's own that can be restarted.
    pub db: bool,
}

impl Targets {
    /// One relay, an embedded ledger: the schedule as it has always been.
    pub const SINGLE: Targets = Targets {
        relays: 1,
        db: false,
    };
}

/// The stream of relay `i`'s kills, for `i` ≥ 1 (relay 0 shares `SCHEDULE_STREAM` with the
/// core, as when there was only one relay).
const RELAY_STREAM: u64 = SCHEDULE_STREAM + 1;
/// The stream of the database's restarts.
const DB_STREAM: u64 = SCHEDULE_STREAM - 1;
/// The streams of the channels' routing across relays (`ROUTE_STREAM + channel`).
const ROUTE_STREAM: u64 = SCHEDULE_STREAM / 2;

/// The kill schedule for a run of `secs`: each relay is SIGKILLed every 1–4 s and restarted
/// after 0–300 ms; the core is SIGKILLed every 3–8 s of uptime and restarted after 0.5–2 s;
/// with a database server, it is stopped (immediate mode) every 5–10 s of uptime and
/// started again after 0.1–1 s. Sorted by time; the streams interleave freely. With one
/// relay and no database server, the schedule of the runs before there were either.
pub fn schedule(seed: u64, secs: u64, targets: Targets) -> Vec<Event> {
    let mut rng = Rng::with_seed(stream_seed(seed, SCHEDULE_STREAM));
    let end = Duration::from_secs(secs);
    let mut events = Vec::new();
    let relay = |i| (Disruption::KillRelay(i), Disruption::StartRelay(i));
    let core = (Disruption::KillCore, Disruption::StartCore);
    outages(&mut rng, end, &mut events, relay(0), (1000, 4000), (0, 300));
    outages(&mut rng, end, &mut events, core, (3000, 8000), (500, 2000));
    for i in 1..targets.relays {
        let mut rng = Rng::with_seed(stream_seed(seed, RELAY_STREAM + i as u64));
        outages(&mut rng, end, &mut events, relay(i), (1000, 4000), (0, 300));
    }
    if targets.db {
        let mut rng = Rng::with_seed(stream_seed(seed, DB_STREAM));
        let db = (Disruption::StopDb, Disruption::StartDb);
        outages(&mut rng, end, &mut events, db, (5000, 10_000), (100, 1000));
    }
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

/// Which relay a channel sends each request to, decided by the seed alone (a stream of its
/// own, so that the channel's actions are the same whatever the number of relays). A new
/// GUID goes to any relay; a resend of it (byte-identical, the twin in flight, another
/// amount) goes to another relay than its first send four times in five, as a channel
/// behind a load balancer would see it.
pub struct Router {
    rng: Rng,
    relays: usize,
    /// The relay of the first send of every new GUID of the channel's history, in the
    /// planner's order (New and InFlight).
    firsts: Vec<usize>,
}

/// Out of 100, how often a resend goes to another relay than the first send.
pub const OTHER_RELAY_PERCENT: u32 = 80;

/// Where a step's request goes: `to`, and for an in-flight pair the twin's relay.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route {
    pub to: usize,
    pub twin: usize,
}

impl Router {
    pub fn new(seed: u64, channel: usize, relays: usize) -> Router {
        Router {
            rng: Rng::with_seed(stream_seed(seed, ROUTE_STREAM + channel as u64)),
            relays: relays.max(1),
            firsts: Vec::new(),
        }
    }

    /// The relays of `action`, the planner's next step (every step must be routed, in
    /// order: the router follows the planner's history).
    pub fn route(&mut self, action: &Action) -> Route {
        match action {
            Action::New(_) => {
                let to = self.first();
                Route { to, twin: to }
            }
            Action::InFlight(_) => {
                let to = self.first();
                let twin = self.again(to);
                Route { to, twin }
            }
            Action::Resend { index, .. } | Action::OtherAmount { index, .. } => {
                let to = self.again(self.firsts[*index]);
                Route { to, twin: to }
            }
        }
    }

    /// The relay of a new GUID's first send.
    fn first(&mut self) -> usize {
        let to = if self.relays == 1 {
            0
        } else {
            self.rng.usize(0..self.relays)
        };
        self.firsts.push(to);
        to
    }

    /// The relay of a resend of a GUID first sent to `first`.
    fn again(&mut self, first: usize) -> usize {
        if self.relays == 1 {
            return 0;
        }
        if self.rng.u32(0..100) < OTHER_RELAY_PERCENT {
            (first + 1 + self.rng.usize(0..self.relays - 1)) % self.relays
        } else {
            first
        }
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

/// A digest of the first `steps` steps of every channel (with several relays, also their
/// routes) and of the schedule: equal digests mean the same actions in the same order.
pub fn plan_digest(
    seed: u64,
    channels: usize,
    relays: usize,
    steps: usize,
    events: &[Event],
) -> u64 {
    let mut d = Digest::new();
    for c in 0..channels {
        let mut p = Planner::new(seed, c);
        let mut r = Router::new(seed, c, relays);
        for _ in 0..steps {
            let step = p.next_step();
            let route = r.route(&step.action);
            // With one relay there is nothing to route: the digest of the runs before.
            if relays > 1 {
                d.add(&[route.to as u8, route.twin as u8]);
            }
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
        d.add(&e.what.digest_bytes());
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
        let a = schedule(5, 60, Targets::SINGLE);
        assert_eq!(a, schedule(5, 60, Targets::SINGLE));
        assert_ne!(a, schedule(6, 60, Targets::SINGLE));
        assert!(a.windows(2).all(|w| w[0].at <= w[1].at));
        let kills = a
            .iter()
            .filter(|e| e.what == Disruption::KillRelay(0))
            .count();
        assert!((12..=60).contains(&kills), "{kills} relay kills in 60 s");
        assert!(a.iter().any(|e| e.what == Disruption::KillCore));
        assert!(
            !a.iter()
                .any(|e| matches!(e.what, Disruption::StopDb | Disruption::KillRelay(1..)))
        );
        // Every kill is followed by its start.
        for (kill, start) in [
            (Disruption::KillRelay(0), Disruption::StartRelay(0)),
            (Disruption::KillCore, Disruption::StartCore),
        ] {
            let k = a.iter().filter(|e| e.what == kill).count();
            let s = a.iter().filter(|e| e.what == start).count();
            assert_eq!(k, s);
        }
    }

    #[test]
    fn more_relays_and_a_database_keep_the_single_relay_schedule() {
        let single = schedule(5, 60, Targets::SINGLE);
        let targets = Targets {
            relays: 3,
            db: true,
        };
        let many = schedule(5, 60, targets);
        assert_eq!(many, schedule(5, 60, targets));
        // Relay 0 and the core: the same events as with one relay.
        let old: Vec<Event> = many
            .iter()
            .filter(|e| {
                matches!(
                    e.what,
                    Disruption::KillRelay(0)
                        | Disruption::StartRelay(0)
                        | Disruption::KillCore
                        | Disruption::StartCore
                )
            })
            .copied()
            .collect();
        assert_eq!(old, single);
        assert!(many.windows(2).all(|w| w[0].at <= w[1].at));
        for (kill, start) in [
            (Disruption::KillRelay(1), Disruption::StartRelay(1)),
            (Disruption::KillRelay(2), Disruption::StartRelay(2)),
            (Disruption::StopDb, Disruption::StartDb),
        ] {
            let k = many.iter().filter(|e| e.what == kill).count();
            let s = many.iter().filter(|e| e.what == start).count();
            assert_eq!(k, s, "{kill:?}");
            assert!(k >= 3, "{k} {kill:?} in 60 s");
        }
        // The database: up 5–10 s, down 0.1–1 s.
        let db: Vec<&Event> = many
            .iter()
            .filter(|e| matches!(e.what, Disruption::StopDb | Disruption::StartDb))
            .collect();
        for pair in db.chunks(2) {
            let down = pair[1].at - pair[0].at;
            assert!(down >= Duration::from_millis(100) && down <= Duration::from_millis(1000));
        }
        for w in db[1..].chunks(2).filter(|w| w.len() == 2) {
            let up = w[1].at - w[0].at;
            assert!(up >= Duration::from_millis(5000) && up <= Duration::from_millis(10_000));
        }
        assert!(!many.iter().any(|e| e.what == Disruption::KillRelay(3)));
    }

    #[test]
    fn one_relay_routes_everything_to_it_and_keeps_the_digest() {
        let events = schedule(1, 45, Targets::SINGLE);
        // The digest of `--seed 1 --secs 45` before there were several relays.
        assert_eq!(plan_digest(1, 32, 1, 200, &events), 0xa13c45a4ecde1d7e);
        let mut p = Planner::new(1, 0);
        let mut r = Router::new(1, 0, 1);
        for _ in 0..500 {
            assert_eq!(r.route(&p.next_step().action), Route { to: 0, twin: 0 });
        }
    }

    #[test]
    fn resends_mostly_go_to_another_relay() {
        let mut p = Planner::new(9, 4);
        let mut r = Router::new(9, 4, 3);
        let mut firsts = Vec::new();
        let (mut again, mut other) = (0, 0);
        for _ in 0..5000 {
            let action = p.next_step().action;
            let route = r.route(&action);
            assert!(route.to < 3 && route.twin < 3);
            match action {
                Action::New(_) => firsts.push(route.to),
                Action::InFlight(_) => {
                    firsts.push(route.to);
                    again += 1;
                    other += usize::from(route.twin != route.to);
                }
                Action::Resend { index, .. } | Action::OtherAmount { index, .. } => {
                    again += 1;
                    other += usize::from(route.to != firsts[index]);
                }
            }
        }
        let share = other * 100 / again;
        assert!((70..=90).contains(&share), "{share}% to another relay");
        // Every relay gets new GUIDs.
        for relay in 0..3 {
            assert!(firsts.iter().filter(|&&f| f == relay).count() > 500);
        }
    }

    #[test]
    fn memo_prefixes() {
        assert_eq!(Memo::of("SLOW rent 1"), Memo::Slow);
        assert_eq!(Memo::of("FAIL500 x"), Memo::Fail500);
        assert_eq!(Memo::of("rent SLOW"), Memo::Normal);
    }
}
