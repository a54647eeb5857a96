//! The batch tools (contract §5): `resolve` settles what is in doubt by asking the core,
//! `reprocess` resends only what the ledger proves was never sent, `purge` forgets finished
//! rows. Each row is handled on its own: one odd row is reported and skipped, never fatal.

use std::fmt;

use log::{info, warn};
use serde::Serialize;

use crate::core_client::{CoreClient, Inquiry};
use crate::state::{Change, Row, State};
use crate::store::{Ledger, LedgerError, PURGE_CHUNK};
use crate::transfer::send_and_record;
use crate::wire::{self, Transfer};

/// Exit codes shared by the batch tools.
pub const EXIT_SETTLED: i32 = 0;
pub const EXIT_FATAL: i32 = 1;
pub const EXIT_USAGE: i32 = 2;
pub const EXIT_LEFT: i32 = 3;

/// A stored request the tools can use: present, valid, and for the row's own GUID (a
/// hand-made row could hold anything; sending it would book under another GUID).
fn stored_transfer(row: &Row) -> Result<(Transfer, &[u8]), String> {
    let req = row
        .request
        .as_deref()
        .ok_or_else(|| "no stored request".to_string())?;
    let t = wire::parse_request(req).map_err(|e| format!("stored request is invalid: {e}"))?;
    if t.guid != row.guid {
        return Err(format!("stored request is for guid {:?}", t.guid));
    }
    Ok((t, req))
}

/// A row as listed by `--dry-run`.
#[derive(Debug, Serialize)]
pub struct Listed {
    pub guid: String,
    pub state: &'static str,
    pub rsp_code: Option<String>,
    pub attempts: Option<i64>,
    pub updated_at: String,
}

impl Listed {
    pub fn of(row: &Row) -> Listed {
        Listed {
            guid: row.guid.clone(),
            state: row.state.as_str(),
            rsp_code: row.rsp_code.clone(),
            attempts: row.attempts,
            updated_at: row.updated_at.clone(),
        }
    }

    /// Tab-separated, `-` for NULL.
    pub fn line(&self) -> String {
        format!(
            "{}\t{}\t{}\t{}\t{}",
            self.guid,
            self.state,
            self.rsp_code.as_deref().unwrap_or("-"),
            self.attempts.map_or("-".to_string(), |a| a.to_string()),
            self.updated_at
        )
    }
}

/// What a tool prints: one summary line, or one JSON object.
pub trait Report: Serialize {
    fn line(&self) -> String;
    fn exit_code(&self) -> i32;
}

#[derive(Debug, Default, Serialize)]
pub struct ResolveSummary {
    pub examined: usize,
    pub done: usize,
    pub failed: usize,
    /// Inquiry failed: the UNKNOWN row is as it was.
    pub left: usize,
    /// Orphaned SENT rows whose inquiry failed, moved to UNKNOWN for a later run.
    pub sent_to_unknown: usize,
    /// Rows without a usable stored request, or whose update failed.
    pub skipped: usize,
    /// Rows another writer changed first (the relay, another resolve).
    pub raced: usize,
    /// The GUIDs not settled (left, moved to UNKNOWN, skipped), for the operator.
    pub unsettled: Vec<String>,
}

impl Report for ResolveSummary {
    fn line(&self) -> String {
        format!(
            "resolve: {} examined, {} DONE, {} FAILED, {} left (inquiry error), {} SENT->UNKNOWN, {} skipped, {} changed by another writer",
            self.examined,
            self.done,
            self.failed,
            self.left,
            self.sent_to_unknown,
            self.skipped,
            self.raced
        )
    }

    fn exit_code(&self) -> i32 {
        if self.left + self.sent_to_unknown + self.skipped == 0 {
            EXIT_SETTLED
        } else {
            EXIT_LEFT
        }
    }
}

