//! Phase 2: the kill schedule. While the channels and the tool loops go on, the relay is
//! SIGKILLed and restarted, and the core goes away and comes back, as the plan says; an exit
//! nobody caused is a finding, and the server is started again.

use std::thread;
use std::time::Duration;

use super::Run;
use crate::plan::{Disruption, Event};

impl Run<'_> {
    pub(super) fn disrupt(&mut self) -> anyhow::Result<()> {
        let end = Duration::from_secs(self.cfg.secs);
        let mut next = 0;
        while self.start.elapsed() < end {
            self.check_interrupted()?;
            if let Some(what) = self.core.check_crash(self.start.elapsed()) {
                println!("chaos: FINDING: {what}");
                self.crashes.push(what);
                self.core.start(self.start.elapsed())?;
            }
            if let Some(what) = self.relay.check_crash(self.start.elapsed()) {
                println!("chaos: FINDING: {what}");
                self.crashes.push(what);
                self.restart_relay(self.start.elapsed());
            }
            while next < self.events.len() && self.events[next].at <= self.start.elapsed() {
                let at = self.start.elapsed();
                match self.events[next].what {
                    Disruption::KillRelay => self.relay.kill(),
                    Disruption::StartRelay => self.restart_relay(at),
                    Disruption::KillCore => self.core.kill(),
                    // The simulator is not under test: if it cannot come back, the run is void.
                    Disruption::StartCore => self.core.start(at)?,
                }
                next += 1;
            }
            thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    /// A relay that cannot start again on its ledger after a SIGKILL is a finding, not the
    /// end of the run: the channels keep knocking, the next scheduled start tries again, and
    /// the settling and the checks need no relay.
    fn restart_relay(&mut self, at: Duration) {
        if let Err(e) = self.relay.start(at) {
            let what = format!(
                "relay could not be restarted at t={:.1}s: {e:#}",
                at.as_secs_f64()
            );
            println!("chaos: FINDING: {what}");
            self.crashes.push(what);
        }
    }
}

/// `relay killed at 1.2s(+0.15) …; core down 4.0-5.3s …`.
pub(super) fn describe(events: &[Event]) -> String {
    let mut relay = Vec::new();
    let mut core = Vec::new();
    let mut relay_down = None;
    let mut core_down = None;
    for e in events {
        let t = e.at.as_secs_f64();
        match e.what {
            Disruption::KillRelay => relay_down = Some(t),
            Disruption::StartRelay => {
                if let Some(d) = relay_down.take() {
                    relay.push(format!("{d:.1}s(+{:.2})", t - d));
                }
            }
            Disruption::KillCore => core_down = Some(t),
            Disruption::StartCore => {
                if let Some(d) = core_down.take() {
                    core.push(format!("{d:.1}-{t:.1}s"));
                }
            }
        }
    }
    if let Some(d) = relay_down {
        relay.push(format!("{d:.1}s"));
    }
    if let Some(d) = core_down {
        core.push(format!("{d:.1}s-end"));
    }
    format!(
        "relay killed at {}; core down {}",
        if relay.is_empty() {
            "-".into()
        } else {
            relay.join(" ")
        },
        if core.is_empty() {
            "-".into()
        } else {
            core.join(" ")
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describes_outages_and_what_is_still_down_at_the_end() {
        let ev = |ms: u64, what| Event {
            at: Duration::from_millis(ms),
            what,
        };
        let events = [
            ev(1200, Disruption::KillRelay),
            ev(1350, Disruption::StartRelay),
            ev(4000, Disruption::KillCore),
            ev(5300, Disruption::StartCore),
            ev(6000, Disruption::KillRelay),
            ev(7000, Disruption::KillCore),
        ];
        assert_eq!(
            describe(&events),
            "relay killed at 1.2s(+0.15) 6.0s; core down 4.0-5.3s 7.0s-end"
        );
        assert_eq!(describe(&[]), "relay killed at -; core down -");
    }
}
