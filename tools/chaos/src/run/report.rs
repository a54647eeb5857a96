//! Phase 5: the report. The figures (what was sent and answered, what was killed, what the
//! core booked, what the ledger holds, what the tools did), every check with its count,
//! every violation with its evidence from the logs, and PASS or FAIL.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use super::check::Verdict;
use super::quiesce::Quiesced;
use super::{LATE_REPLY_MS, MAX_LATE_REPLIES, Run};
use crate::channel::{Answer, Kind, Sent};
use crate::check::{self, LATE_TITLE, RECONCILE_TITLE, TITLES};
use crate::late::LateLog;
use crate::plan::Memo;
use crate::tools::Tally;

/// How many violations get their evidence gathered from the logs.
const EVIDENCE_FOR: usize = 20;

impl Run<'_> {
    /// Prints everything; keeps the work directory if asked or if anything failed. True when
    /// no violation was found. The run ends here: dropping it stops what is left.
    pub(super) fn report(self, q: &Quiesced, v: &Verdict) -> bool {
        self.figures(q, v);
        let violations = self.checks(q, v);
        if self.cfg.keep || violations > 0 {
            let kept = self.work.tmp.keep();
            println!("chaos: work dir kept: {}", kept.display());
        }
        if violations == 0 {
            println!("chaos: PASS (seed {}, 0 violations)", self.cfg.seed);
        } else {
            println!(
                "chaos: FAIL (seed {}, {violations} violations; replay with --seed {})",
                self.cfg.seed, self.cfg.seed
            );
        }
        violations == 0
    }

    fn figures(&self, q: &Quiesced, v: &Verdict) {
        let sents = &q.sents;
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
        let mut by_state: BTreeMap<String, usize> = BTreeMap::new();
        for r in &v.rows {
            let key = format!("{} {}", r.state, r.rsp_code.as_deref().unwrap_or("-"));
            *by_state.entry(key).or_default() += 1;
        }
        let mut fail500: BTreeMap<String, usize> = BTreeMap::new();
        for r in v
            .rows
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
            format!("{} ({})", kinds(Kind::New), joined(&by_memo)),
        );
        line("  resends (same bytes)", kinds(Kind::Resend).to_string());
        line(
            "  in-flight resends",
            format!(
                "{} pairs ({} twins sent; {} pairs saw E903)",
                kinds(Kind::InFlightFirst),
                kinds(Kind::InFlightTwin),
                e903_pairs(sents)
            ),
        );
        line(
            "  other-amount resends",
            kinds(Kind::OtherAmount).to_string(),
        );
        line("replies by code", joined(&by_code));
        line(
            "no reply",
            format!(
                "{no_reply} (connection broke or relay down; timeouts {timeouts}, bad frames {garbage})"
            ),
        );
        let relay_kills: usize = self.relays.iter().map(|r| r.kills).sum();
        let relay_starts: usize = self.relays.iter().map(|r| r.starts).sum();
        line(
            "relay kills",
            format!("{relay_kills} ({relay_starts} starts)"),
        );
        line(
            "core restarts",
            format!(
                "{} ({} kills incl. the final stop)",
                self.core.starts.saturating_sub(1),
                self.core.kills
            ),
        );
        if !self.cfg.classic() {
            let each = |f: fn(&crate::procs::Service) -> usize| {
                self.relays
                    .iter()
                    .map(|r| f(r).to_string())
                    .collect::<Vec<_>>()
                    .join("/")
            };
            line(
                "relays",
                format!(
                    "{} sharing the ledger (kills {}, starts {})",
                    self.relays.len(),
                    each(|r| r.kills),
                    each(|r| r.starts)
                ),
            );
            let (outages, down) = self.outages.summary();
            line(
                "DB restarts",
                if self.ledger.cluster().is_some() {
                    format!(
                        "{} (immediate-mode stops: {outages}, down {:.1} s in all; relay \
                         starts that waited for it: {})",
                        self.db_restarts,
                        down.as_secs_f64(),
                        self.deferred_starts
                    )
                } else if self.cfg.external_db.is_some() {
                    format!(
                        "0 (a database the run does not own; no writable host {outages} \
                         time(s), {:.1} s in all; relay starts that waited for one: {})",
                        down.as_secs_f64(),
                        self.deferred_starts
                    )
                } else {
                    "0 (an SQLite ledger)".to_string()
                },
            );
            line("sent to another relay", other_relay(sents));
        }
        if self.cfg.http {
            line("through the HTTP door", other_door(sents));
        }
        line(
            "core bookings",
            format!(
                "{} of {} GUIDs",
                v.stats["bookings"],
                v.stats["by_guid"].as_object().map_or(0, |m| m.len())
            ),
        );
        line(
            "ledger rows",
            format!("{} ({})", v.rows.len(), joined(&by_state)),
        );
        line(
            "  FAIL500 rows",
            format!(
                "{fail500_rows} ({}; the simulator never books them, so they cycle \
                 UNKNOWN -> FAILED -> UNKNOWN)",
                joined(&fail500)
            ),
        );
        self.late_figures(q, &line);
        for (name, t) in &q.tallies {
            line(&format!("{name} runs"), tally_line(t));
        }
        line(
            "settling",
            format!(
                "{} rounds, {} tool runs ({}); leftovers {}",
                q.settle_rounds,
                q.settle.runs,
                exits(&q.settle),
                if q.leftovers == usize::MAX {
                    "?".to_string()
                } else {
                    q.leftovers.to_string()
                }
            ),
        );
    }

    /// What the relays' late replies came to, from their logs: the UNKNOWN rows they
    /// settled, the answers that settled nothing, the calls not awaited because the waiters
    /// were full, the waits that heard nothing; with several relays, each relay's share.
    fn late_figures(&self, q: &Quiesced, line: &dyn Fn(&str, String)) {
        let late = q.late_total();
        // `n` then, in parentheses, `what` and (with several relays) each relay's share.
        let figure = |n: usize, what: String, f: fn(&LateLog) -> usize| {
            let mut parts: Vec<String> = Vec::new();
            if !what.is_empty() {
                parts.push(what);
            }
            if q.late.len() > 1 {
                let each: Vec<String> = q
                    .late
                    .iter()
                    .map(|(name, log)| format!("{name} {}", f(log)))
                    .collect();
                parts.push(each.join(", "));
            }
            if parts.is_empty() {
                n.to_string()
            } else {
                format!("{n} ({})", parts.join("; "))
            }
        };
        line(
            "late replies",
            format!(
                "{} arrived within the {LATE_REPLY_MS} ms window (at most {MAX_LATE_REPLIES} \
                 waiting per relay; counted in the {}, all starts)",
                late.arrived(),
                if q.late.len() == 1 {
                    "relay's log"
                } else {
                    "relays' logs"
                }
            ),
        );
        line(
            "  settled UNKNOWN -> DONE",
            figure(late.settled.len(), joined(&late.settled_by_code()), |l| {
                l.settled.len()
            }),
        );
        line(
            "  arrived, settled nothing",
            figure(
                late.settled_nothing(),
                format!(
                    "the row had moved on {}, neither booking nor rejection {}",
                    late.moved_on, late.not_final
                ),
                LateLog::settled_nothing,
            ),
        );
        line(
            "  dropped, waiters full",
            figure(late.dropped, String::new(), |l| l.dropped),
        );
        line(
            "  no answer in the window",
            figure(late.no_reply, String::new(), |l| l.no_reply),
        );
    }

    /// Prints every check and every violation; returns how many violations there were.
    fn checks(&self, q: &Quiesced, v: &Verdict) -> usize {
        let checks = &v.checks;
        println!("checks:");
        for (id, title) in TITLES {
            let n = checks.examined.get(id).copied().unwrap_or(0);
            let bad = checks.failed(id);
            println!(
                "  {id} {title}: {bad} violations in {n} cases {}",
                if bad == 0 { "ok" } else { "FAILED" }
            );
        }
        let tool_violations: Vec<&String> = q
            .tallies
            .values()
            .chain(std::iter::once(&q.settle))
            .flat_map(|t| t.violations.iter())
            .collect();
        let process_violations = self.crashes.len() + tool_violations.len();
        println!(
            "  (g) {} and core never exit by themselves nor panic; tools exit 0 or 3{}: {} violations {}",
            if self.relays.len() == 1 {
                "relay"
            } else {
                "relays"
            },
            if self.ledger.cluster().is_some() {
                " (or 1 while the database was down)"
            } else {
                ""
            },
            process_violations,
            if process_violations == 0 {
                "ok"
            } else {
                "FAILED"
            }
        );
        let (late_cases, late_bad) = (
            checks.examined.get(check::H).copied().unwrap_or(0),
            checks.failed(check::H),
        );
        println!(
            "  {} {LATE_TITLE}: {late_bad} violations in {late_cases} cases {}",
            check::H,
            if late_bad == 0 { "ok" } else { "FAILED" }
        );
        let (recon_cases, recon_bad) = (
            checks.examined.get(check::I).copied().unwrap_or(0),
            checks.failed(check::I),
        );
        println!(
            "  {} {RECONCILE_TITLE}: {recon_bad} violations in {recon_cases} cases {}{}",
            check::I,
            if recon_bad == 0 { "ok" } else { "FAILED" },
            match &v.reconciled {
                Ok(r) => {
                    let k = &r.counts;
                    format!(
                        " (window {}: {} double, {} ghost, {} pending, {} matched, {} mismatch, {} missing)",
                        r.window, k.double, k.ghost, k.pending, k.matched, k.mismatch, k.missing
                    )
                }
                Err(_) => String::new(),
            }
        );

        let total = checks.violations.len() + process_violations;
        if total == 0 {
            return 0;
        }
        println!("violations:");
        let mut names = vec!["core.journal".to_string()];
        names.extend(self.logs());
        if self.ledger.cluster().is_some() {
            names.push("database.log".into());
        }
        let files: Vec<PathBuf> = names.iter().map(|f| self.work.dir.join(f)).collect();
        for (i, v) in checks.violations.iter().enumerate() {
            println!("  VIOLATION {} guid={}: {}", v.check, v.guid, v.what);
            if i < EVIDENCE_FOR {
                print!(
                    "{}",
                    check::evidence(&v.guid, &files, &q.sents, self.relays.len(), 40)
                );
            }
        }
        for c in &self.crashes {
            println!("  VIOLATION (g) {c}");
        }
        for t in tool_violations {
            println!("  VIOLATION (g) {t}");
        }
        total
    }
}