/// resolve's selection: UNKNOWN rows at least `min_age_secs` old, then (with `stale_sent`)
/// SENT rows at least that old.
pub fn resolve_candidates(
    ledger: &Ledger,
    min_age_secs: u64,
    stale_sent: Option<u64>,
) -> Result<Vec<Row>, LedgerError> {
    let mut rows = ledger.select_aged(State::Unknown, min_age_secs)?;
    if let Some(secs) = stale_sent {
        rows.extend(ledger.select_aged(State::Sent, secs)?);
    }
    Ok(rows)
}

/// Why `resolve` stopped before changing any row.
#[derive(Debug)]
pub enum ResolveError {
    Ledger(LedgerError),
    /// The canary inquiry did not answer 200. `not_found`: the core (or whatever answers at
    /// this `--core` URL) says it never booked a transfer the ledger says it booked, so its
    /// 404s prove nothing; otherwise the inquiry failed (core down, a proxy's page).
    Canary {
        guid: String,
        why: String,
        not_found: bool,
    },
}

impl fmt::Display for ResolveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResolveError::Ledger(e) => e.fmt(f),
            ResolveError::Canary {
                guid,
                why,
                not_found: true,
            } => write!(
                f,
                "canary inquiry: GUID {guid} is booked (DONE/0000 in the ledger) but {why}; \
                 --core does not look like the core that booked it (path, environment?): no \
                 row changed"
            ),
            ResolveError::Canary { guid, why, .. } => write!(
                f,
                "canary inquiry about booked GUID {guid} failed ({why}): the core cannot be \
                 trusted to answer inquiries right now; no row changed"
            ),
        }
    }
}

impl std::error::Error for ResolveError {}

impl ResolveError {
    /// 1 when the settings look wrong (a ledger error, a core that does not know our
    /// bookings); 3 when the core just could not answer now and a later run may do the work.
    pub fn exit_code(&self) -> i32 {
        match self {
            ResolveError::Canary {
                not_found: false, ..
            } => EXIT_LEFT,
            _ => EXIT_FATAL,
        }
    }
}

impl From<LedgerError> for ResolveError {
    fn from(e: LedgerError) -> Self {
        ResolveError::Ledger(e)
    }
}

/// How many of the newest bookings the canary looks through for one whose GUID it may put in
/// a URL (a hand-made row may hold anything).
const CANARY_CANDIDATES: usize = 20;

/// Before any row is settled: the most recent GUID the ledger holds as booked (DONE/0000)
/// must be known to the core (inquiry answers 200). `Ok(None)`: the ledger has no booking
/// yet, so there is nothing to check against (the caller warns).
pub fn canary(ledger: &Ledger, core: &CoreClient) -> Result<Option<String>, ResolveError> {
    let Some(row) = ledger
        .recent_bookings(CANARY_CANDIDATES)?
        .into_iter()
        .find(|r| wire::valid_guid(r.guid.as_bytes()))
    else {
        return Ok(None);
    };
    let (why, not_found) = match core.inquire(&row.guid) {
        Inquiry::Booked(_) => return Ok(Some(row.guid)),
        Inquiry::NotFound => ("the inquiry answered 404 (never booked)".to_string(), true),
        Inquiry::Error(why) => (why, false),
    };
    Err(ResolveError::Canary {
        guid: row.guid,
        why,
        not_found,
    })
}

