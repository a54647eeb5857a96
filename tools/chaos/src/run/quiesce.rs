//! Phase 3: quiesce. No more traffic, no more tool loops, no relay; the core up and done
//! thinking. Then settle: resolve everything unsettled and resend what is proven unsent,
//! round after round, until only the rows nothing can settle (FAIL500) are left.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::thread;
use std::time::Duration;

use anyhow::{Context, bail};
use ledger::{Ledger, Row, State};

use super::{Run, SLOW_MS, STALE_SENT_SECS};
use crate::channel::Sent;
use crate::check;
use crate::plan::Memo;
use crate::tools::{self, Tally};

/// Resolve + reprocess rounds before leftovers count as violations.
const SETTLE_ROUNDS: usize = 30;
/// reprocess's read timeout while settling (SLOW rows come back UNKNOWN at once).
const SETTLE_READ_MS: u64 = 30;

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
}

impl Run<'_> {
    pub(super) fn quiesce(&mut self) -> anyhow::Result<Quiesced> {
        println!(
            "chaos: {:.1} s done; quiescing",
            self.start.elapsed().as_secs_f64()
        );
        let (sents, tallies) = self.stop_threads()?;
        for svc in [&mut self.core, &mut self.relay] {
            if let Some(what) = svc.check_crash(self.start.elapsed()) {
                println!("chaos: FINDING: {what}");
                self.crashes.push(what);
            }
        }
        self.relay.kill();
        self.core.start(self.start.elapsed())?;
        println!(
            "chaos: {:.1} s: channels and tools stopped, relay killed, core up; settling",
            self.start.elapsed().as_secs_f64()
        );
        thread::sleep(Duration::from_millis(SLOW_MS + 500));

        let (settle, settle_rounds, leftovers) = self.settle()?;
        if self.core.check_crash(self.start.elapsed()).is_some() {
            self.crashes
                .push("coresim exited by itself while quiescing".into());
            self.core.start(self.start.elapsed())?;
        }
        self.find_panics();
        Ok(Quiesced {
            sents,
            tallies,
            settle,
            settle_rounds,
            leftovers,
        })
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
        let mut tallies = BTreeMap::new();
        for (name, h) in self.threads.tools.drain(..) {
            match h.join() {
                Ok(t) => {
                    tallies.insert(name, t);
                }
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
        for round in 1..=SETTLE_ROUNDS {
            self.check_interrupted()?;
            rounds = round;
            // No relay runs and no tool is mid-call, so no SENT row can still be waited on:
            // instead of waiting out resolve's stale-sent floor, move those rows' clock past it.
            // Likewise the backoff of inquiries that failed during the run's core outages: the
            // core is up now, so every GUID's next inquiry is made due.
            age_sent_rows(&self.work.db, STALE_SENT_SECS + 1)?;
            make_inquiries_due(&self.work.db)?;
            for (exe, name, args) in [
                (&self.bins.resolve, "resolve", &resolve_args),
                (&self.bins.reprocess, "reprocess", &reprocess_args),
            ] {
                tools::run_logged(
                    exe,
                    name,
                    args,
                    &self.work.tools_dir,
                    &self.work.log(name),
                    &mut settle,
                    self.start,
                    self.interrupted,
                );
            }
            let rows = all_rows(&self.work.db)?;
            leftovers = rows.iter().filter(|r| unsettled(r)).count();
            if leftovers == 0 {
                break;
            }
            thread::sleep(Duration::from_millis(SLOW_MS + 500));
        }
        Ok((settle, rounds, leftovers))
    }

    /// A thread that panicked does not always end its process: look for it in the logs.
    fn find_panics(&mut self) {
        for name in ["relay.log", "coresim.log", "resolve.log", "reprocess.log"] {
            let text = std::fs::read_to_string(self.work.dir.join(name)).unwrap_or_default();
            for line in text.lines().filter(|l| l.contains("panicked")) {
                self.crashes.push(format!("{name}: {line}"));
            }
        }
    }
}

/// Every row of the ledger at `db`.
pub(super) fn all_rows(db: &Path) -> anyhow::Result<Vec<Row>> {
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

/// Makes every failed GUID's next inquiry due now (for quiescing only: see the caller).
fn make_inquiries_due(db: &Path) -> anyhow::Result<()> {
    let l = Ledger::open(db).with_context(|| format!("cannot open {}", db.display()))?;
    l.connection()
        .execute(
            "UPDATE tx_inquiry SET next_at = datetime('now', '-1 seconds')",
            [],
        )
        .context("cannot make inquiries due")?;
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
