//! Phase 2: the kill schedule. While the channels and the tool loops go on, the relays are
//! SIGKILLed and restarted, the core goes away and comes back, and the database server (when
//! the run has one) is stopped in immediate mode and started again, as the plan says; an
//! exit nobody caused is a finding, and the server is started again.

use std::fs::OpenOptions;
use std::io::Write;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::Context;

use super::Run;
use crate::plan::{Disruption, Event};

/// How often starting the database server again is tried before the run is void.
const DB_START_TRIES: usize = 3;

/// With a ledger the run does not own (`--db`): how often a relay that could not start is
/// tried again, and for how long before that is a finding.
const SUPERVISOR_PAUSE: Duration = Duration::from_millis(500);
const SUPERVISOR_PATIENCE: Duration = Duration::from_secs(60);

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
            for i in 0..self.relays.len() {
                if let Some(what) = self.relays[i].check_crash(self.start.elapsed()) {
                    println!("chaos: FINDING: {what}");
                    self.crashes.push(what);
                    self.restart_relay(i, self.start.elapsed());
                }
                self.supervise(i);
            }
            while next < self.events.len() && self.events[next].at <= self.start.elapsed() {
                let at = self.start.elapsed();
                match self.events[next].what {
                    Disruption::KillRelay(i) => self.relays[i].kill(),
                    Disruption::StartRelay(i) => self.restart_relay(i, at),
                    Disruption::KillCore => self.core.kill(),
                    // The simulator is not under test: if it cannot come back, the run is void.
                    Disruption::StartCore => self.core.start(at)?,
                    Disruption::StopDb => self.stop_db()?,
                    // Neither is the database server.
                    Disruption::StartDb => self.start_db()?,
                }
                next += 1;
            }
            thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    /// A relay that cannot start again on its ledger after a SIGKILL is a finding, not the
    /// end of the run: the channels keep knocking, the next scheduled start tries again, and
    /// the settling and the checks need no relay. While the database server is down a relay
    /// cannot open its ledger (and says so: exit 1), so its start waits until the server is
    /// back, as a supervisor's next try would. On a ledger the run does not own (`--db`) it
    /// cannot know when that is: a start that fails is tried again (`supervise`).
    fn restart_relay(&mut self, i: usize, at: Duration) {
        if self.ledger.cluster().is_some() && self.outages.is_down() {
            if !self.pending[i] {
                self.pending[i] = true;
                self.deferred_starts += 1;
            }
            return;
        }
        match self.relays[i].start(at) {
            Ok(()) => self.unstarted[i] = None,
            // On a ledger the run does not own, no host may be writable right now (a
            // failover): tried again by `supervise`, as a supervisor would.
            Err(_) if self.cfg.external_db.is_some() && self.unstarted[i].is_none() => {
                self.unstarted[i] = Some((at, at));
                self.deferred_starts += 1;
            }
            Err(_)
                if self.unstarted[i].is_some_and(|(first, _)| at < first + SUPERVISOR_PATIENCE) =>
            {
                self.unstarted[i] = self.unstarted[i].map(|(first, _)| (first, at));
            }
            Err(e) => {
                self.unstarted[i] = None;
                let what = format!(
                    "{} could not be restarted at t={:.1}s: {e:#}",
                    self.relays[i].name,
                    at.as_secs_f64()
                );
                println!("chaos: FINDING: {what}");
                self.crashes.push(what);
            }
        }
    }

    /// Starts relay `i` again if an earlier start found no writable database (`--db`) and
    /// the supervisor's pause has passed since its last try.
    fn supervise(&mut self, i: usize) {
        let now = self.start.elapsed();
        if let Some((_, last)) = self.unstarted[i]
            && now >= last + SUPERVISOR_PAUSE
        {
            self.restart_relay(i, now);
        }
    }

    /// Stops the database server in immediate mode: every connection is cut at once, nothing
    /// is checkpointed (to its data, a crash).
    pub(super) fn stop_db(&mut self) -> anyhow::Result<()> {
        let Some(cluster) = self.ledger.cluster() else {
            return Ok(());
        };
        if self.outages.is_down() {
            return Ok(());
        }
        let began = Instant::now();
        self.outages.down(began);
        cluster
            .stop()
            .context("the database server could not be stopped")?;
        self.db_log(&format!(
            "database server stopped (immediate mode) in {} ms",
            began.elapsed().as_millis()
        ));
        Ok(())
    }

    /// Starts the database server again (crash recovery), then the relays whose start
    /// waited for it.
    pub(super) fn start_db(&mut self) -> anyhow::Result<()> {
        let Some(cluster) = self.ledger.cluster() else {
            return Ok(());
        };
        if !self.outages.is_down() {
            return Ok(());
        }
        let began = Instant::now();
        let mut tries = 0;
        loop {
            tries += 1;
            match cluster.start_again() {
                Ok(()) => break,
                Err(e) if tries >= DB_START_TRIES => {
                    return Err(e.context(format!(
                        "the database server could not be started again ({tries} tries)"
                    )));
                }
                Err(_) => thread::sleep(Duration::from_millis(500)),
            }
        }
        self.outages.up(Instant::now());
        self.db_restarts += 1;
        self.db_log(&format!(
            "database server up again (its start took {} ms, {tries} tries)",
            began.elapsed().as_millis()
        ));
        for i in 0..self.relays.len() {
            if std::mem::take(&mut self.pending[i]) {
                self.restart_relay(i, self.start.elapsed());
            }
        }
        Ok(())
    }

    /// A line in `database.log`, for the evidence: when the server went down and came back.
    fn db_log(&self, what: &str) {
        if let Ok(mut f) = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.work.log("database"))
        {
            let _ = writeln!(
                f,
                "=== chaos: t={:.3}s {what}",
                self.start.elapsed().as_secs_f64()
            );
        }
    }
}

