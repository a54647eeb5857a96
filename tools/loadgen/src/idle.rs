//! Idle mode (`--idle N`): N channel connections opened and held without a byte sent. It
//! reports the relay's memory and threads before and with them (`--rss-pid`), how fast they
//! opened, whether they are still open after `--hold-secs`, and how promptly a transfer is
//! answered on a new connection meanwhile and on one of the idle ones afterwards.

use std::io::{self, Read};
use std::net::TcpStream;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};
use testkit::Chan;
use wire::{self, Transfer};

use crate::Args;
use crate::conn::{Fail, RelayConn, validate_reply};
use crate::latency::{Latencies, round1, round3};

/// Runs idle mode with `n` connections; the result line.
pub fn idle(args: &Args, n: u32, prefix: &str) -> anyhow::Result<Value> {
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
            Err(Fail::Broken { what, .. }) => bail!("probe {}: {what}", t.guid),
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
    let (warm_code, warm_ms) = probe(&mut RelayConn::new(&args.relay, timeout, None))?;
    thread::sleep(Duration::from_millis(200));
    let before = status("before")?;

    let opened = open_idle(&args.relay, n);
    let hold = Duration::from_secs_f64(args.hold_secs);
    let settle = hold.min(Duration::from_millis(500));
    thread::sleep(settle);
    let with = status("with the idle connections")?;
    let (fresh_code, fresh_ms) = probe(&mut RelayConn::new(&args.relay, timeout, None))?;
    thread::sleep(hold.saturating_sub(settle));

    let still_open = count_open(&opened.conns)?;
    // And one of the idle connections still serves a request.
    let mut conns = opened.conns;
    let idle_probe = match conns.pop() {
        Some(s) => {
            let chan = Chan::from_stream(s, timeout)?;
            Some(probe(&mut RelayConn::open(&args.relay, timeout, chan))?)
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
        "connect_errors": opened.errors,
        "open_s": round3(opened.secs),
        "connect_ms": opened.latency.summary(),
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
        "errors": opened.errors,
    }))
}

/// The idle connections, and how opening them went.
struct Opened {
    conns: Vec<TcpStream>,
    errors: u64,
    latency: Latencies,
    /// How long opening all of them took.
    secs: f64,
}

/// Opens `n` connections to `relay`, one after another, and sends nothing on them.
fn open_idle(relay: &str, n: u32) -> Opened {
    let opened_at = Instant::now();
    let mut conns = Vec::with_capacity(n as usize);
    let mut errors = 0u64;
    let mut latency = Latencies::default();
    for _ in 0..n {
        let started = Instant::now();
        match TcpStream::connect(relay) {
            Ok(s) => {
                latency.record(started.elapsed());
                conns.push(s);
            }
            Err(e) => {
                errors += 1;
                if errors <= 3 {
                    eprintln!("loadgen: idle connection: {e}");
                }
            }
        }
    }
    Opened {
        conns,
        errors,
        latency,
        secs: opened_at.elapsed().as_secs_f64(),
    }
}

/// How many of `conns` are still open. A relay that closed a connection shows EOF (or a
/// reset) at once.
fn count_open(conns: &[TcpStream]) -> io::Result<u64> {
    let mut open = 0u64;
    for s in conns {
        s.set_nonblocking(true)?;
        let mut b = [0u8; 1];
        match (&*s).read(&mut b) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => open += 1,
            _ => {}
        }
        s.set_nonblocking(false)?;
    }
    Ok(open)
}

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
