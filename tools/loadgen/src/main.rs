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
//! them and how promptly a new connection is still answered. With `--tls-ca` (and
//! `--tls-cert`/`--tls-key` for mutual TLS) the channel connections speak TLS.

mod conn;
mod http;
mod idle;
mod latency;
mod load;
mod rng;
mod worker;

use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use clap::Parser;

testkit::tls_client_flags! { env = "LOADGEN_"; }

/// Longest `--guid-prefix`: room is left for `-<connection>-<counter>` in 36 characters.
const MAX_PREFIX: usize = 22;
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
pub struct Args {
    /// The relay's channel address.
    #[arg(long, default_value = "127.0.0.1:9200")]
    pub relay: String,
    /// Send the load as JSON POSTs straight to the core (`--core`) instead of the relay.
    /// Resend slots are sent as new GUIDs there: the core is not idempotent.
    #[arg(long, conflicts_with = "tls_ca")]
    pub direct: bool,
    /// Send the load through the relay's HTTP channel API: `--relay` is then its
    /// `--http-listen` address; one kept-alive connection per loadgen connection, the GUID
    /// as the Idempotency-Key, and a resend's 200 must carry the first body again.
    #[arg(long, conflicts_with_all = ["direct", "tls_ca", "idle"])]
    pub http: bool,
    /// The core's base URL (for --direct).
    #[arg(long, default_value = "http://127.0.0.1:9201")]
    pub core: String,
    /// Persistent connections, one thread each, each in a closed loop.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub connections: u32,
    /// Length of the measured window in seconds (default 10 unless --requests is given).
    #[arg(long, conflicts_with = "requests", value_parser = positive_secs)]
    pub duration_secs: Option<f64>,
    /// Total measured requests over all connections, instead of a duration.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub requests: Option<u64>,
    /// Unmeasured load before the measured window, in seconds.
    #[arg(long, default_value_t = 0.0, value_parser = nonnegative_secs)]
    pub warmup_secs: f64,
    /// Probability that a request is a byte-identical resend of an answered GUID.
    #[arg(long, default_value_t = 0.1, value_parser = ratio)]
    pub resend_ratio: f64,
    /// Seed of the generator (accounts, amounts, resend choices; the default GUID prefix).
    #[arg(long)]
    pub seed: Option<u64>,
    /// GUID prefix, 1-22 of [0-9A-Za-z._-]; GUIDs are PREFIX-<conn>-<n> (hex). Default:
    /// `L` + the seed in hex. Use a new one for every run against the same core.
    #[arg(long, value_parser = guid_prefix)]
    pub guid_prefix: Option<String>,
    /// Book a pool of GUIDs first (unmeasured), then measure resends of them only.
    #[arg(long, conflicts_with = "direct")]
    pub replay_only: bool,
    /// Size of the --replay-only pool, spread over the connections.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..))]
    pub pool: u32,
    /// Read/write timeout for one request; expiry counts as an error (and reconnects).
    #[arg(long, default_value_t = 30_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout_ms: u64,
    /// Idle mode: open N channel connections to the relay, send nothing on them, hold them
    /// for --hold-secs; report the relay's memory (with --rss-pid) and probe latencies.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=60_000),
          conflicts_with_all = ["direct", "replay_only", "requests", "duration_secs", "tls_ca"])]
    pub idle: Option<u32>,
    /// How long --idle holds its connections.
    #[arg(long, default_value_t = 2.0, requires = "idle", value_parser = positive_secs)]
    pub hold_secs: f64,
    /// Idle mode: the relay's process id, to read VmRSS/Threads from /proc/PID/status.
    #[arg(long, requires = "idle")]
    pub rss_pid: Option<u32>,
    /// TLS to the relay (not with --direct or --idle): the configuration is built once and
    /// shared by every connection; each connection's handshake happens before the
    /// measured window, as its TCP connect does.
    #[command(flatten)]
    pub tls: TlsFlags,
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
    let args = Args::parse();
    cli::main("loadgen", || run(&args))
}

/// Runs the load (or idle mode), prints the result line; the exit code.
fn run(args: &Args) -> anyhow::Result<u8> {
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
        Some(n) => idle::idle(args, n, &prefix)?,
        None => load::load(args, seed, &prefix)?,
    };
    println!("{out}");
    let failed = out["resend_mismatches"].as_u64().unwrap_or(0) > 0
        || out["malformed_replies"].as_u64().unwrap_or(0) > 0;
    if failed {
        return Ok(EXIT_CHECK_FAILED);
    }
    if out["requests"].as_u64() == Some(0) {
        eprintln!("loadgen: no request got a valid reply");
        return Ok(cli::EXIT_FATAL);
    }
    Ok(0)
}
