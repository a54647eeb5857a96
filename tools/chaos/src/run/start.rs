//! Phase 1: announce the plan, start the ledger's server (PostgreSQL only), the core and the
//! relays, then the channel threads and the `resolve` and `reprocess` loops.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::Context;
use testkit::tls_client::Dialer;

use super::{
    Backend, Bins, Config, LATE_REPLY_MS, LedgerDb, MAX_LATE_REPLIES, RELAY_CONNECT_MS,
    RELAY_READ_MS, Run, SLOW_MS, STALE_SENT_SECS, Threads, Work, disrupt, path_arg, relay_name,
    tls, tool_tag,
};
use crate::channel;
use crate::plan::{self, Disruption, Event};
use crate::procs::Service;
use crate::tools::{Bench, Loop, Outages, Tool};

/// How long the batch tools rest between two runs of their loop.
const TOOL_PAUSE: Duration = Duration::from_millis(300);

impl<'a> Run<'a> {
    pub(super) fn start(cfg: &'a Config, interrupted: &'a AtomicBool) -> anyhow::Result<Run<'a>> {
        let bins = Bins::find(&cfg.bin_dir)?;
        // Before anything else: without PostgreSQL there is no run to make.
        let pg = match (&cfg.external_db, cfg.backend) {
            (Some(url), _) => Some(LedgerDb::Postgres {
                server: None,
                url: url.clone(),
            }),
            (None, Backend::Sqlite) => None,
            (None, Backend::Postgres) => Some(LedgerDb::postgres()?),
        };
        let work = Work::new(cfg.work_dir.as_deref())?;
        let ledger = pg.unwrap_or_else(|| LedgerDb::Sqlite(work.db.clone()));
        let events = plan::schedule(cfg.seed, cfg.secs, cfg.targets());
        announce(cfg, &events, &work.dir, &ledger);
        let (tls_args, dialers) = if cfg.tls {
            let (args, dialers) = tls::setup(&work.dir.join("certs"))?;
            println!(
                "chaos: channels over mutual TLS as {} (even channels) and {} (odd)",
                tls::IDENTITIES[0],
                tls::IDENTITIES[1]
            );
            (args, dialers)
        } else {
            (Vec::new(), vec![Dialer::Plain])
        };

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
        let mut relays = Vec::new();
        // The HTTP door keeps the port it is given at every restart, as the TCP one does.
        let http_addrs = if cfg.http {
            (0..cfg.relays)
                .map(|_| free_port())
                .collect::<anyhow::Result<Vec<SocketAddr>>>()?
        } else {
            Vec::new()
        };
        for i in 0..cfg.relays {
            let http_args = http_addrs
                .get(i)
                .map(|a| vec!["--http-listen".to_string(), a.to_string()])
                .unwrap_or_default();
            let mut relay = Service::new(
                &relay_name(i, cfg.relays),
                bins.relay.clone(),
                [
                    "--db".into(),
                    ledger.arg(),
                    "--core".into(),
                    format!("http://{}", core.addr()),
                    "--connect-timeout-ms".into(),
                    RELAY_CONNECT_MS.to_string(),
                    "--read-timeout-ms".into(),
                    RELAY_READ_MS.to_string(),
                    "--late-reply-ms".into(),
                    LATE_REPLY_MS.to_string(),
                    "--max-late-replies".into(),
                    MAX_LATE_REPLIES.to_string(),
                ]
                .into_iter()
                .chain(tls_args.iter().cloned())
                .chain(http_args)
                .collect(),
                &work.dir,
            );
            relay.start(start.elapsed())?;
            relays.push(relay);
        }
        let addrs: Vec<&str> = relays.iter().map(Service::addr).collect();
        println!(
            "chaos: core {} (slow {SLOW_MS} ms, journal), {} {} (connect {RELAY_CONNECT_MS} ms, read {RELAY_READ_MS} ms, late replies {LATE_REPLY_MS} ms)",
            core.addr(),
            if relays.len() == 1 { "relay" } else { "relays" },
            addrs.join(", ")
        );
        if cfg.http {
            let each: Vec<String> = http_addrs.iter().map(|a| a.to_string()).collect();
            println!(
                "chaos: HTTP doors {} (every third channel sends 3 in 4 requests through them, the others 1 in 4)",
                each.join(", ")
            );
        }
        let relay_addrs = addrs
            .iter()
            .map(|a| a.parse().context("relay address"))
            .collect::<anyhow::Result<Vec<SocketAddr>>>()?;

