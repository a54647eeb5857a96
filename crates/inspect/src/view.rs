//! The read-only commands: the listing without a command, `summary`, `list`, `show`. Each
//! opens the ledger read-only (no pragma, no schema change) and exits 0 once it could read
//! it. Its `println!` is `cli::outln!`: a reader that has gone (`| head -1`) ends it quietly.

use cli::{EXIT_FATAL, EXIT_SETTLED, Listed, outln as println};
use engine::batch::{NeedsOperator, stored_transfer};
use ledger::page::{Counted, Cursor, Page, PageQuery};
use ledger::state::HistoryRow;
use ledger::store::InquiryRecord;
use ledger::{Access, Db, State, Store};
use serde::Serialize;
use serde_json::json;
use wire::{self, Transfer};

use crate::duration::human;

/// What every view is told by the global flags.
pub struct Opts {
    pub json: bool,
    pub max_inquiries: u32,
    pub max_attempts: i64,
}

fn open(db: &Db) -> anyhow::Result<std::sync::Arc<dyn Store>> {
    Ok(db.open(Access::ReadOnly, "inspect")?)
}

fn by_state_json(counts: &[(State, i64)]) -> serde_json::Map<String, serde_json::Value> {
    counts
        .iter()
        .map(|(s, n)| (s.as_str().to_string(), (*n).into()))
        .collect()
}

fn by_state_line(counts: &[(State, i64)]) -> String {
    let counts: Vec<String> = counts.iter().map(|(s, n)| format!("{n} {s}")).collect();
    format!(
        "rows by state: {}",
        if counts.is_empty() {
            "none".into()
        } else {
            counts.join(", ")
        }
    )
}

fn needs_operator_line(n: &NeedsOperator) -> String {
    format!(
        "needs operator: {} ({} inquiries failed; resolve no longer asks; last error: {})",
        n.guid,
        n.failures,
        n.last_error.as_deref().unwrap_or("-")
    )
}

/// What a listing pages through: without a command every state, with `list` one.
pub struct Paging {
    pub limit: u64,
    pub after: Option<Cursor>,
}

/// How many of the rows an operator must look at (at the attempt cap, given up by resolve)
/// the views list; the counts count them all.
pub const LISTED_AT_MOST: u64 = 20;

/// The line that says how many more there are than were listed, if any.
fn more_line(c: &Counted<impl Sized>) -> Option<String> {
    let more = c.total - c.first.len() as i64;
    (more > 0).then(|| format!("  and {more} more (the first {} listed)", c.first.len()))
}

/// Without a command: a page of rows (every state, oldest change first; or one GUID), counts
/// by state, GUIDs that need an operator.
pub fn listing(db: &Db, o: &Opts, guid: Option<&str>, paging: &Paging) -> anyhow::Result<u8> {
    let ledger = open(db)?;
    let page = match guid {
        Some(g) => Page {
            rows: ledger.read(g)?.into_iter().collect(),
            next: None,
        },
        None => ledger.page(&PageQuery {
            state: None,
            older_than_secs: None,
            after: paging.after.clone(),
            limit: paging.limit,
        })?,
    };
    let listed: Vec<Listed> = page.rows.iter().map(Listed::of).collect();
    let counts = ledger.count_by_state()?;
    let given_up = match guid {
        // One GUID's record, if resolve gave up on it (still in doubt, enough failures).
        Some(g) => {
            let in_doubt = page
                .rows
                .first()
                .is_some_and(|r| matches!(r.state, State::Unknown | State::Sent));
            let first: Vec<_> = ledger
                .inquiry_record(g)?
                .filter(|r| in_doubt && r.failures >= i64::from(o.max_inquiries))
                .into_iter()
                .collect();
            Counted {
                total: first.len() as i64,
                first,
            }
        }
        None => ledger.needs_operator_first(o.max_inquiries, LISTED_AT_MOST)?,
    };
    let needs_operator: Vec<NeedsOperator> = given_up
        .first
        .iter()
        .cloned()
        .map(NeedsOperator::from)
        .collect();
    let next = page.next.as_ref().map(Cursor::to_string);
    if o.json {
        let v = json!({
            "rows": listed,
            "limit": guid.map_or(Some(paging.limit), |_| None),
            "next": next,
            "by_state": by_state_json(&counts),
            "needs_operator": needs_operator,
            "needs_operator_count": given_up.total,
        });
        return Ok(cli::print_object("inspect", v, EXIT_SETTLED));
    }
    println!("{}", Listed::HEADER);
    for l in &listed {
        println!("{}", l.line());
    }
    if let Some(next) = &next {
        println!("next page: inspect --limit {} --after {next}", paging.limit);
    }
    println!("{}", by_state_line(&counts));
    for n in &needs_operator {
        println!("{}", needs_operator_line(n));
    }
    if let Some(more) = more_line(&given_up) {
        println!("{more}");
    }
    Ok(EXIT_SETTLED)
}

