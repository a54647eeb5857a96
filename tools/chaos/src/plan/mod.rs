//! What the run does, decided by the seed alone: each channel's sequence of actions and the
//! schedule of relay kills and core outages. Nothing here looks at replies or clocks, so the
//! same `--seed` replays the same actions (only their timing differs).
//!
//! Here the channels' actions (`Planner`); the disruptions (`schedule`), which relay each
//! request goes to (`route`), and the digest of it all (`digest`) in their own files.

mod digest;
mod route;
mod schedule;
#[cfg(test)]
mod tests;

pub use self::digest::plan_digest;
pub use self::route::Router;
pub use self::schedule::{Disruption, Event, Targets, schedule};

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
