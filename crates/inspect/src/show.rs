//! `inspect show GUID`: one row with its stored request and reply decoded, its inquiries and
//! its history and its settlement requests (contract §12), as text or one JSON object; the
//! reply's view is also what `settle` shows.

use cli::{EXIT_FATAL, EXIT_SETTLED, outln as println};
use engine::batch::stored_transfer;
use ledger::Db;
use ledger::settle_request::Listed;
use ledger::state::HistoryRow;
use ledger::store::InquiryRecord;
use serde::Serialize;
use serde_json::json;
use wire::{self, Transfer};

use crate::view::{Opts, open};

/// A GUID's settlement requests `show` lists at most (the first ones): a row asked about this
/// often is a case for its ticket, not for a screen.
const REQUESTS_SHOWN: u64 = 100;

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
    let requests = ledger.settle_requests(Listed::Of(guid), REQUESTS_SHOWN)?;
    if row.is_none() && history.is_empty() && requests.is_empty() {
        let why = format!("no row and no history for GUID {guid:?}");
        return Ok(cli::refuse_run("inspect", &why, EXIT_FATAL));
    }
    let needs_operator = row
        .as_ref()
        .zip(inquiry.as_ref())
        .is_some_and(|(r, i)| ledger::rules::needs_operator(r.state, i, o.max_inquiries));
    let at_cap = row
        .as_ref()
        .is_some_and(|r| ledger::rules::at_attempt_cap(r, o.max_attempts));
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
            "settle_requests": requests,
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
    if !requests.is_empty() {
        println!("settlement requests:");
        println!("{}", crate::requests::HEADER);
        for r in &requests {
            println!("{}", crate::requests::line(r));
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
