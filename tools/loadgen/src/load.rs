//! The load: `--connections` workers, released together once every one is connected (and
//! has booked its share of the `--replay-only` pool), each in a closed loop until the
//! deadline or the `--requests` quota; then their counts are added up into the result line.

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Barrier, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};
use testkit::tls_client::Dialer;

use crate::Args;
use crate::latency::{round1, round3};
use crate::worker::{Tally, Worker};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Mode {
    Relay,
    Direct,
    Replay,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Relay => "relay",
            Mode::Direct => "direct",
            Mode::Replay => "replay-only",
        }
    }
}

/// What every worker shares.
pub struct Plan {
    pub mode: Mode,
    /// `--http`: through the relay's HTTP channel API instead of frames.
    pub http: bool,
    pub relay: String,
    /// With `--tls-ca`: the relay's address, resolved once, and the client configuration
    /// every connection shares.
    pub tls: Option<(SocketAddr, Dialer)>,
    /// The core's base URL, for `--direct`.
    pub core: Option<String>,
    pub timeout: Duration,
    pub resend_ratio: f64,
    pub seed: u64,
    pub prefix: String,
    /// `--requests`: measured requests over all workers.
    pub quota: Option<u64>,
    /// Measured requests started so far (against the quota).
    pub issued: AtomicU64,
    /// Set once every worker is connected, before they are released.
    pub times: OnceLock<Times>,
}

pub struct Times {
    pub measure_start: Instant,
    pub deadline: Option<Instant>,
}

/// Runs the load (relay, replay-only or direct) and returns the result line.
pub fn load(args: &Args, seed: u64, prefix: &str) -> anyhow::Result<Value> {
    let mode = if args.direct {
        Mode::Direct
    } else if args.replay_only {
        Mode::Replay
    } else {
        Mode::Relay
    };
    let core = if mode == Mode::Direct {
        if !args.core.starts_with("http://") {
            bail!("core URL {:?} must start with http://", args.core);
        }
        Some(args.core.clone())
    } else {
        None
    };
    let tls = match args.tls.client(&args.relay) {
        None => None,
        Some(t) => {
            let dialer = Dialer::new(Some(&t)).map_err(anyhow::Error::msg)?;
            Some((resolve(&args.relay)?, dialer))
        }
    };
    let plan = Arc::new(Plan {
        mode,
        http: args.http,
        relay: args.relay.clone(),
        tls,
        core,
        timeout: Duration::from_millis(args.timeout_ms),
        resend_ratio: args.resend_ratio,
        seed,
        prefix: prefix.to_string(),
        quota: args.requests,
        issued: AtomicU64::new(0),
        times: OnceLock::new(),
    });
    let c = args.connections;
    // Two rendezvous: every worker has connected (and booked its pool share); then the
    // main thread fixes the clock and releases them together.
    let ready = Arc::new(Barrier::new(c as usize + 1));
    let go = Arc::new(Barrier::new(c as usize + 1));
    let mut handles = Vec::new();
    for id in 0..c {
        let share = args.pool / c + u32::from(id < args.pool % c);
        let (plan, ready, go) = (Arc::clone(&plan), Arc::clone(&ready), Arc::clone(&go));
        let h = thread::Builder::new()
            .name(format!("conn{id}"))
            .spawn(move || Worker::new(id, plan).run(share, &ready, &go))
            .context("cannot start a connection thread")?;
        handles.push(h);
    }
    ready.wait();
    let measure_start = Instant::now() + Duration::from_secs_f64(args.warmup_secs);
    let deadline = match (args.requests, args.duration_secs) {
        (Some(_), _) => None,
        (None, d) => Some(measure_start + Duration::from_secs_f64(d.unwrap_or(10.0))),
    };
    let _ = plan.times.set(Times {
        measure_start,
        deadline,
    });
    go.wait();

    let mut total = Tally::default();
    for h in handles {
        let t = h
            .join()
            .map_err(|_| anyhow::anyhow!("a connection thread panicked"))?;
        total.merge(t);
    }
    let duration = total.last_end.map_or(0.0, |e| {
        e.saturating_duration_since(measure_start).as_secs_f64()
    });
    let throughput = if duration > 0.0 {
        total.requests as f64 / duration
    } else {
        0.0
    };
    let mut out = json!({
        "mode": mode.name(),
        "target": if mode == Mode::Direct { args.core.clone() } else { args.relay.clone() },
        "door": if args.http { "http" } else if mode == Mode::Direct { "-" } else { "tcp" },
        "connections": c,
        "tls": plan.tls.is_some(),
        "tls_client_cert": args.tls.tls_cert.is_some(),
        "requests": total.requests,
        "new_requests": total.new_requests,
        "resends": total.resends,
        "duration_s": round3(duration),
        "throughput_rps": round1(throughput),
        "latency_ms": total.lat.summary(),
        "replies_by_code": total.codes,
        "resend_mismatches": total.mismatches,
        "malformed_replies": total.malformed,
        "errors": total.errors,
        "timeouts": total.timeouts,
        "connects": total.connects,
        "warmup_s": args.warmup_secs,
        "resend_ratio": args.resend_ratio,
        "seed": seed,
        "guid_prefix": prefix,
    });
    if mode == Mode::Direct {
        out["resend_slots_sent_as_new"] = json!(total.resend_slots);
        out["note"] = json!(
            "direct: the core is not idempotent, so resend slots are POSTs of new GUIDs \
             (counted in new_requests); resends is 0"
        );
    }
    if mode == Mode::Replay {
        out["pool"] = json!({"size": args.pool, "finished": total.pool_finished});
    }
    Ok(out)
}

/// The first address of `relay` (`host:port`).
fn resolve(relay: &str) -> anyhow::Result<SocketAddr> {
    relay
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve {relay}"))?
        .next()
        .with_context(|| format!("no address for {relay}"))
}
