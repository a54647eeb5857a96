//! Phase 3: quiesce. No more traffic, no more tool loops; the relays stopped by SIGTERM,
//! each after its late replies (settled or not); the database server and the core up, the
//! core done thinking. Then settle: resolve everything unsettled and resend what is proven
//! unsent, round after round, until only the rows nothing can settle (FAIL500) are left.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::thread;
use std::time::Duration;

use anyhow::bail;
use ledger::{Row, State};

use super::{LATE_REPLY_MS, Run, SLOW_MS, STALE_SENT_SECS};
use crate::channel::Sent;
use crate::check;
use crate::late::LateLog;
use crate::plan::Memo;
use crate::procs::Stopped;
use crate::tools::{Tally, Tool};

/// Resolve + reprocess rounds before leftovers count as violations.
const SETTLE_ROUNDS: usize = 30;
/// Rounds in a row that leave every unsettled row exactly as it was (state, attempts, reply,
/// `updated_at`) before the settling gives up early: no later round would move them either
/// (the core is up, no relay runs, every inquiry is made due each round), and the leftovers
/// are the violations they would be after all the rounds. (A negative control's lost rows
/// waited out all 30 rounds, ~55 s.)
const STUCK_ROUNDS: usize = 5;
/// reprocess's read timeout while settling (SLOW rows come back UNKNOWN at once).
const SETTLE_READ_MS: u64 = 30;
/// How long a relay may take to stop after SIGTERM beyond its late-reply window: requests
/// in flight (connect + read timeouts) and the ledger writes of their results (retried for
/// up to 10 s while the ledger fails), with room to spare.
const STOP_MARGIN: Duration = Duration::from_secs(20);

/// What the traffic and the settling left for the checks and the report.
pub(super) struct Quiesced {
    /// Every request the channels sent, with its answer.
    pub sents: Vec<Sent>,
    /// The tool loops' runs during the traffic, by tool.
    pub tallies: BTreeMap<&'static str, Tally>,
    /// The tool runs of the settling.
    pub settle: Tally,
    pub settle_rounds: usize,
    /// Rows still unsettled after the last round (`usize::MAX`: no round ran).
    pub leftovers: usize,
    /// What each relay's late replies came to, from its log (all its starts), by relay.
    pub late: Vec<(String, LateLog)>,
}

impl Quiesced {
    /// Every relay's late replies together.
    pub fn late_total(&self) -> LateLog {
        let mut all = LateLog::default();
        for (_, log) in &self.late {
            all.merge(log);
        }
        all
    }
}