/// `relay killed at 1.2s(+0.15) …; core down 4.0-5.3s …`; with several relays, a part per
/// relay (`relay1 killed at …`), and with a database server, `database down 6.0s(+0.40) …`.
pub(super) fn describe(events: &[Event], relays: usize, db: bool) -> String {
    let mut relay = vec![Vec::new(); relays];
    let mut core = Vec::new();
    let mut database = Vec::new();
    let mut relay_down = vec![None; relays];
    let mut core_down = None;
    let mut db_down = None;
    for e in events {
        let t = e.at.as_secs_f64();
        match e.what {
            Disruption::KillRelay(i) => relay_down[i] = Some(t),
            Disruption::StartRelay(i) => {
                if let Some(d) = relay_down[i].take() {
                    relay[i].push(format!("{d:.1}s(+{:.2})", t - d));
                }
            }
            Disruption::KillCore => core_down = Some(t),
            Disruption::StartCore => {
                if let Some(d) = core_down.take() {
                    core.push(format!("{d:.1}-{t:.1}s"));
                }
            }
            Disruption::StopDb => db_down = Some(t),
            Disruption::StartDb => {
                if let Some(d) = db_down.take() {
                    database.push(format!("{d:.1}s(+{:.2})", t - d));
                }
            }
        }
    }
    for (i, d) in relay_down.into_iter().enumerate() {
        if let Some(d) = d {
            relay[i].push(format!("{d:.1}s"));
        }
    }
    if let Some(d) = core_down {
        core.push(format!("{d:.1}s-end"));
    }
    if let Some(d) = db_down {
        database.push(format!("{d:.1}s-end"));
    }
    let list = |v: &[String]| {
        if v.is_empty() {
            "-".to_string()
        } else {
            v.join(" ")
        }
    };
    let mut parts: Vec<String> = relay
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let name = if relays == 1 {
                "relay".to_string()
            } else {
                format!("relay{}", i + 1)
            };
            format!("{name} killed at {}", list(r))
        })
        .collect();
    parts.push(format!("core down {}", list(&core)));
    if db {
        parts.push(format!("database down {}", list(&database)));
    }
    parts.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(ms: u64, what: Disruption) -> Event {
        Event {
            at: Duration::from_millis(ms),
            what,
        }
    }

    #[test]
    fn describes_outages_and_what_is_still_down_at_the_end() {
        let events = [
            ev(1200, Disruption::KillRelay(0)),
            ev(1350, Disruption::StartRelay(0)),
            ev(4000, Disruption::KillCore),
            ev(5300, Disruption::StartCore),
            ev(6000, Disruption::KillRelay(0)),
            ev(7000, Disruption::KillCore),
        ];
        assert_eq!(
            describe(&events, 1, false),
            "relay killed at 1.2s(+0.15) 6.0s; core down 4.0-5.3s 7.0s-end"
        );
        assert_eq!(describe(&[], 1, false), "relay killed at -; core down -");
    }

    #[test]
    fn describes_each_relay_and_the_database() {
        let events = [
            ev(1200, Disruption::KillRelay(1)),
            ev(1350, Disruption::StartRelay(1)),
            ev(2000, Disruption::StopDb),
            ev(2400, Disruption::StartDb),
            ev(3000, Disruption::KillRelay(0)),
            ev(9000, Disruption::StopDb),
        ];
        assert_eq!(
            describe(&events, 3, true),
            "relay1 killed at 3.0s; relay2 killed at 1.2s(+0.15); relay3 killed at -; \
             core down -; database down 2.0s(+0.40) 9.0s-end"
        );
    }
}