/// Settles UNKNOWN (and, with `stale_sent`, orphaned SENT) rows by inquiry. Never POSTs.
/// Every settlement names the state and the attempt it leaves, so a row that moved on (a
/// reprocess re-claimed it) is never settled by an inquiry about its earlier attempt.
pub fn resolve(
    ledger: &Ledger,
    core: &CoreClient,
    min_age_secs: u64,
    stale_sent: Option<u64>,
) -> Result<ResolveSummary, ResolveError> {
    if canary(ledger, core)?.is_none() {
        warn!("no booked transfer (DONE/0000) in the ledger to check the core's inquiry with");
    }
    let mut sum = ResolveSummary::default();
    for row in resolve_candidates(ledger, min_age_secs, stale_sent)? {
        sum.examined += 1;
        let from = row.state;
        let (_, req) = match stored_transfer(&row) {
            Ok(x) => x,
            Err(why) => {
                warn!("guid={} skipped: {why}", row.guid);
                sum.skipped += 1;
                sum.unsettled.push(row.guid.clone());
                continue;
            }
        };
        let (to, code, body, counter) = match core.inquire(&row.guid) {
            Inquiry::Booked(body) => (State::Done, wire::OK, Some(body), &mut sum.done),
            Inquiry::NotFound => (State::Failed, wire::E_NOT_SENT, None, &mut sum.failed),
            Inquiry::Error(why) if from == State::Sent => {
                warn!(
                    "guid={} inquiry failed, SENT moves to UNKNOWN: {why}",
                    row.guid
                );
                (
                    State::Unknown,
                    wire::E_UNKNOWN,
                    None,
                    &mut sum.sent_to_unknown,
                )
            }
            Inquiry::Error(why) => {
                warn!("guid={} left UNKNOWN: {why}", row.guid);
                sum.left += 1;
                sum.unsettled.push(row.guid.clone());
                continue;
            }
        };
        let change = Change {
            guid: row.guid.clone(),
            from,
            attempt: row.attempts,
            to,
            code,
            response: wire::reply_to(req, &code, body.as_ref()),
        };
        match ledger.transition(&change) {
            Ok(true) => {
                info!("guid={} {from} -> {to} ({})", row.guid, change.code_str());
                *counter += 1;
                if to == State::Unknown {
                    sum.unsettled.push(row.guid.clone());
                }
            }
            Ok(false) => {
                info!(
                    "guid={} was changed by another writer; left to it",
                    row.guid
                );
                sum.raced += 1;
            }
            Err(e) => {
                warn!("guid={} skipped: cannot record {to}: {e}", row.guid);
                sum.skipped += 1;
                sum.unsettled.push(row.guid.clone());
            }
        }
    }
    Ok(sum)
}

#[derive(Debug, Default, Serialize)]
pub struct ReprocessSummary {
    pub examined: usize,
    pub sent: usize,
    pub done: usize,
    /// Not sent again (the core is still unreachable): the run stops at the first one.
    pub failed: usize,
    pub unknown: usize,
    /// Not tried because the core was found unreachable earlier in this run.
    pub not_tried: usize,
    /// Rows without a usable stored request, or whose claim or result could not be written.
    pub skipped: usize,
    /// Rows another writer claimed first.
    pub raced: usize,
    /// The GUIDs not settled (FAILED again, UNKNOWN, not tried, skipped), for the operator.
    pub unsettled: Vec<String>,
}

impl Report for ReprocessSummary {
    fn line(&self) -> String {
        format!(
            "reprocess: {} examined, {} sent, {} DONE, {} FAILED, {} UNKNOWN, {} not tried (core unreachable), {} skipped, {} changed by another writer",
            self.examined,
            self.sent,
            self.done,
            self.failed,
            self.unknown,
            self.not_tried,
            self.skipped,
            self.raced
        )
    }

    fn exit_code(&self) -> i32 {
        if self.failed + self.unknown + self.not_tried + self.skipped == 0 {
            EXIT_SETTLED
        } else {
            EXIT_LEFT
        }
    }
}