/// The oldest row of one state, as `summary` shows it.
#[derive(Serialize)]
struct Oldest {
    guid: String,
    rsp_code: Option<String>,
    attempts: Option<i64>,
    updated_at: String,
    /// Seconds since it last changed, by the database's clock.
    age_secs: u64,
}

/// The states whose oldest row an operator watches: in doubt, in flight, not sent.
const WATCHED: [State; 3] = [State::Unknown, State::Sent, State::Failed];

/// `summary`: counts, the oldest UNKNOWN/SENT/FAILED rows and their ages, rows at the attempt
/// cap, GUIDs resolve gave up on. Counts and the first rows of the index, never every row.
pub fn summary(db: &Db, o: &Opts) -> anyhow::Result<u8> {
    let ledger = open(db)?;
    let counts = ledger.count_by_state()?;
    let mut oldest: Vec<(State, Option<Oldest>)> = Vec::new();
    for state in WATCHED {
        // The age by the database's clock; the row itself is the first of its state, oldest
        // change first (the same order `updated_at` gives the age).
        let age = ledger.oldest_age_secs(state)?;
        let row = ledger
            .state_page(state, None, None, 1)?
            .into_iter()
            .next()
            .map(|(_, r)| r);
        oldest.push((
            state,
            row.zip(age).map(|(r, age)| Oldest {
                guid: r.guid,
                rsp_code: r.rsp_code,
                attempts: r.attempts,
                updated_at: r.updated_at,
                age_secs: age.max(0.0).round() as u64,
            }),
        ));
    }
    let capped = ledger.at_attempt_cap(o.max_attempts, LISTED_AT_MOST)?;
    let given_up = ledger.needs_operator_first(o.max_inquiries, LISTED_AT_MOST)?;
    let needs_operator: Vec<NeedsOperator> = given_up
        .first
        .iter()
        .cloned()
        .map(NeedsOperator::from)
        .collect();
    if o.json {
        let oldest: serde_json::Map<_, _> = oldest
            .iter()
            .map(|(s, r)| (s.as_str().to_string(), json!(r)))
            .collect();
        let v = json!({
            "by_state": by_state_json(&counts),
            "oldest": oldest,
            "max_attempts": o.max_attempts,
            "at_attempt_cap": capped.first.iter().map(Listed::of).collect::<Vec<_>>(),
            "at_attempt_cap_count": capped.total,
            "max_inquiries": o.max_inquiries,
            "needs_operator": needs_operator,
            "needs_operator_count": given_up.total,
            "listed_at_most": LISTED_AT_MOST,
        });
        return Ok(cli::print_object("inspect", v, EXIT_SETTLED));
    }
    println!("{}", by_state_line(&counts));
    for (state, r) in &oldest {
        match r {
            None => println!("oldest {state}: none"),
            Some(r) => println!(
                "oldest {state}: {} (rsp_code {}, attempts {}), unchanged for {} ({} s, since {} UTC)",
                r.guid,
                r.rsp_code.as_deref().unwrap_or("-"),
                r.attempts.map_or("-".into(), |a| a.to_string()),
                human(r.age_secs),
                r.age_secs,
                r.updated_at
            ),
        }
    }
    println!(
        "at the attempt cap (FAILED/E902 with {} or more attempts; reprocess no longer resends \
         them): {}",
        o.max_attempts, capped.total
    );
    for r in &capped.first {
        println!(
            "  {} (attempts {}, since {} UTC)",
            r.guid,
            r.attempts.unwrap_or_default(),
            r.updated_at
        );
    }
    if let Some(more) = more_line(&capped) {
        println!("{more}");
    }
    println!(
        "given up by resolve ({} or more failed inquiries; need an operator): {}",
        o.max_inquiries, given_up.total
    );
    for n in &needs_operator {
        println!("  {}", needs_operator_line(n));
    }
    if let Some(more) = more_line(&given_up) {
        println!("{more}");
    }
    Ok(EXIT_SETTLED)
}

