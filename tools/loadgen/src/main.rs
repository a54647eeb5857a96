//! `loadgen`: a closed-loop load generator for the relay.
//!
//! `--connections C` threads each hold one persistent channel connection and send one
//! request, wait for its reply, send the next. Each request is a new transfer (a GUID never
//! used before) or, with probability `--resend-ratio`, a byte-identical resend of a GUID this
//! connection already got a reply for. Every reply is validated (4-digit prefix, a reply
//! message the codec accepts, the request's GUID, a 45-byte body with `0000`), and a resend
//! of a GUID that was answered `0000` must get that reply again byte for byte. The result
//! is ONE JSON line on stdout.
//!
//! `--replay-only` books a pool of GUIDs first, then every measured request is a resend of
//! one of them. `--direct` sends the same transfers as JSON POSTs straight to the core
//! (keep-alive HTTP/1.1, one connection per loadgen connection): the ceiling without a
//! relay. `--idle N` opens N idle channel connections and reports the relay's memory with
//! them and how promptly a new connection is still answered.

mod http;
mod latency;
mod rng;

use std::collections::BTreeMap;
use std::io::{self, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier, OnceLock};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use clap::Parser;
use ledger::wire::{self, Transfer};
use serde_json::{Value, json};

use crate::http::{Endpoint, HttpConn};
use crate::latency::Latencies;
use crate::rng::Rng;

/// Longest `--guid-prefix`: room is left for `-<connection>-<counter>` in 36 characters.
const MAX_PREFIX: usize = 22;
/// GUIDs remembered per connection for resends; beyond this a random one is replaced.
const RESEND_MEMORY: usize = 100_000;
/// Exit code when a reply failed validation or a resend got a different reply.
const EXIT_CHECK_FAILED: u8 = 3;

/// Closed-loop load against the relay (or the core directly); prints one JSON line.
#[derive(Parser, Debug, Clone)]
#[command(
    version,
    about,
    after_help = "Output: one JSON line on stdout. Exit status: 0 done; 3 a reply failed \
                  validation or a resend got other bytes; 1 no valid reply at all, or a \
                  fatal error; 2 a bad flag."
)]
struct Args {
    /// The relay's channel address.
    #[arg(long, default_value = "127.0.0.1:9200")]
    relay: String,
    /// Send the load as JSON POSTs straight to the core (`--core`) instead of the relay.
    /// Resend slots are sent as new GUIDs there: the core is not idempotent.
    #[arg(long)]
    direct: bool,
    /// The core's base URL (for --direct).
    #[arg(long, default_value = "http://127.0.0.1:9201")]
    core: String,
    /// Persistent connections, one thread each, each in a closed loop.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    connections: u32,
    /// Length of the measured window in seconds (default 10 unless --requests is given).
    #[arg(long, conflicts_with = "requests", value_parser = positive_secs)]
    duration_secs: Option<f64>,
    /// Total measured requests over all connections, instead of a duration.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    requests: Option<u64>,
    /// Unmeasured load before the measured window, in seconds.
    #[arg(long, default_value_t = 0.0, value_parser = nonnegative_secs)]
    warmup_secs: f64,
    /// Probability that a request is a byte-identical resend of an answered GUID.
    #[arg(long, default_value_t = 0.1, value_parser = ratio)]
    resend_ratio: f64,
    /// Seed of the generator (accounts, amounts, resend choices; the default GUID prefix).
    #[arg(long)]
    seed: Option<u64>,
    /// GUID prefix, 1-22 of [0-9A-Za-z._-]; GUIDs are PREFIX-<conn>-<n> (hex). Default:
    /// `L` + the seed in hex. Use a new one for every run against the same core.
    #[arg(long, value_parser = guid_prefix)]
    guid_prefix: Option<String>,
    /// Book a pool of GUIDs first (unmeasured), then measure resends of them only.
    #[arg(long, conflicts_with = "direct")]
    replay_only: bool,
    /// Size of the --replay-only pool, spread over the connections.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..))]
    pool: u32,
    /// Read/write timeout for one request; expiry counts as an error (and reconnects).
    #[arg(long, default_value_t = 30_000, value_parser = clap::value_parser!(u64).range(1..))]
    timeout_ms: u64,
    /// Idle mode: open N channel connections to the relay, send nothing on them, hold them
    /// for --hold-secs; report the relay's memory (with --rss-pid) and probe latencies.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=60_000),
          conflicts_with_all = ["direct", "replay_only", "requests", "duration_secs"])]
    idle: Option<u32>,
    /// How long --idle holds its connections.
    #[arg(long, default_value_t = 2.0, requires = "idle", value_parser = positive_secs)]
    hold_secs: f64,
    /// Idle mode: the relay's process id, to read VmRSS/Threads from /proc/PID/status.
    #[arg(long, requires = "idle")]
    rss_pid: Option<u32>,
}

