//! Check `(i)`: the workspace's `reconcile` over the ledger and the core's booking journal
//! (CONTRACT §10), run once the run has settled. Its `--json` report is read here; every
//! break (double, ghost, mismatch, missing) is a violation, and so is a `pending` GUID:
//! the only rows a settled run leaves UNKNOWN are FAIL500's, which the core never books, so
//! reconcile never sees them; a booked GUID whose row is still UNKNOWN/SENT/RECEIVED is a
//! row the settling should have made DONE (check `(f)` says the same from the ledger's side).

use serde::Deserialize;
use serde_json::Value;

use super::{Checks, I};

/// GUIDs per class, as reconcile counts them.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Counts {
    pub double: u64,
    pub ghost: u64,
    pub pending: u64,
    pub matched: u64,
    pub mismatch: u64,
    pub missing: u64,
}

impl Counts {
    /// Every GUID reconcile classified.
    pub fn total(&self) -> u64 {
        self.double + self.ghost + self.pending + self.matched + self.mismatch + self.missing
    }
}

/// One break as reconcile reports it: its class, its GUID, and both sides as printed.
#[derive(Debug, Clone, PartialEq)]
pub struct Break {
    pub class: String,
    pub guid: String,
    /// The journal's bookings and the ledger's row, compact JSON.
    pub sides: String,
}

/// What one reconcile run said.
#[derive(Debug, Clone, PartialEq)]
pub struct Reconciled {
    /// `[from, to)` as reconcile printed it.
    pub window: String,
    pub counts: Counts,
    pub breaks: Vec<Break>,
    pub exit_code: Option<u64>,
}

/// Reads reconcile's `--json` output (one object; the last non-empty line is taken).
pub fn parse(stdout: &str) -> Result<Reconciled, String> {
    let line = stdout
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .ok_or("no output")?;
    let v: Value = serde_json::from_str(line).map_err(|e| format!("not JSON ({e}): {line}"))?;
    if v["tool"] != "reconcile" {
        return Err(format!("not reconcile's report: {line}"));
    }
    if let Some(e) = v["error"].as_str() {
        return Err(format!("reconcile failed: {e}"));
    }
    let counts = Counts::deserialize(&v["counts"]).map_err(|e| format!("counts: {e}"))?;
    let breaks = v["breaks"]
        .as_array()
        .ok_or("no breaks array")?
        .iter()
        .map(|b| {
            Ok(Break {
                class: b["class"].as_str().ok_or("a break without class")?.into(),
                guid: b["guid"].as_str().ok_or("a break without guid")?.into(),
                sides: format!("journal {}; ledger {}", b["journal"], b["ledger"]),
            })
        })
        .collect::<Result<Vec<_>, &str>>()?;
    let window = format!(
        "[{}, {})",
        v["window"]["from"].as_str().unwrap_or("?"),
        v["window"]["to"].as_str().unwrap_or("?")
    );
    Ok(Reconciled {
        window,
        counts,
        breaks,
        exit_code: v["exit_code"].as_u64(),
    })
}

/// Check `(i)` from one reconcile run (or why it could not be read): one case per GUID it
/// classified; a violation per break, per pending GUID, and for a report that disagrees with
/// itself (counts against breaks listed, exit code).
pub fn reconciled(c: &mut Checks, got: &Result<Reconciled, String>) {
    let r = match got {
        Ok(r) => r,
        Err(e) => {
            c.case(I);
            c.fail(I, "-", format!("reconcile: {e}"));
            return;
        }
    };
    for _ in 0..r.counts.total() {
        c.case(I);
    }
    for b in &r.breaks {
        c.fail(I, &b.guid, format!("reconcile {}: {}", b.class, b.sides));
    }
    let k = &r.counts;
    let breaks = k.double + k.ghost + k.mismatch + k.missing;
    if breaks != r.breaks.len() as u64 {
        c.fail(
            I,
            "-",
            format!(
                "reconcile counted {breaks} breaks but listed {}",
                r.breaks.len()
            ),
        );
    }
    let expected_exit = u64::from(breaks > 0);
    if r.exit_code != Some(expected_exit) {
        c.fail(
            I,
            "-",
            format!(
                "reconcile exited {:?} with {breaks} breaks (expected {expected_exit})",
                r.exit_code
            ),
        );
    }
    if k.pending > 0 {
        c.fail(
            I,
            "-",
            format!(
                "reconcile: {} GUIDs pending (booked, row not DONE) after settling",
                k.pending
            ),
        );
    }
}