/// `list --state S [--older-than D] [--limit N] [--after CURSOR]`: a page, oldest first.
pub fn list(
    db: &Db,
    o: &Opts,
    state: State,
    older_than: Option<u64>,
    paging: &Paging,
) -> anyhow::Result<u8> {
    let ledger = open(db)?;
    let page = ledger.page(&PageQuery {
        state: Some(state),
        older_than_secs: older_than,
        after: paging.after.clone(),
        limit: paging.limit,
    })?;
    let total = ledger.count_aged(state, older_than)?;
    let listed: Vec<Listed> = page.rows.iter().map(Listed::of).collect();
    let next = page.next.as_ref().map(Cursor::to_string);
    let after = paging.after.as_ref().map(Cursor::to_string);
    if o.json {
        let v = json!({
            "state": state,
            "older_than_secs": older_than,
            "limit": paging.limit,
            "after": after,
            "count": listed.len(),
            "total": total,
            "rows": listed,
            "next": next,
        });
        return Ok(cli::print_object("inspect", v, EXIT_SETTLED));
    }
    println!("{}", Listed::HEADER);
    for l in &listed {
        println!("{}", l.line());
    }
    let age = older_than.map_or(String::new(), |s| {
        format!(" unchanged for at least {}", human(s))
    });
    let from = after.map_or(String::new(), |a| format!(", after {a}"));
    println!(
        "list: {} of {total} {state} rows{age}, oldest first{from}",
        listed.len()
    );
    if let Some(next) = &next {
        let age = older_than.map_or(String::new(), |s| format!(" --older-than {s}s"));
        println!(
            "next page: inspect list --state {state}{age} --limit {} --after {next}",
            paging.limit
        );
    }
    Ok(EXIT_SETTLED)
}

/// A stored request, decoded.
#[derive(Serialize)]
pub struct RequestView {
    pub from_account: String,
    pub to_account: String,
    pub amount: u64,
    pub memo: String,
}

impl From<Transfer> for RequestView {
    fn from(t: Transfer) -> RequestView {
        RequestView {
            from_account: t.from_account,
            to_account: t.to_account,
            amount: t.amount,
            memo: t.memo,
        }
    }
}

/// A stored reply, decoded: its code and, for `0000`, the booking it carries.
#[derive(Serialize)]
pub struct ReplyView {
    pub code: String,
    pub core_ref: Option<String>,
    pub amount: Option<u64>,
    /// `YYYYMMDDhhmmss`, UTC, as the reply carries it.
    pub booked_at: Option<String>,
}

impl ReplyView {
    pub fn of(reply: &[u8]) -> Result<ReplyView, String> {
        let r = wire::parse_reply(reply)?;
        let b = r.booking;
        Ok(ReplyView {
            code: r.code,
            core_ref: b.as_ref().map(|b| b.core_ref.clone()),
            amount: b.as_ref().map(|b| b.amount),
            booked_at: b.map(|b| b.booked_at),
        })
    }

    pub fn line(&self) -> String {
        match (&self.core_ref, self.amount, &self.booked_at) {
            (Some(r), Some(a), Some(t)) => format!(
                "{} core_ref {r} amount {a} booked_at {t} ({})",
                self.code,
                rfc3339_of_reply_time(t)
            ),
            _ => format!("{} (header only)", self.code),
        }
    }
}

/// `YYYYMMDDhhmmss` as `YYYY-MM-DDThh:mm:ssZ` (the form `settle --booked-at` takes); as it
/// is if it is not 14 digits.
pub fn rfc3339_of_reply_time(t: &str) -> String {
    wire::booked_at_rfc3339(t).unwrap_or_else(|| t.to_string())
}

fn or_dash<T: ToString>(v: &Option<T>) -> String {
    v.as_ref().map_or("-".into(), T::to_string)
}