fn positive_secs(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() => Ok(v),
        _ => Err(format!("{s:?} is not a positive number of seconds")),
    }
}

fn nonnegative_secs(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v >= 0.0 && v.is_finite() => Ok(v),
        _ => Err(format!("{s:?} is not a number of seconds >= 0")),
    }
}

fn ratio(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if (0.0..=1.0).contains(&v) => Ok(v),
        _ => Err(format!("{s:?} is not a ratio in 0..=1")),
    }
}

fn guid_prefix(s: &str) -> Result<String, String> {
    let ok = !s.is_empty()
        && s.len() <= MAX_PREFIX
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(s.to_string())
    } else {
        Err(format!(
            "{s:?} must be 1-{MAX_PREFIX} characters of [0-9A-Za-z._-]"
        ))
    }
}

fn main() -> ExitCode {
    match run(Args::parse()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("loadgen: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: Args) -> anyhow::Result<ExitCode> {
    let seed = args.seed.unwrap_or_else(|| {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        (nanos as u64) & 0xffff_ffff_ffff
    });
    let prefix = args
        .guid_prefix
        .clone()
        .unwrap_or_else(|| format!("L{seed:x}"));
    let out = match args.idle {
        Some(n) => idle(&args, n, &prefix)?,
        None => load(&args, seed, &prefix)?,
    };
    println!("{out}");
    let failed = out["resend_mismatches"].as_u64().unwrap_or(0) > 0
        || out["malformed_replies"].as_u64().unwrap_or(0) > 0;
    if failed {
        return Ok(ExitCode::from(EXIT_CHECK_FAILED));
    }
    if out["requests"].as_u64() == Some(0) {
        eprintln!("loadgen: no request got a valid reply");
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

// ---------------------------------------------------------------- the load -------------

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    Relay,
    Direct,
    Replay,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Relay => "relay",
            Mode::Direct => "direct",
            Mode::Replay => "replay-only",
        }
    }
}

/// What every worker shares.
struct Plan {
    mode: Mode,
    relay: String,
    core: Option<Endpoint>,
    timeout: Duration,
    resend_ratio: f64,
    seed: u64,
    prefix: String,
    quota: Option<u64>,
    issued: AtomicU64,
    times: OnceLock<Times>,
}

struct Times {
    measure_start: Instant,
    deadline: Option<Instant>,
}

fn load(args: &Args, seed: u64, prefix: &str) -> anyhow::Result<Value> {
    let mode = if args.direct {
        Mode::Direct
    } else if args.replay_only {
        Mode::Replay
    } else {
        Mode::Relay
    };
    let core = if mode == Mode::Direct {
        Some(Endpoint::parse(&args.core).map_err(anyhow::Error::msg)?)
    } else {
        None
    };
    let plan = Arc::new(Plan {
        mode,
        relay: args.relay.clone(),
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
        "connections": c,
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

fn round1(v: f64) -> f64 {
    (v * 10.0).round() / 10.0
}

fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

/// One connection's counts; merged into the run's.
#[derive(Default)]
struct Tally {
    lat: Latencies,
    codes: BTreeMap<String, u64>,
    /// Measured requests that got a valid reply.
    requests: u64,
    new_requests: u64,
    resends: u64,
    resend_slots: u64,
    // The checks below count in every phase (pool booking and warm-up included).
    mismatches: u64,
    malformed: u64,
    errors: u64,
    timeouts: u64,
    connects: u64,
    pool_finished: u64,
    last_end: Option<Instant>,
}

impl Tally {
    fn merge(&mut self, o: Tally) {
        self.lat.merge(o.lat);
        for (k, v) in o.codes {
            *self.codes.entry(k).or_default() += v;
        }
        self.requests += o.requests;
        self.new_requests += o.new_requests;
        self.resends += o.resends;
        self.resend_slots += o.resend_slots;
        self.mismatches += o.mismatches;
        self.malformed += o.malformed;
        self.errors += o.errors;
        self.timeouts += o.timeouts;
        self.connects += o.connects;
        self.pool_finished += o.pool_finished;
        self.last_end = self.last_end.max(o.last_end);
    }
}

/// A GUID this connection got a reply for: its request bytes and, if it was `0000`, the
/// reply every later resend must get byte for byte.
struct Sent {
    msg: Vec<u8>,
    booked: Option<Vec<u8>>,
}

/// A reply that passed validation.
struct Answer {
    code: String,
    /// The relay's reply message (without prefix); `None` in direct mode.
    bytes: Option<Vec<u8>>,
}

enum Fail {
    Io(io::Error),
    Malformed(String),
}

enum Target {
    Relay(RelayConn),
    Direct(HttpConn),
}

impl Target {
    fn ensure_connected(&mut self) -> io::Result<()> {
        match self {
            Target::Relay(r) => r.ensure_connected(),
            Target::Direct(h) => h.ensure_connected(),
        }
    }

    fn connects(&self) -> u64 {
        match self {
            Target::Relay(r) => r.connects,
            Target::Direct(h) => h.connects,
        }
    }

    fn call(&mut self, t: &Transfer, msg: &[u8]) -> Result<Answer, Fail> {
        match self {
            Target::Relay(r) => {
                let bytes = r.call(msg)?;
                let code = validate_reply(&bytes, &t.guid).map_err(Fail::Malformed)?;
                Ok(Answer {
                    code,
                    bytes: Some(bytes),
                })
            }
            Target::Direct(h) => direct_call(h, t),
        }
    }
}

/// A persistent channel connection to the relay.
struct RelayConn {
    addr: String,
    timeout: Duration,
    stream: Option<BufReader<TcpStream>>,
    connects: u64,
}

impl RelayConn {
    fn new(addr: &str, timeout: Duration) -> RelayConn {
        RelayConn {
            addr: addr.to_string(),
            timeout,
            stream: None,
            connects: 0,
        }
    }

    fn ensure_connected(&mut self) -> io::Result<()> {
        if self.stream.is_none() {
            let s = TcpStream::connect(&self.addr)?;
            s.set_nodelay(true)?;
            s.set_read_timeout(Some(self.timeout))?;
            s.set_write_timeout(Some(self.timeout))?;
            self.connects += 1;
            self.stream = Some(BufReader::new(s));
        }
        Ok(())
    }

    /// Sends one framed request and reads one framed reply. Any failure drops the
    /// connection (its framing can no longer be trusted); the next call reconnects.
    fn call(&mut self, msg: &[u8]) -> Result<Vec<u8>, Fail> {
        let r = self.exchange(msg);
        if r.is_err() {
            self.stream = None;
        }
        r
    }

    fn exchange(&mut self, msg: &[u8]) -> Result<Vec<u8>, Fail> {
        self.ensure_connected().map_err(Fail::Io)?;
        let s = self.stream.as_mut().expect("connected");
        s.get_mut().write_all(&wire::frame(msg)).map_err(Fail::Io)?;
        let mut prefix = [0u8; wire::PREFIX_LEN];
        s.read_exact(&mut prefix).map_err(Fail::Io)?;
        let len = wire::parse_len(&prefix).ok_or_else(|| {
            Fail::Malformed(format!(
                "reply prefix {:?} is not 4 digits",
                String::from_utf8_lossy(&prefix)
            ))
        })?;
        let mut reply = vec![0u8; len];
        s.read_exact(&mut reply).map_err(Fail::Io)?;
        Ok(reply)
    }
}

/// Checks a relay reply to a request for `guid`; returns its code.
fn validate_reply(bytes: &[u8], guid: &str) -> Result<String, String> {
    let r = wire::parse_reply(bytes)?;
    if r.tx_code != wire::TX_TRNF {
        return Err(format!("reply tx_code {:?}", r.tx_code));
    }
    if r.guid != guid {
        return Err(format!(
            "reply for GUID {:?} to a request for {guid:?}",
            r.guid
        ));
    }
    if !r
        .code
        .bytes()
        .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
    {
        return Err(format!("reply code {:?}", r.code));
    }
    if r.code == "0000" && bytes.len() != wire::HEADER_LEN + wire::BOOKING_BODY_LEN {
        return Err(format!("0000 reply of {} bytes", bytes.len()));
    }
    Ok(r.code)
}

/// The same transfer as a JSON POST to the core (contract §3); the answer is classified the
/// way the relay would: 200 with a representable booking for this GUID is `0000`, a 4xx
/// with a 4-character code is that code, any other status is `http_NNN`.
fn direct_call(h: &mut HttpConn, t: &Transfer) -> Result<Answer, Fail> {
    let body = json!({
        "guid": t.guid, "tx_code": wire::TX_TRNF, "from_account": t.from_account,
        "to_account": t.to_account, "amount": t.amount, "memo": t.memo,
    })
    .to_string();
    let resp = h
        .request("POST", "/v1/transfers", body.as_bytes())
        .map_err(Fail::Io)?;
    let json: Option<Value> = serde_json::from_slice(&resp.body).ok();
    let code = match resp.status {
        200 => {
            let j = json.ok_or_else(|| Fail::Malformed("200 with a non-JSON body".into()))?;
            if j["guid"].as_str() != Some(t.guid.as_str()) {
                return Err(Fail::Malformed(format!("200 for another GUID: {j}")));
            }
            wire::booking_body(
                j["core_ref"].as_str().unwrap_or_default(),
                j["amount"].as_u64().unwrap_or(u64::MAX),
                j["booked_at"].as_str().unwrap_or_default(),
            )
            .map_err(|e| Fail::Malformed(format!("booking not representable: {e}")))?;
            "0000".to_string()
        }
        400..=499 => {
            let code = json
                .as_ref()
                .and_then(|j| j["code"].as_str())
                .filter(|c| c.len() == 4)
                .map(str::to_string);
            code.unwrap_or_else(|| format!("http_{}", resp.status))
        }
        s => format!("http_{s}"),
    };
    Ok(Answer { code, bytes: None })
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

struct Worker {
    id: u32,
    plan: Arc<Plan>,
    rng: Rng,
    counter: u64,
    target: Target,
    done: Vec<Sent>,
    t: Tally,
}

impl Worker {
    fn new(id: u32, plan: Arc<Plan>) -> Worker {
        let target = match &plan.core {
            Some(ep) => Target::Direct(HttpConn::new(ep.clone(), plan.timeout)),
            None => Target::Relay(RelayConn::new(&plan.relay, plan.timeout)),
        };
        let rng = Rng::new(plan.seed ^ u64::from(id + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        Worker {
            id,
            plan,
            rng,
            counter: 0,
            target,
            done: Vec::new(),
            t: Tally::default(),
        }
    }

    fn new_transfer(&mut self) -> Transfer {
        self.counter += 1;
        let digits = |r: &mut Rng| format!("{:014}", r.below(100_000_000_000_000));
        Transfer {
            guid: format!("{}-{:x}-{:x}", self.plan.prefix, self.id, self.counter),
            from_account: digits(&mut self.rng),
            to_account: digits(&mut self.rng),
            amount: 1 + self.rng.below(9_999_999),
            memo: format!("loadgen {}", self.id),
        }
    }

    fn remember(&mut self, sent: Sent) {
        if self.done.len() < RESEND_MEMORY {
            self.done.push(sent);
        } else {
            let i = self.rng.below(self.done.len() as u64) as usize;
            self.done[i] = sent;
        }
    }

    fn run(mut self, pool_share: u32, ready: &Barrier, go: &Barrier) -> Tally {
        // A connection that cannot be made now shows up as errors in the first requests.
        let _ = self.target.ensure_connected();
        if self.plan.mode == Mode::Replay {
            for _ in 0..pool_share {
                let t = self.new_transfer();
                if let Some((code, _)) = self.exchange(&t, None, false)
                    && !code.starts_with('E')
                {
                    self.t.pool_finished += 1;
                }
            }
        }
        ready.wait();
        go.wait();
        let (measure_start, deadline) = {
            let times = self.plan.times.get().expect("set before go");
            (times.measure_start, times.deadline)
        };
        loop {
            let now = Instant::now();
            let measuring = now >= measure_start;
            if measuring {
                if deadline.is_some_and(|d| now >= d) {
                    break;
                }
                if let Some(q) = self.plan.quota
                    && self.plan.issued.fetch_add(1, Ordering::Relaxed) >= q
                {
                    break;
                }
            }
            let resend = match self.plan.mode {
                Mode::Replay if self.done.is_empty() => {
                    // Nothing finished to resend: the pool booking failed (counted).
                    break;
                }
                Mode::Replay => Some(self.rng.below(self.done.len() as u64) as usize),
                Mode::Relay if !self.done.is_empty() && self.rng.chance(self.plan.resend_ratio) => {
                    Some(self.rng.below(self.done.len() as u64) as usize)
                }
                Mode::Direct if measuring && self.rng.chance(self.plan.resend_ratio) => {
                    self.t.resend_slots += 1;
                    None
                }
                _ => None,
            };
            match resend {
                Some(i) => {
                    let msg = std::mem::take(&mut self.done[i].msg);
                    let t = wire::parse_request(&msg).expect("our own request");
                    self.exchange(&t, Some((i, msg)), measuring);
                }
                None => {
                    let t = self.new_transfer();
                    self.exchange(&t, None, measuring);
                }
            }
        }
        self.t.connects = self.target.connects();
        self.t
    }

    /// One request, timed and checked. `resend` is the remembered GUID's slot and request
    /// bytes. Returns the code and reply bytes when the reply was valid.
    fn exchange(
        &mut self,
        t: &Transfer,
        resend: Option<(usize, Vec<u8>)>,
        measuring: bool,
    ) -> Option<(String, Option<Vec<u8>>)> {
        let msg = match &resend {
            Some((_, m)) => m.clone(),
            None => wire::encode_request(t).expect("generated transfers are valid"),
        };
        let started = Instant::now();
        let result = self.target.call(t, &msg);
        let ended = Instant::now();
        let answer = match result {
            Ok(a) => a,
            Err(f) => {
                match f {
                    Fail::Io(e) => {
                        self.t.errors += 1;
                        if is_timeout(&e) {
                            self.t.timeouts += 1;
                        }
                        if self.t.errors <= 3 {
                            eprintln!("loadgen: connection {}: {} : {e}", self.id, t.guid);
                        }
                        // Do not spin on a relay that refuses connections.
                        thread::sleep(Duration::from_millis(10));
                    }
                    Fail::Malformed(why) => {
                        self.t.malformed += 1;
                        eprintln!("loadgen: connection {}: malformed reply: {why}", self.id);
                    }
                }
                if let Some((i, m)) = resend {
                    self.done[i].msg = m;
                }
                return None;
            }
        };
        if measuring {
            self.t.lat.record(ended - started);
            self.t.requests += 1;
            *self.t.codes.entry(answer.code.clone()).or_default() += 1;
            self.t.last_end = Some(ended);
            if resend.is_some() {
                self.t.resends += 1;
            } else {
                self.t.new_requests += 1;
            }
        }
        match resend {
            Some((i, m)) => {
                let slot = &mut self.done[i];
                slot.msg = m;
                match (&slot.booked, &answer.bytes) {
                    (Some(want), Some(got)) if want != got => {
                        self.t.mismatches += 1;
                        eprintln!(
                            "loadgen: resend of {} got {:?}, first reply was {:?}",
                            t.guid,
                            String::from_utf8_lossy(got),
                            String::from_utf8_lossy(want)
                        );
                    }
                    (None, Some(got)) if answer.code == "0000" => slot.booked = Some(got.clone()),
                    _ => {}
                }
            }
            None if self.plan.mode != Mode::Direct => {
                let finished = !answer.code.starts_with('E');
                if self.plan.mode == Mode::Relay || finished {
                    let booked = (answer.code == "0000")
                        .then(|| answer.bytes.clone())
                        .flatten();
                    self.remember(Sent { msg, booked });
                }
            }
            None => {}
        }
        Some((answer.code, answer.bytes))
    }
}

// ---------------------------------------------------------------- idle mode ------------

/// `VmRSS` (kB) and `Threads` of a process, from /proc/PID/status.
fn proc_status(pid: u32) -> anyhow::Result<(u64, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("cannot read /proc/{pid}/status"))?;
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok())
    };
    match (field("VmRSS:"), field("Threads:")) {
        (Some(rss), Some(threads)) => Ok((rss, threads)),
        _ => bail!("no VmRSS/Threads in /proc/{pid}/status"),
    }
}

fn idle(args: &Args, n: u32, prefix: &str) -> anyhow::Result<Value> {
    let timeout = Duration::from_millis(args.timeout_ms);
    let mut probes = 0u32;
    let mut malformed = 0u64;
    // One transfer on a new connection: (code, milliseconds).
    let mut probe = |conn: &mut RelayConn| -> anyhow::Result<(String, f64)> {
        probes += 1;
        let t = Transfer {
            guid: format!("{prefix}-probe-{probes}"),
            from_account: "00000000000001".into(),
            to_account: "00000000000002".into(),
            amount: 100,
            memo: "loadgen idle probe".into(),
        };
        let msg = wire::encode_request(&t).expect("valid");
        let started = Instant::now();
        let bytes = match conn.call(&msg) {
            Ok(b) => b,
            Err(Fail::Io(e)) => bail!("probe {}: {e}", t.guid),
            Err(Fail::Malformed(why)) => {
                malformed += 1;
                bail!("probe {}: malformed reply: {why}", t.guid)
            }
        };
        let ms = started.elapsed().as_secs_f64() * 1000.0;
        let code = validate_reply(&bytes, &t.guid).inspect_err(|_| malformed += 1);
        Ok((code.map_err(anyhow::Error::msg)?, round3(ms)))
    };
    let status = |when: &str| -> anyhow::Result<Option<(u64, u64)>> {
        args.rss_pid
            .map(proc_status)
            .transpose()
            .with_context(|| format!("relay status {when}"))
    };

    // Warm the relay (ledger, core client) so that "before" is a relay that has served.
    let (warm_code, warm_ms) = probe(&mut RelayConn::new(&args.relay, timeout))?;
    thread::sleep(Duration::from_millis(200));
    let before = status("before")?;

    let opened_at = Instant::now();
    let mut conns = Vec::with_capacity(n as usize);
    let mut connect_errors = 0u64;
    let mut connect_lat = Latencies::default();
    for _ in 0..n {
        let started = Instant::now();
        match TcpStream::connect(&args.relay) {
            Ok(s) => {
                connect_lat.record(started.elapsed());
                conns.push(s);
            }
            Err(e) => {
                connect_errors += 1;
                if connect_errors <= 3 {
                    eprintln!("loadgen: idle connection: {e}");
                }
            }
        }
    }
    let open_secs = opened_at.elapsed().as_secs_f64();
    let hold = Duration::from_secs_f64(args.hold_secs);
    let settle = hold.min(Duration::from_millis(500));
    thread::sleep(settle);
    let with = status("with the idle connections")?;
    let (fresh_code, fresh_ms) = probe(&mut RelayConn::new(&args.relay, timeout))?;
    thread::sleep(hold.saturating_sub(settle));

    // Still open? A relay that closed a connection shows EOF (or a reset) at once.
    let mut still_open = 0u64;
    for s in &conns {
        s.set_nonblocking(true)?;
        let mut b = [0u8; 1];
        match (&*s).read(&mut b) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => still_open += 1,
            _ => {}
        }
        s.set_nonblocking(false)?;
    }
    // And one of the idle connections still serves a request.
    let idle_probe = match conns.pop() {
        Some(s) => {
            s.set_read_timeout(Some(timeout))?;
            let mut c = RelayConn::new(&args.relay, timeout);
            c.stream = Some(BufReader::new(s));
            Some(probe(&mut c)?)
        }
        None => None,
    };
    drop(conns);

    let rss = |s: Option<(u64, u64)>| s.map(|(r, _)| r);
    let threads = |s: Option<(u64, u64)>| s.map(|(_, t)| t);
    let per_conn_kb = match (rss(before), rss(with)) {
        (Some(b), Some(w)) if still_open > 0 => {
            Some(round1((w as f64 - b as f64) / still_open as f64))
        }
        _ => None,
    };
    Ok(json!({
        "mode": "idle",
        "target": args.relay,
        "idle_connections": n,
        "connect_errors": connect_errors,
        "open_s": round3(open_secs),
        "connect_ms": connect_lat.summary(),
        "still_open": still_open,
        "hold_s": args.hold_secs,
        "relay_pid": args.rss_pid,
        "rss_kb_before": rss(before),
        "rss_kb_with": rss(with),
        "rss_kb_per_connection": per_conn_kb,
        "threads_before": threads(before),
        "threads_with": threads(with),
        "warm_probe": {"code": warm_code, "ms": warm_ms},
        "new_connection_probe": {"code": fresh_code, "ms": fresh_ms},
        "idle_connection_probe": idle_probe.map(|(c, ms)| json!({"code": c, "ms": ms})),
        "requests": probes,
        "resend_mismatches": 0,
        "malformed_replies": malformed,
        "errors": connect_errors,
    }))
}