/// In-flight pairs where one of the two was told E903.
fn e903_pairs(sents: &[Sent]) -> usize {
    let mut pairs: HashMap<&str, Vec<&Sent>> = HashMap::new();
    for s in sents
        .iter()
        .filter(|s| matches!(s.kind, Kind::InFlightFirst | Kind::InFlightTwin))
    {
        pairs.entry(s.req.guid.as_str()).or_default().push(s);
    }
    pairs
        .values()
        .filter(|p| p.iter().any(|s| s.code().as_deref() == Some("E903")))
        .count()
}

/// How many resends went to another relay than their GUID's first send: `n of m` in all,
/// then by kind.
fn other_relay(sents: &[Sent]) -> String {
    let mut first: HashMap<&str, (f64, usize)> = HashMap::new();
    for s in sents
        .iter()
        .filter(|s| matches!(s.kind, Kind::New | Kind::InFlightFirst))
    {
        let e = first.entry(s.req.guid.as_str()).or_insert((s.at, s.relay));
        if s.at < e.0 {
            *e = (s.at, s.relay);
        }
    }
    let mut by_kind: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for s in sents {
        let kind = match s.kind {
            Kind::Resend => "byte-identical",
            Kind::InFlightTwin => "in-flight twins",
            Kind::OtherAmount => "other-amount",
            Kind::New | Kind::InFlightFirst => continue,
        };
        let Some(&(_, relay)) = first.get(s.req.guid.as_str()) else {
            continue;
        };
        let e = by_kind.entry(kind).or_default();
        e.0 += usize::from(s.relay != relay);
        e.1 += 1;
    }
    let (n, m) = by_kind
        .values()
        .fold((0, 0), |(n, m), (a, b)| (n + a, m + b));
    let parts: Vec<String> = by_kind
        .iter()
        .map(|(k, (a, b))| format!("{k} {a} of {b}"))
        .collect();
    format!("{n} of {m} resends ({})", parts.join(", "))
}

/// How many requests went through the HTTP door, and how many resends went through another
/// door than their GUID's first send.
fn other_door(sents: &[Sent]) -> String {
    let mut first: HashMap<&str, (f64, bool)> = HashMap::new();
    for s in sents
        .iter()
        .filter(|s| matches!(s.kind, Kind::New | Kind::InFlightFirst))
    {
        let e = first.entry(s.req.guid.as_str()).or_insert((s.at, s.http));
        if s.at < e.0 {
            *e = (s.at, s.http);
        }
    }
    let (mut crossed, mut resends) = (0, 0);
    for s in sents
        .iter()
        .filter(|s| matches!(s.kind, Kind::Resend | Kind::OtherAmount))
    {
        if let Some(&(_, http)) = first.get(s.req.guid.as_str()) {
            resends += 1;
            crossed += usize::from(s.http != http);
        }
    }
    format!(
        "{} of {} requests; {crossed} of {resends} resends crossed doors",
        sents.iter().filter(|s| s.http).count(),
        sents.len()
    )
}

/// `k1 n1, k2 n2, …`.
fn joined<K: std::fmt::Display>(counts: &BTreeMap<K, usize>) -> String {
    counts
        .iter()
        .map(|(k, n)| format!("{k} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
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
