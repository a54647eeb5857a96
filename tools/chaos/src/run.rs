//! The run itself: start the core and the relay, let the channels and the batch tools loose,
//! follow the kill schedule, quiesce, and hand everything to the checks.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use ledger::{Ledger, Row, State};

use crate::channel::{self, Answer, Kind, Sent};
use crate::check::{self, Checks, TITLES};
use crate::plan::{self, Disruption, Memo};
use crate::procs::Service;
use crate::tools::{self, Loop, Tally};

/// The core simulator's think time for SLOW memos.
pub const SLOW_MS: u64 = 500;
/// The relay's core timeouts: reads expire before SLOW answers (→ E901/UNKNOWN).
pub const RELAY_CONNECT_MS: u64 = 200;
pub const RELAY_READ_MS: u64 = 300;
/// resolve during the run: `--min-age` above SLOW_MS, `--stale-sent` at resolve's floor.
pub const MIN_AGE_SECS: u64 = 2;
pub const STALE_SENT_SECS: u64 = 60;
/// Quiescing: resolve + reprocess rounds before leftovers count as violations.
const SETTLE_ROUNDS: usize = 30;
/// Quiescing: reprocess's read timeout (SLOW rows come back UNKNOWN at once).
const SETTLE_READ_MS: u64 = 30;
/// How many violations get their evidence gathered from the logs.
const EVIDENCE_FOR: usize = 20;

pub struct Config {
    pub secs: u64,
    pub seed: u64,
    pub channels: usize,
    pub bin_dir: PathBuf,
    /// Where the run's temp dir goes (default: the system's temp dir).
    pub work_dir: Option<PathBuf>,
    /// resolve's `--min-age` during the run.
    pub resolve_min_age: u64,
    pub keep: bool,
}

/// Stops the helper threads however `run` ends: channels are told to stop; tool loops are
/// aborted (their running child killed) and joined, so that no tool outlives the run.
struct Threads {
    stop: Arc<AtomicBool>,
    abort: Arc<AtomicBool>,
    channels: Vec<JoinHandle<Vec<Sent>>>,
    tools: Vec<(&'static str, JoinHandle<Tally>)>,
}

impl Drop for Threads {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if !self.tools.is_empty() {
            self.abort.store(true, Ordering::Relaxed);
            for (_, h) in self.tools.drain(..) {
                let _ = h.join();
            }
        }
    }
}

struct Bins {
    coresim: PathBuf,
    relay: PathBuf,
    resolve: PathBuf,
    reprocess: PathBuf,
}

fn bins(dir: &Path) -> anyhow::Result<Bins> {
    let find = |name: &str| -> anyhow::Result<PathBuf> {
        let p = dir.join(name);
        if !p.is_file() {
            bail!(
                "{} not found (build the workspace binaries, or pass --bin-dir)",
                p.display()
            );
        }
        Ok(p)
    };
    Ok(Bins {
        coresim: find("coresim")?,
        relay: find("relay")?,
        resolve: find("resolve")?,
        reprocess: find("reprocess")?,
    })
}