        let mut run = Run {
            cfg,
            interrupted,
            threads: Threads {
                stop: Arc::new(AtomicBool::new(false)),
                abort: Arc::new(AtomicBool::new(false)),
                channels: Vec::new(),
                tools: Vec::new(),
            },
            pending: vec![false; relays.len()],
            unstarted: vec![None; relays.len()],
            relays,
            core,
            ledger,
            bins,
            events,
            outages: Outages::default(),
            deferred_starts: 0,
            db_restarts: 0,
            start,
            crashes: Vec::new(),
            work,
        };
        if let Some(url) = &cfg.external_db {
            let stop = Arc::clone(&run.threads.stop);
            super::writable::watch(url, run.outages.clone(), run.start, stop)?;
        }
        run.start_channels(relay_addrs, dialers, http_addrs)?;
        run.start_tool_loops()?;
        Ok(run)
    }

    /// One thread per channel, each with its own persistent connections to the relays.
    fn start_channels(
        &mut self,
        relays: Vec<SocketAddr>,
        dialers: Vec<Dialer>,
        http: Vec<SocketAddr>,
    ) -> anyhow::Result<()> {
        let ctx = Arc::new(channel::Ctx {
            relays,
            dialers,
            http,
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
    /// traffic (on PostgreSQL, several loops of each, as several hosts' crons would).
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
        let bench = self.bench();
        let mut loops = Vec::new();
        for i in 0..self.cfg.tool_loops() {
            loops.push((self.bins.resolve.clone(), "resolve", i, resolve.clone()));
            loops.push((
                self.bins.reprocess.clone(),
                "reprocess",
                i,
                reprocess.clone(),
            ));
        }
        for (exe, name, i, args) in loops {
            let tag = tool_tag(name, i);
            let l = Loop {
                tool: Tool {
                    exe,
                    name,
                    log: self.work.log(&tag),
                    tag: tag.clone(),
                    args,
                },
                bench: bench.clone(),
                pause: TOOL_PAUSE,
            };
            let (stop, abort) = (
                Arc::clone(&self.threads.stop),
                Arc::clone(&self.threads.abort),
            );
            let h = thread::Builder::new()
                .name(tag)
                .spawn(move || l.run(&stop, &abort))
                .context("cannot start a tool thread")?;
            self.threads.tools.push((name, h));
        }
        Ok(())
    }

    /// Where the batch tools run.
    pub(super) fn bench(&self) -> Bench {
        Bench {
            dir: self.work.tools_dir.clone(),
            start: self.start,
            outages: self.outages.clone(),
        }
    }
}

/// The run's first lines: the seed (to replay it), the plan's digest, the kill schedule and
/// the work directory; with PostgreSQL or several relays, also the ledger.
fn announce(cfg: &Config, events: &[Event], dir: &Path, ledger: &LedgerDb) {
    let count = |w: fn(&Disruption) -> bool| events.iter().filter(|e| w(&e.what)).count();
    println!(
        "chaos: seed {} (replay: --seed {}), {} s, {} channels, bins in {}",
        cfg.seed,
        cfg.seed,
        cfg.secs,
        cfg.channels,
        cfg.bin_dir.display()
    );
    let relay_kills = count(|d| matches!(d, Disruption::KillRelay(_)));
    let core_outages = count(|d| *d == Disruption::KillCore);
    let digest = plan::plan_digest(cfg.seed, cfg.channels, cfg.relays, 200, events);
    if cfg.classic() {
        println!(
            "chaos: plan digest {digest:016x}; schedule: {relay_kills} relay kills, {core_outages} core outages"
        );
    } else {
        println!(
            "chaos: plan digest {digest:016x}; schedule: {relay_kills} relay kills ({} relays), {core_outages} core outages, {} database restarts",
            cfg.relays,
            count(|d| *d == Disruption::StopDb)
        );
    }
    println!(
        "chaos: schedule: {}",
        disrupt::describe(events, cfg.relays, cfg.backend == Backend::Postgres)
    );
    if !cfg.classic() {
        let what = match ledger {
            LedgerDb::Sqlite(_) => "an SQLite file in the work dir".to_string(),
            LedgerDb::Postgres { url, server } => format!(
                "{} ({}; {} loops each of resolve and reprocess)",
                ledger::postgres::url::mask(url),
                if server.is_some() {
                    "a PostgreSQL cluster of the run's own"
                } else {
                    "a PostgreSQL ledger the run does not own"
                },
                cfg.tool_loops()
            ),
        };
        println!("chaos: ledger {what}");
    }
    println!("chaos: work dir {}", dir.display());
}

/// A port nobody listens on now (the kernel's pick for port 0, released at once).
fn free_port() -> anyhow::Result<SocketAddr> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").context("cannot pick a port")?;
    Ok(l.local_addr()?)
}