impl Run<'_> {
    pub(super) fn quiesce(&mut self) -> anyhow::Result<Quiesced> {
        println!(
            "chaos: {:.1} s done; quiescing",
            self.start.elapsed().as_secs_f64()
        );
        let (sents, tallies) = self.stop_threads()?;
        for svc in std::iter::once(&mut self.core).chain(self.relays.iter_mut()) {
            if let Some(what) = svc.check_crash(self.start.elapsed()) {
                println!("chaos: FINDING: {what}");
                self.crashes.push(what);
            }
        }
        self.pending.fill(false);
        // The settling needs the ledger: a database server the schedule left down comes back,
        // before the relays stop (they record what their late replies settle).
        self.start_db()?;
        let stopped = self.stop_relays();
        self.core.start(self.start.elapsed())?;
        println!(
            "chaos: {:.1} s: channels and tools stopped, {stopped}, {}core up; settling",
            self.start.elapsed().as_secs_f64(),
            if self.ledger.cluster().is_some() {
                "database and "
            } else {
                ""
            }
        );
        thread::sleep(Duration::from_millis(SLOW_MS + 500));

        let (settle, settle_rounds, leftovers) = self.settle()?;
        if self.core.check_crash(self.start.elapsed()).is_some() {
            self.crashes
                .push("coresim exited by itself while quiescing".into());
            self.core.start(self.start.elapsed())?;
        }
        let late = self.read_logs();
        Ok(Quiesced {
            sents,
            tallies,
            settle,
            settle_rounds,
            leftovers,
            late,
        })
    }

    /// Stops the running relays by SIGTERM, all at once, as an operator would: each finishes
    /// its requests and waits for its late replies (at most `LATE_REPLY_MS`), so that every
    /// late reply has settled its row (or not) before the settling begins. One that does not
    /// exit in time (it is SIGKILLed then) or exits with a failure is a finding. Returns what
    /// the progress line says about it.
    fn stop_relays(&mut self) -> String {
        let grace = Duration::from_millis(LATE_REPLY_MS) + STOP_MARGIN;
        let at = self.start.elapsed().as_secs_f64();
        let outcomes: Vec<(String, Option<Stopped>)> = thread::scope(|scope| {
            let stops: Vec<_> = self
                .relays
                .iter_mut()
                .map(|r| scope.spawn(move || (r.name.clone(), r.stop(grace))))
                .collect();
            stops.into_iter().filter_map(|h| h.join().ok()).collect()
        });
        let (mut stopped, mut down, mut slowest) = (0, 0, Duration::ZERO);
        for (name, outcome) in outcomes {
            let finding = match outcome {
                None => {
                    down += 1;
                    None
                }
                Some(Stopped::Exited(st, took)) => {
                    stopped += 1;
                    slowest = slowest.max(took);
                    (!st.success()).then(|| {
                        format!(
                            "{name} exited with {st} after SIGTERM (its final stop at t={at:.1}s)"
                        )
                    })
                }
                Some(Stopped::Killed(why)) => Some(format!(
                    "{name} did not stop by SIGTERM (its final stop at t={at:.1}s): {why}"
                )),
            };
            if let Some(what) = finding {
                let what = format!("{what}; see {}", self.work.log(&name).display());
                println!("chaos: FINDING: {what}");
                self.crashes.push(what);
            }
        }
        let single = self.relays.len() == 1;
        if single && down == 1 {
            return "relay down (killed by the schedule)".into();
        }
        format!(
            "{} by SIGTERM in {}{:.2} s ({} late replies awaited){}",
            if single {
                "relay stopped".to_string()
            } else {
                format!("{stopped} relays stopped")
            },
            if single { "" } else { "at most " },
            slowest.as_secs_f64(),
            if single { "its" } else { "their" },
            if down > 0 {
                format!(", {down} down (killed by the schedule)")
            } else {
                String::new()
            }
        )
    }

    /// Stops the channels and the tool loops and collects what they did. A tool in the
    /// middle of a run is killed, as an operator's timeout would: a row a reprocess claimed
    /// stays SENT, which the settling resolve (--stale-sent, after the core finished
    /// thinking) takes care of.
    fn stop_threads(&mut self) -> anyhow::Result<(Vec<Sent>, BTreeMap<&'static str, Tally>)> {
        self.threads.stop.store(true, Ordering::Relaxed);
        self.threads.abort.store(true, Ordering::Relaxed);
        let mut sents: Vec<Sent> = Vec::new();
        for h in self.threads.channels.drain(..) {
            match h.join() {
                Ok(mut s) => sents.append(&mut s),
                Err(_) => bail!("a channel thread panicked"),
            }
        }
        let mut tallies: BTreeMap<&'static str, Tally> = BTreeMap::new();
        for (name, h) in self.threads.tools.drain(..) {
            match h.join() {
                Ok(t) => tallies.entry(name).or_default().merge(t),
                Err(_) => bail!("the {name} loop panicked"),
            }
        }
        Ok((sents, tallies))
    }

    /// Resolve everything unsettled, resend what is proven unsent, and again, until only
    /// FAIL500 rows (never bookable) are left. reprocess uses a short read timeout so that
    /// SLOW rows do not hold it up (they come back UNKNOWN); before the next resolve the core
    /// is given SLOW_MS and a margin to finish them, so that its 404 means "never".
    /// Returns the tool runs, the rounds and the rows left unsettled.
    fn settle(&mut self) -> anyhow::Result<(Tally, usize, usize)> {
        let mut settle = Tally::default();
        let mut rounds = 0;
        let mut leftovers = usize::MAX;
        let resolve_args = self.tool_args(&[
            "--min-age",
            "0",
            "--stale-sent",
            &STALE_SENT_SECS.to_string(),
            // The run's core outages may have counted failed inquiries against some GUIDs;
            // settling must never give up on one.
            "--max-inquiries",
            "1000000",
        ]);
        let reprocess_args = self.tool_args(&[
            "--max-attempts",
            "1000",
            "--limit",
            "2000",
            "--read-timeout-ms",
            &SETTLE_READ_MS.to_string(),
        ]);
        let tools = [
            (&self.bins.resolve, "resolve", resolve_args),
            (&self.bins.reprocess, "reprocess", reprocess_args),
        ]
        .map(|(exe, name, args)| Tool {
            exe: exe.clone(),
            name,
            tag: name.into(),
            args,
            log: self.work.log(name),
        });
        let bench = self.bench();
        let mut last: Vec<Row> = Vec::new();
        let mut unmoved = 0;
        for round in 1..=SETTLE_ROUNDS {
            self.check_interrupted()?;
            rounds = round;
            // No relay runs and no tool is mid-call, so no SENT row can still be waited on:
            // instead of waiting out resolve's stale-sent floor, move those rows' clock past it.
            // Likewise the backoff of inquiries that failed during the run's core outages: the
            // core is up now, so every GUID's next inquiry is made due.
            self.ledger.age_sent_rows(STALE_SENT_SECS + 1)?;
            self.ledger.make_inquiries_due()?;
            for tool in &tools {
                tool.run_logged(&bench, &mut settle, self.interrupted);
            }
            let rows: Vec<Row> = self
                .ledger
                .all_rows()?
                .into_iter()
                .filter(unsettled)
                .collect();
            leftovers = rows.len();
            if leftovers == 0 {
                break;
            }
            unmoved = if rows == last { unmoved + 1 } else { 0 };
            if unmoved == STUCK_ROUNDS {
                println!(
                    "chaos: {leftovers} rows unsettled, and {STUCK_ROUNDS} rounds moved none of them; settling stops"
                );
                break;
            }
            last = rows;
            thread::sleep(Duration::from_millis(SLOW_MS + 500));
        }
        Ok((settle, rounds, leftovers))
    }

    /// Reads every log once. A thread that panicked does not always end its process, so
    /// panics are looked for in all of them; the relays' logs (each holds all of its relay's
    /// starts) also tell what their late replies came to, returned by relay.
    fn read_logs(&mut self) -> Vec<(String, LateLog)> {
        let mut late = Vec::new();
        for name in self.logs() {
            let text = std::fs::read_to_string(self.work.dir.join(&name)).unwrap_or_default();
            for line in text.lines().filter(|l| l.contains("panicked")) {
                self.crashes.push(format!("{name}: {line}"));
            }
            if let Some(relay) = self
                .relays
                .iter()
                .find(|r| format!("{}.log", r.name) == name)
            {
                late.push((relay.name.clone(), LateLog::scan(&text)));
            }
        }
        late
    }
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