/// `show GUID`: the row, its request and reply decoded, its failed inquiries, its history.
/// Exit 1 when the ledger knows nothing of the GUID (no row, no history).
pub fn show(db: &Db, o: &Opts, guid: &str) -> anyhow::Result<u8> {
    let ledger = open(db)?;
    let row = ledger.read(guid)?;
    // A ledger from before the history (opened as it is) has no history table.
    let (history, history_error) = match ledger.history(guid) {
        Ok(h) => (h, None),
        Err(e) => (Vec::new(), Some(e.to_string())),
    };
    let inquiry: Option<InquiryRecord> = ledger.inquiry_record(guid)?;
    if row.is_none() && history.is_empty() {
        let why = format!("no row and no history for GUID {guid:?}");
        return Ok(cli::refuse_run("inspect", &why, EXIT_FATAL));
    }
    let in_doubt = row
        .as_ref()
        .is_some_and(|r| matches!(r.state, State::Unknown | State::Sent));
    let needs_operator = in_doubt
        && inquiry
            .as_ref()
            .is_some_and(|r| r.failures >= i64::from(o.max_inquiries));
    let at_cap = row.as_ref().is_some_and(|r| {
        r.state == State::Failed
            && r.rsp_code.as_deref() == Some("E902")
            && r.attempts.is_some_and(|a| a >= o.max_attempts)
    });
    let request = row
        .as_ref()
        .filter(|r| r.request.is_some())
        .map(|r| stored_transfer(r).map(|(t, _)| RequestView::from(t)));
    let reply = row
        .as_ref()
        .and_then(|r| r.response.as_deref())
        .map(ReplyView::of);
    if o.json {
        let v = json!({
            "guid": guid,
            "row": row.as_ref().map(|r| json!({
                "tx_code": r.tx_code,
                "state": r.state,
                "rsp_code": r.rsp_code,
                "attempts": r.attempts,
                "updated_at": r.updated_at,
                "channel": r.channel,
            })),
            "request": result(&request),
            "reply": result(&reply),
            "inquiry": inquiry,
            "needs_operator": needs_operator,
            "at_attempt_cap": at_cap,
            "history": history,
            "history_error": history_error,
        });
        return Ok(cli::print_object("inspect", v, EXIT_SETTLED));
    }
    println!("guid:       {guid}");
    match &row {
        None => println!("row:        none (purged, or deleted by hand); the history follows"),
        Some(r) => {
            println!("state:      {}", r.state);
            println!("rsp_code:   {}", or_dash(&r.rsp_code));
            println!("attempts:   {}", or_dash(&r.attempts));
            println!("updated_at: {} UTC", r.updated_at);
            println!(
                "channel:    {}",
                r.channel
                    .as_deref()
                    .unwrap_or("- (anonymous, or made by hand)")
            );
        }
    }
    match &request {
        None if row.is_some() => println!("request:    none stored"),
        None => {}
        Some(Ok(t)) => println!(
            "request:    from {} to {} amount {} memo {:?}",
            t.from_account, t.to_account, t.amount, t.memo
        ),
        Some(Err(e)) => println!("request:    unusable: {e}"),
    }
    match &reply {
        None if row.is_some() => println!("reply:      none stored"),
        None => {}
        Some(Ok(r)) => println!("reply:      {}", r.line()),
        Some(Err(e)) => println!("reply:      unusable: {e}"),
    }
    if let Some(i) = &inquiry {
        println!(
            "inquiries:  {} failed, the last: {}; next not before {} UTC",
            i.failures,
            i.last_error.as_deref().unwrap_or("-"),
            i.next_at
        );
    }
    if needs_operator {
        println!(
            "note:       needs an operator: resolve no longer asks about it (--max-inquiries {})",
            o.max_inquiries
        );
    }
    if at_cap {
        println!(
            "note:       at the attempt cap: reprocess no longer resends it (--max-attempts {})",
            o.max_attempts
        );
    }
    match history_error {
        Some(e) => println!("history:    cannot be read: {e}"),
        None if history.is_empty() => println!("history:    none recorded"),
        None => {
            println!("history:");
            println!("at\tfrom\tto\trsp_code\tattempts\tchannel\twho\treason");
            for h in &history {
                println!("{}", history_line(h));
            }
        }
    }
    Ok(EXIT_SETTLED)
}

/// A decoded value as `--json` shows it: null, the value, or `{"error": why}`.
fn result<T: Serialize>(r: &Option<Result<T, String>>) -> serde_json::Value {
    match r {
        None => serde_json::Value::Null,
        Some(Ok(v)) => json!(v),
        Some(Err(e)) => json!({ "error": e }),
    }
}

/// One history row, tab-separated: `-` for NULL, `(new)`/`(deleted)` for the ends.
fn history_line(h: &HistoryRow) -> String {
    format!(
        "{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}",
        h.at,
        h.from_state.as_deref().unwrap_or("(new)"),
        h.to_state.as_deref().unwrap_or("(deleted)"),
        or_dash(&h.rsp_code),
        or_dash(&h.attempts),
        or_dash(&h.channel),
        h.who,
        h.reason.as_deref().unwrap_or("-")
    )
}
