//! The plan's digest, printed so that two runs can be seen to do the same.

use super::{Action, Event, Planner, Router};

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
