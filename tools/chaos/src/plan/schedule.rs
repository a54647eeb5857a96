//! The schedule of disruptions: relay kills, core outages, database restarts, each server
//! on a stream of its own.

use std::time::Duration;

use fastrand::Rng;

use super::{SCHEDULE_STREAM, stream_seed};

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
    pub(super) fn digest_bytes(self) -> Vec<u8> {
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
