//! Which relay each request of a channel goes to.

use fastrand::Rng;

use super::{Action, SCHEDULE_STREAM, stream_seed};

/// The streams of the channels' routing across relays (`ROUTE_STREAM + channel`).
const ROUTE_STREAM: u64 = SCHEDULE_STREAM / 2;

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
