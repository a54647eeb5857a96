//! Phase 1: announce the plan, start the core and the relay, then the channel threads and
//! the `resolve` and `reprocess` loops.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::Context;

use super::{
    Bins, Config, RELAY_CONNECT_MS, RELAY_READ_MS, Run, SLOW_MS, STALE_SENT_SECS, Threads, Work,
    disrupt, path_arg,
};
use crate::channel;
use crate::plan::{self, Disruption, Event};
use crate::procs::Service;
use crate::tools::Loop;

/// How long the batch tools rest between two runs of their loop.
const TOOL_PAUSE: Duration = Duration::from_millis(300);

impl<'a> Run<'a> {
    pub(super) fn start(cfg: &'a Config, interrupted: &'a AtomicBool) -> anyhow::Result<Run<'a>> {
        let bins = Bins::find(&cfg.bin_dir)?;
        let work = Work::new(cfg.work_dir.as_deref())?;
        let events = plan::schedule(cfg.seed, cfg.secs);
        announce(cfg, &events, &work.dir);

        let start = Instant::now();
        let mut core = Service::new(
            "coresim",
            bins.coresim.clone(),
            vec![
                "--slow-ms".into(),
                SLOW_MS.to_string(),
                "--journal".into(),
                path_arg(&work.journal),
            ],
            &work.dir,
        );
        core.start(start.elapsed())?;
        let mut relay = Service::new(
            "relay",
            bins.relay.clone(),
            vec![
                "--db".into(),
                path_arg(&work.db),
                "--core".into(),
                format!("http://{}", core.addr()),
                "--connect-timeout-ms".into(),
                RELAY_CONNECT_MS.to_string(),
                "--read-timeout-ms".into(),
                RELAY_READ_MS.to_string(),
            ],
            &work.dir,
        );
        relay.start(start.elapsed())?;
        println!(
            "chaos: core {} (slow {SLOW_MS} ms, journal), relay {} (connect {RELAY_CONNECT_MS} ms, read {RELAY_READ_MS} ms)",
            core.addr(),
            relay.addr()
        );
        let relay_addr: SocketAddr = relay.addr().parse().context("relay address")?;

        let mut run = Run {
            cfg,
            interrupted,
            threads: Threads {
                stop: Arc::new(AtomicBool::new(false)),
                abort: Arc::new(AtomicBool::new(false)),
                channels: Vec::new(),
                tools: Vec::new(),
            },
            relay,
            core,
            bins,
            events,
            start,
            crashes: Vec::new(),
            work,
        };
        run.start_channels(relay_addr)?;
        run.start_tool_loops()?;
        Ok(run)
    }

    /// One thread per channel, each on its own persistent connection to the relay.
    fn start_channels(&mut self, relay: SocketAddr) -> anyhow::Result<()> {
        let ctx = Arc::new(channel::Ctx {
            relay,
            stop: Arc::clone(&self.threads.stop),
            start: self.start,
        });
        for i in 0..self.cfg.channels {
            let ctx = Arc::clone(&ctx);
            let seed = self.cfg.seed;
            let h = thread::Builder::new()
                .name(format!("chan-{i}"))
                .spawn(move || channel::run(seed, i, &ctx))
                .context("cannot start a channel thread")?;
            self.threads.channels.push(h);
        }
        Ok(())
    }

    /// `resolve` and `reprocess`, each run again and again as a cron would, alongside the
    /// traffic.
    fn start_tool_loops(&mut self) -> anyhow::Result<()> {
        let resolve = self.tool_args(&[
            "--min-age",
            &self.cfg.resolve_min_age.to_string(),
            "--stale-sent",
            &STALE_SENT_SECS.to_string(),
            "--connect-timeout-ms",
            &RELAY_CONNECT_MS.to_string(),
            "--read-timeout-ms",
            "1000",
        ]);
        let reprocess = self.tool_args(&[
            "--max-attempts",
            "1000",
            "--limit",
            "200",
            "--connect-timeout-ms",
            &RELAY_CONNECT_MS.to_string(),
            "--read-timeout-ms",
            &RELAY_READ_MS.to_string(),
        ]);
        let loops = [
            (self.bins.resolve.clone(), "resolve", resolve),
            (self.bins.reprocess.clone(), "reprocess", reprocess),
        ];
        for (exe, name, args) in loops {
            let l = Loop {
                exe,
                name,
                args,
                dir: self.work.tools_dir.clone(),
                log: self.work.log(name),
                pause: TOOL_PAUSE,
            };
            let (stop, abort) = (
                Arc::clone(&self.threads.stop),
                Arc::clone(&self.threads.abort),
            );
            let start = self.start;
            let h = thread::Builder::new()
                .name(name.into())
                .spawn(move || l.run(&stop, &abort, start))
                .context("cannot start a tool thread")?;
            self.threads.tools.push((name, h));
        }
        Ok(())
    }
}

/// The run's first lines: the seed (to replay it), the plan's digest, the kill schedule and
/// the work directory.
fn announce(cfg: &Config, events: &[Event], dir: &Path) {
    let count = |w: Disruption| events.iter().filter(|e| e.what == w).count();
    println!(
        "chaos: seed {} (replay: --seed {}), {} s, {} channels, bins in {}",
        cfg.seed,
        cfg.seed,
        cfg.secs,
        cfg.channels,
        cfg.bin_dir.display()
    );
    println!(
        "chaos: plan digest {:016x}; schedule: {} relay kills, {} core outages",
        plan::plan_digest(cfg.seed, cfg.channels, 200, events),
        count(Disruption::KillRelay),
        count(Disruption::KillCore)
    );
    println!("chaos: schedule: {}", disrupt::describe(events));
    println!("chaos: work dir {}", dir.display());
}
