//! The read-only commands: the listing without a command, `summary`, `list`, `show`. Each
//! opens the ledger read-only (no pragma, no schema change) and exits 0 once it could read
//! it. Its `println!` is `cli::outln!`: a reader that has gone (`| head -1`) ends it quietly.

use cli::{EXIT_SETTLED, Listed, outln as println};
use engine::batch::NeedsOperator;
use ledger::page::{Counted, Cursor, Page, PageQuery};
use ledger::settle_request::Undecided;
use ledger::{Access, Db, State, Store};
use serde::Serialize;
use serde_json::json;

use crate::duration::human;

/// What every view is told by the global flags.
pub struct Opts {
    pub json: bool,
    pub max_inquiries: u32,
    pub max_attempts: i64,
}

pub(crate) fn open(db: &Db) -> anyhow::Result<std::sync::Arc<dyn Store>> {
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
            let state = page.rows.first().map(|r| r.state);
            let first: Vec<_> = ledger
                .inquiry_record(g)?
                .filter(|i| {
                    state.is_some_and(|s| ledger::rules::needs_operator(s, i, o.max_inquiries))
                })
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
    let undecided = ledger.undecided_settle_requests()?;
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
            "settle_requests": undecided,
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
    println!("{}", undecided_line(&undecided));
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

/// Settlement requests waiting for a second person (`inspect requests`), and those that
/// expired undecided (each a GUID someone asked to settle and nobody did).
fn undecided_line(u: &Undecided) -> String {
    let oldest = u.oldest_pending_secs.map_or(String::new(), |s| {
        let s = s.round() as u64;
        format!(", the oldest made {} ago ({s} s)", human(s))
    });
    let mut line = format!(
        "settlement requests pending a second person: {}{oldest}",
        u.pending
    );
    if u.expired > 0 {
        line.push_str(&format!(
            "; {} expired undecided (the GUID is still in doubt: close with `inspect reject`, \
             and ask again)",
            u.expired
        ));
    }
    line
}