/// Runs the whole thing; `Ok(true)` when no violation was found.
pub fn run(cfg: &Config, interrupted: &Arc<AtomicBool>) -> anyhow::Result<bool> {
    let bins = bins(&cfg.bin_dir)?;
    let mut builder = tempfile::Builder::new();
    builder.prefix("chaos-");
    let tmp = match &cfg.work_dir {
        Some(parent) => builder.tempdir_in(parent),
        None => builder.tempdir(),
    }
    .context("cannot create a temp dir")?;
    let dir = tmp.path().to_path_buf();
    let db = dir.join("ledger.db");
    let journal = dir.join("core.journal");
    let tools_dir = dir.join("tools");
    std::fs::create_dir_all(&tools_dir)?;

    let events = plan::schedule(cfg.seed, cfg.secs);
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
        plan::plan_digest(cfg.seed, cfg.channels, 200, &events),
        count(Disruption::KillRelay),
        count(Disruption::KillCore)
    );
    println!("chaos: schedule: {}", describe(&events));
    println!("chaos: work dir {}", dir.display());

    let start = Instant::now();
    let mut core = Service::new(
        "coresim",
        bins.coresim.clone(),
        vec![
            "--slow-ms".into(),
            SLOW_MS.to_string(),
            "--journal".into(),
            path_arg(&journal),
        ],
        &dir,
    );
    core.start(start.elapsed())?;
    let core_url = format!("http://{}", core.addr());
    let mut relay = Service::new(
        "relay",
        bins.relay.clone(),
        vec![
            "--db".into(),
            path_arg(&db),
            "--core".into(),
            core_url.clone(),
            "--connect-timeout-ms".into(),
            RELAY_CONNECT_MS.to_string(),
            "--read-timeout-ms".into(),
            RELAY_READ_MS.to_string(),
        ],
        &dir,
    );
    relay.start(start.elapsed())?;
    println!(
        "chaos: core {} (slow {SLOW_MS} ms, journal), relay {} (connect {RELAY_CONNECT_MS} ms, read {RELAY_READ_MS} ms)",
        core.addr(),
        relay.addr()
    );
    let relay_addr: SocketAddr = relay.addr().parse().context("relay address")?;

    let mut threads = Threads {
        stop: Arc::new(AtomicBool::new(false)),
        abort: Arc::new(AtomicBool::new(false)),
        channels: Vec::new(),
        tools: Vec::new(),
    };
    let ctx = Arc::new(channel::Ctx {
        relay: relay_addr,
        stop: Arc::clone(&threads.stop),
        start,
    });
    for i in 0..cfg.channels {
        let ctx = Arc::clone(&ctx);
        let seed = cfg.seed;
        let h = thread::Builder::new()
            .name(format!("chan-{i}"))
            .spawn(move || channel::run(seed, i, &ctx))
            .context("cannot start a channel thread")?;
        threads.channels.push(h);
    }
    let common = |extra: &[&str]| -> Vec<String> {
        let mut v = vec![
            "--db".to_string(),
            path_arg(&db),
            "--core".into(),
            core_url.clone(),
            "--json".into(),
        ];
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    let loops = [
        Loop {
            exe: bins.resolve.clone(),
            name: "resolve",
            args: common(&[
                "--min-age",
                &cfg.resolve_min_age.to_string(),
                "--stale-sent",
                &STALE_SENT_SECS.to_string(),
                "--connect-timeout-ms",
                &RELAY_CONNECT_MS.to_string(),
                "--read-timeout-ms",
                "1000",
            ]),
            dir: tools_dir.clone(),
            log: dir.join("resolve.log"),
            pause: Duration::from_millis(300),
        },
        Loop {
            exe: bins.reprocess.clone(),
            name: "reprocess",
            args: common(&[
                "--max-attempts",
                "1000",
                "--limit",
                "200",
                "--connect-timeout-ms",
                &RELAY_CONNECT_MS.to_string(),
                "--read-timeout-ms",
                &RELAY_READ_MS.to_string(),
            ]),
            dir: tools_dir.clone(),
            log: dir.join("reprocess.log"),
            pause: Duration::from_millis(300),
        },
    ];
    for l in loops {
        let (stop, abort) = (Arc::clone(&threads.stop), Arc::clone(&threads.abort));
        let name = l.name;
        let h = thread::Builder::new()
            .name(name.into())
            .spawn(move || l.run(&stop, &abort, start))
            .context("cannot start a tool thread")?;
        threads.tools.push((name, h));
    }

    // The schedule.
    let end = Duration::from_secs(cfg.secs);
    let mut crashes: Vec<String> = Vec::new();
    let mut next = 0;
    while start.elapsed() < end {
        if interrupted.load(Ordering::Relaxed) {
            bail!("interrupted");
        }
        if let Some(what) = core.check_crash(start.elapsed()) {
            println!("chaos: FINDING: {what}");
            crashes.push(what);
            core.start(start.elapsed())?;
        }
        if let Some(what) = relay.check_crash(start.elapsed()) {
            println!("chaos: FINDING: {what}");
            crashes.push(what);
            restart_relay(&mut relay, start.elapsed(), &mut crashes);
        }
        while next < events.len() && events[next].at <= start.elapsed() {
            let at = start.elapsed();
            match events[next].what {
                Disruption::KillRelay => relay.kill(),
                Disruption::StartRelay => restart_relay(&mut relay, at, &mut crashes),
                Disruption::KillCore => core.kill(),
                // The simulator is not under test: if it cannot come back, the run is void.
                Disruption::StartCore => core.start(at)?,
            }
            next += 1;
        }
        thread::sleep(Duration::from_millis(20));
    }

    // Quiesce: no more traffic, no more tools, no relay; the core up and done thinking.
    println!(
        "chaos: {:.1} s done; quiescing",
        start.elapsed().as_secs_f64()
    );
    // A tool in the middle of a run is killed, as an operator's timeout would: a row a
    // reprocess claimed stays SENT, which the settling resolve (--stale-sent, after the
    // core finished thinking) takes care of.
    threads.stop.store(true, Ordering::Relaxed);
    threads.abort.store(true, Ordering::Relaxed);
    let mut sents: Vec<Sent> = Vec::new();
    for h in threads.channels.drain(..) {
        match h.join() {
            Ok(mut s) => sents.append(&mut s),
            Err(_) => bail!("a channel thread panicked"),
        }
    }
    let mut tallies: BTreeMap<&'static str, Tally> = BTreeMap::new();
    for (name, h) in threads.tools.drain(..) {
        match h.join() {
            Ok(t) => {
                tallies.insert(name, t);
            }
            Err(_) => bail!("the {name} loop panicked"),
        }
    }
    for svc in [&mut core, &mut relay] {
        if let Some(what) = svc.check_crash(start.elapsed()) {
            println!("chaos: FINDING: {what}");
            crashes.push(what);
        }
    }
    relay.kill();
    core.start(start.elapsed())?;
    println!(
        "chaos: {:.1} s: channels and tools stopped, relay killed, core up; settling",
        start.elapsed().as_secs_f64()
    );
    thread::sleep(Duration::from_millis(SLOW_MS + 500));

    // Settling: resolve everything unsettled, resend what is proven unsent, and again, until
    // only FAIL500 rows (never bookable) are left. reprocess uses a short read timeout so
    // that SLOW rows do not hold it up (they come back UNKNOWN); before the next resolve the
    // core is given SLOW_MS and a margin to finish them, so that its 404 means "never".
    let mut settle = Tally::default();
    let mut settle_rounds = 0;
    let mut leftovers = usize::MAX;
    let resolve_args = common(&[
        "--min-age",
        "0",
        "--stale-sent",
        &STALE_SENT_SECS.to_string(),
    ]);
    let reprocess_args = common(&[
        "--max-attempts",
        "1000",
        "--limit",
        "2000",
        "--read-timeout-ms",
        &SETTLE_READ_MS.to_string(),
    ]);
    for round in 1..=SETTLE_ROUNDS {
        if interrupted.load(Ordering::Relaxed) {
            bail!("interrupted");
        }
        settle_rounds = round;
        // No relay runs and no tool is mid-call, so no SENT row can still be waited on:
        // instead of waiting out resolve's stale-sent floor, move those rows' clock past it.
        age_sent_rows(&db, STALE_SENT_SECS + 1)?;
        for (exe, name, args) in [
            (&bins.resolve, "resolve", &resolve_args),
            (&bins.reprocess, "reprocess", &reprocess_args),
        ] {
            tools::run_logged(
                exe,
                name,
                args,
                &tools_dir,
                &dir.join(format!("{name}.log")),
                &mut settle,
                start,
                interrupted,
            );
        }
        let rows = all_rows(&db)?;
        leftovers = rows.iter().filter(|r| unsettled(r)).count();
        if leftovers == 0 {
            break;
        }
        thread::sleep(Duration::from_millis(SLOW_MS + 500));
    }
    if core.check_crash(start.elapsed()).is_some() {
        crashes.push("coresim exited by itself while quiescing".into());
        core.start(start.elapsed())?;
    }

    // A thread that panicked does not always end its process: look for it in the logs.
    for name in ["relay.log", "coresim.log", "resolve.log", "reprocess.log"] {
        let text = std::fs::read_to_string(dir.join(name)).unwrap_or_default();
        for line in text.lines().filter(|l| l.contains("panicked")) {
            crashes.push(format!("{name}: {line}"));
        }
    }

    // The evidence.
    println!(
        "chaos: {:.1} s: settled after {settle_rounds} rounds; checking",
        start.elapsed().as_secs_f64()
    );
    let rows = all_rows(&db)?;
    let stats = crate::http::get_json(core.addr(), "/_stats").context("core /_stats")?;
    let by_guid: BTreeMap<String, u64> = stats["by_guid"]
        .as_object()
        .context("/_stats without by_guid")?
        .iter()
        .map(|(g, n)| (g.clone(), n.as_u64().unwrap_or(0)))
        .collect();
    let guids: Vec<String> = by_guid.keys().cloned().collect();
    let bookings = check::fetch_bookings(core.addr(), &guids);
    let checks = check::run(&sents, &rows, &by_guid, &bookings);
    core.kill();
    println!("chaos: {:.1} s: checked", start.elapsed().as_secs_f64());

    let mut violations = 0;
    violations += report_figures(
        &sents,
        &rows,
        &stats,
        &relay,
        &core,
        &tallies,
        &settle,
        settle_rounds,
        leftovers,
    );
    violations += report_checks(&checks, &sents, &dir, &crashes, &tallies, &settle);

    let keep = cfg.keep || violations > 0;
    if keep {
        let kept = tmp.keep();
        println!("chaos: work dir kept: {}", kept.display());
    }
    if violations == 0 {
        println!("chaos: PASS (seed {}, 0 violations)", cfg.seed);
    } else {
        println!(
            "chaos: FAIL (seed {}, {violations} violations; replay with --seed {})",
            cfg.seed, cfg.seed
        );
    }
    drop(threads);
    Ok(violations == 0)
}