/// Resends FAILED/E902 rows below `max_attempts`, each claimed by one guarded UPDATE first.
/// Stops sending at the first row that finds the core unreachable: the rest would only
/// burn an attempt each.
pub fn reprocess(
    ledger: &Ledger,
    core: &CoreClient,
    max_attempts: i64,
    limit: Option<u64>,
) -> Result<ReprocessSummary, LedgerError> {
    let mut sum = ReprocessSummary::default();
    let mut core_down = false;
    for row in ledger.select_resendable(max_attempts, limit)? {
        sum.examined += 1;
        if core_down {
            sum.not_tried += 1;
            sum.unsettled.push(row.guid.clone());
            continue;
        }
        let (t, req) = match stored_transfer(&row) {
            Ok(x) => x,
            Err(why) => {
                warn!("guid={} skipped: {why}", row.guid);
                sum.skipped += 1;
                sum.unsettled.push(row.guid.clone());
                continue;
            }
        };
        let attempt = match ledger.reclaim_for_resend(&row.guid, max_attempts) {
            Ok(Some(attempt)) => attempt,
            Ok(None) => {
                info!(
                    "guid={} was claimed by another writer; left to it",
                    row.guid
                );
                sum.raced += 1;
                continue;
            }
            Err(e) => {
                warn!("guid={} skipped: cannot claim: {e}", row.guid);
                sum.skipped += 1;
                sum.unsettled.push(row.guid.clone());
                continue;
            }
        };
        sum.sent += 1;
        let handled = send_and_record(ledger, core, &t, req, attempt);
        let code = String::from_utf8_lossy(&handled.code);
        info!("guid={} resent: {code}", row.guid);
        match handled.state {
            Some(State::Done) => sum.done += 1,
            Some(State::Failed) => {
                sum.failed += 1;
                core_down = true;
            }
            Some(State::Unknown) => sum.unknown += 1,
            _ => sum.skipped += 1,
        }
        if handled.state != Some(State::Done) {
            sum.unsettled.push(row.guid.clone());
        }
    }
    Ok(sum)
}

#[derive(Debug, Default, Serialize)]
pub struct PurgeSummary {
    pub days: u64,
    pub deleted: usize,
    /// Transactions it took, each deleting at most `PURGE_CHUNK` rows.
    pub chunks: usize,
}

impl Report for PurgeSummary {
    fn line(&self) -> String {
        format!(
            "purge: {} deleted (DONE rows older than {} days)",
            self.deleted, self.days
        )
    }

    fn exit_code(&self) -> i32 {
        EXIT_SETTLED
    }
}

/// Deletes DONE rows older than `days` in chunks of `PURGE_CHUNK`, each its own short
/// transaction, so that the relay's claims and results never wait behind one long DELETE.
pub fn purge(ledger: &Ledger, days: u64) -> Result<PurgeSummary, LedgerError> {
    let mut sum = PurgeSummary {
        days,
        ..PurgeSummary::default()
    };
    loop {
        let n = ledger.purge_chunk(days, PURGE_CHUNK)?;
        sum.deleted += n;
        sum.chunks += 1;
        if n < PURGE_CHUNK {
            return Ok(sum);
        }
    }
}

/// What `--dry-run` prints: the rows, then a line saying nothing was done.
#[derive(Debug, Serialize)]
pub struct DryRun {
    pub tool: &'static str,
    pub dry_run: bool,
    pub count: usize,
    pub rows: Vec<Listed>,
}

impl DryRun {
    pub fn new(tool: &'static str, rows: &[Row]) -> DryRun {
        DryRun {
            tool,
            dry_run: true,
            count: rows.len(),
            rows: rows.iter().map(Listed::of).collect(),
        }
    }
}

impl Report for DryRun {
    fn line(&self) -> String {
        let mut out = String::from("guid\tstate\trsp_code\tattempts\tupdated_at\n");
        for r in &self.rows {
            out.push_str(&r.line());
            out.push('\n');
        }
        out.push_str(&format!(
            "{}: dry run, {} rows selected, nothing sent or written",
            self.tool, self.count
        ));
        out
    }

    fn exit_code(&self) -> i32 {
        EXIT_SETTLED
    }
}

/// Prints a report as the tools do: the text, or with `json` one JSON object carrying the
/// tool's name and exit code. Returns the exit code.
pub fn print_report<R: Report>(tool: &str, report: &R, json: bool) -> i32 {
    let code = report.exit_code();
    if json {
        let mut v = serde_json::to_value(report).expect("plain struct serialises");
        if let Some(obj) = v.as_object_mut() {
            obj.insert("tool".into(), tool.into());
            obj.insert("exit_code".into(), code.into());
        }
        println!("{v}");
    } else {
        println!("{}", report.line());
    }
    code
}