/// A relay that cannot start again on its ledger after a SIGKILL is a finding, not the end
/// of the run: the channels keep knocking, the next scheduled start tries again, and the
/// settling and the checks need no relay.
fn restart_relay(relay: &mut Service, at: Duration, crashes: &mut Vec<String>) {
    if let Err(e) = relay.start(at) {
        let what = format!(
            "relay could not be restarted at t={:.1}s: {e:#}",
            at.as_secs_f64()
        );
        println!("chaos: FINDING: {what}");
        crashes.push(what);
    }
}

/// `relay killed at 1.2s (down 0.15s), …; core down 4.0–5.3s, …`.
fn describe(events: &[plan::Event]) -> String {
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

fn path_arg(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

fn all_rows(db: &Path) -> anyhow::Result<Vec<Row>> {
    let l = Ledger::open(db).with_context(|| format!("cannot open {}", db.display()))?;
    l.all_rows().context("cannot read the ledger")
}

/// Makes every SENT row look `secs` old (for quiescing only: see the caller).
fn age_sent_rows(db: &Path, secs: u64) -> anyhow::Result<()> {
    let l = Ledger::open(db).with_context(|| format!("cannot open {}", db.display()))?;
    l.connection()
        .execute(
            "UPDATE tx SET updated_at = datetime('now', ?1) WHERE state = 'SENT'",
            [format!("-{secs} seconds")],
        )
        .context("cannot age SENT rows")?;
    Ok(())
}

/// A row the quiescing loop must still settle: UNKNOWN, SENT/RECEIVED, FAILED/E902, except
/// for FAIL500 requests, which the simulator never books and answers 500 for ever.
fn unsettled(r: &Row) -> bool {
    if check::row_memo(r) == Some(Memo::Fail500) {
        return false;
    }
    match r.state {
        State::Unknown | State::Sent | State::Received => true,
        State::Failed => r.rsp_code.as_deref() == Some("E902"),
        State::Done => false,
    }
}

#[allow(clippy::too_many_arguments)]
fn report_figures(
    sents: &[Sent],
    rows: &[Row],
    stats: &serde_json::Value,
    relay: &Service,
    core: &Service,
    tallies: &BTreeMap<&'static str, Tally>,
    settle: &Tally,
    settle_rounds: usize,
    leftovers: usize,
) -> usize {
    let kinds = |k: Kind| sents.iter().filter(|s| s.kind == k).count();
    let mut by_code: BTreeMap<String, usize> = BTreeMap::new();
    let (mut no_reply, mut timeouts, mut garbage) = (0, 0, 0);
    for s in sents {
        match &s.answer {
            Answer::Reply(_) => *by_code.entry(s.code().unwrap_or_default()).or_default() += 1,
            Answer::NoReply(_) => no_reply += 1,
            Answer::Timeout => timeouts += 1,
            Answer::Garbage(_) => garbage += 1,
        }
    }
    let mut by_memo: BTreeMap<&str, usize> = BTreeMap::new();
    for s in sents.iter().filter(|s| s.kind == Kind::New) {
        *by_memo.entry(s.req.memo.name()).or_default() += 1;
    }
    // In-flight pairs where one of the two was told E903.
    let mut pairs: HashMap<&str, Vec<&Sent>> = HashMap::new();
    for s in sents
        .iter()
        .filter(|s| matches!(s.kind, Kind::InFlightFirst | Kind::InFlightTwin))
    {
        pairs.entry(s.req.guid.as_str()).or_default().push(s);
    }
    let e903_pairs = pairs
        .values()
        .filter(|p| p.iter().any(|s| s.code().as_deref() == Some("E903")))
        .count();
    let mut by_state: BTreeMap<String, usize> = BTreeMap::new();
    for r in rows {
        let key = format!("{} {}", r.state, r.rsp_code.as_deref().unwrap_or("-"));
        *by_state.entry(key).or_default() += 1;
    }
    let mut fail500: BTreeMap<String, usize> = BTreeMap::new();
    for r in rows
        .iter()
        .filter(|r| check::row_memo(r) == Some(Memo::Fail500))
    {
        *fail500.entry(r.state.to_string()).or_default() += 1;
    }
    let fail500_rows: usize = fail500.values().sum();

    println!("figures:");
    let line = |k: &str, v: String| println!("  {k:<28} {v}");
    line("requests", sents.len().to_string());
    line(
        "  new transfers",
        format!(
            "{} ({})",
            kinds(Kind::New),
            by_memo
                .iter()
                .map(|(m, n)| format!("{m} {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    );
    line("  resends (same bytes)", kinds(Kind::Resend).to_string());
    line(
        "  in-flight resends",
        format!(
            "{} pairs ({} twins sent; {e903_pairs} pairs saw E903)",
            kinds(Kind::InFlightFirst),
            kinds(Kind::InFlightTwin)
        ),
    );
    line(
        "  other-amount resends",
        kinds(Kind::OtherAmount).to_string(),
    );
    line(
        "replies by code",
        by_code
            .iter()
            .map(|(c, n)| format!("{c} {n}"))
            .collect::<Vec<_>>()
            .join(", "),
    );
    line(
        "no reply",
        format!(
            "{no_reply} (connection broke or relay down; timeouts {timeouts}, bad frames {garbage})"
        ),
    );
    line(
        "relay kills",
        format!("{} ({} starts)", relay.kills, relay.starts),
    );
    line(
        "core restarts",
        format!(
            "{} ({} kills incl. the final stop)",
            core.starts.saturating_sub(1),
            core.kills
        ),
    );
    line(
        "core bookings",
        format!(
            "{} of {} GUIDs",
            stats["bookings"],
            stats["by_guid"].as_object().map_or(0, |m| m.len())
        ),
    );
    line(
        "ledger rows",
        format!(
            "{} ({})",
            rows.len(),
            by_state
                .iter()
                .map(|(s, n)| format!("{s} {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    );
    line(
        "  FAIL500 rows",
        format!(
            "{fail500_rows} ({}; the simulator never books them, so they cycle \
             UNKNOWN -> FAILED -> UNKNOWN)",
            fail500
                .iter()
                .map(|(s, n)| format!("{s} {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    );
    for (name, t) in tallies {
        line(&format!("{name} runs"), tally_line(t));
    }
    line(
        "settling",
        format!(
            "{settle_rounds} rounds, {} tool runs ({}); leftovers {}",
            settle.runs,
            exits(settle),
            if leftovers == usize::MAX {
                "?".to_string()
            } else {
                leftovers.to_string()
            }
        ),
    );
    0
}

fn exits(t: &Tally) -> String {
    t.by_exit
        .iter()
        .map(|(c, n)| format!("exit {c}: {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn tally_line(t: &Tally) -> String {
    let totals = t
        .totals
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(k, n)| format!("{k} {n}"))
        .collect::<Vec<_>>()
        .join(", ");
    format!("{} ({}); {totals}", t.runs, exits(t))
}

/// Prints every check and every violation; returns how many violations there were.
fn report_checks(
    checks: &Checks,
    sents: &[Sent],
    dir: &Path,
    crashes: &[String],
    tallies: &BTreeMap<&'static str, Tally>,
    settle: &Tally,
) -> usize {
    println!("checks:");
    for (id, title) in TITLES {
        let n = checks.examined.get(id).copied().unwrap_or(0);
        let bad = checks.failed(id);
        println!(
            "  {id} {title}: {bad} violations in {n} cases {}",
            if bad == 0 { "ok" } else { "FAILED" }
        );
    }
    let tool_violations: Vec<&String> = tallies
        .values()
        .chain(std::iter::once(settle))
        .flat_map(|t| t.violations.iter())
        .collect();
    println!(
        "  (g) relay and core never exit by themselves nor panic; tools exit 0 or 3: {} violations {}",
        crashes.len() + tool_violations.len(),
        if crashes.len() + tool_violations.len() == 0 {
            "ok"
        } else {
            "FAILED"
        }
    );

    let total = checks.violations.len() + crashes.len() + tool_violations.len();
    if total == 0 {
        return 0;
    }
    println!("violations:");
    let files: Vec<PathBuf> = [
        "core.journal",
        "relay.log",
        "coresim.log",
        "resolve.log",
        "reprocess.log",
    ]
    .iter()
    .map(|f| dir.join(f))
    .collect();
    for (i, v) in checks.violations.iter().enumerate() {
        println!("  VIOLATION {} guid={}: {}", v.check, v.guid, v.what);
        if i < EVIDENCE_FOR {
            print!("{}", check::evidence(&v.guid, &files, sents, 40));
        }
    }
    for c in crashes {
        println!("  VIOLATION (g) {c}");
    }
    for t in tool_violations {
        println!("  VIOLATION (g) {t}");
    }
    total
}
