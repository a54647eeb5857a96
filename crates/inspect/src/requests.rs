//! `requests`: the settlement requests waiting for a second person (contract §12), oldest
//! first; `--all` the newest of every status. Read-only. `show GUID` lists a GUID's requests
//! with the same line.

use cli::{EXIT_SETTLED, outln as println};
use ledger::Db;
use ledger::settle_request::{Listed, SettleRequest};
use serde_json::json;

use crate::settle::change_line;
use crate::view::open;

/// The header of a request's line.
pub const HEADER: &str = "id\tguid\tchange\tmaker\tmade_at\texpires_at\tstatus\tchecker\t\
                          decided_at\treason\tdecision_reason";

/// One request, tab-separated, `-` for what it does not have yet.
pub fn line(r: &SettleRequest) -> String {
    let dash = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
    format!(
        "{}\t{}\t{} {}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}",
        r.id,
        r.guid,
        r.outcome,
        change_line(
            r.seen_state,
            r.to_state,
            &r.rsp_code,
            r.seen_attempts,
            r.min_age_secs
        ),
        r.maker,
        r.made_at,
        r.expires_at,
        r.status.as_str(),
        dash(&r.checker),
        dash(&r.decided_at),
        r.reason,
        dash(&r.decision_reason)
    )
}

/// `requests [--all] [--limit N]`.
pub fn requests(db: &Db, json: bool, all: bool, limit: u64) -> anyhow::Result<u8> {
    let ledger = open(db)?;
    let which = if all { Listed::All } else { Listed::Pending };
    let list = ledger.settle_requests(which, limit)?;
    if json {
        let v = json!({ "requests": list, "all": all, "limit": limit });
        return Ok(cli::print_object("inspect", v, EXIT_SETTLED));
    }
    if list.is_empty() {
        println!(
            "{}",
            if all {
                "no settlement requests"
            } else {
                "no pending settlement requests"
            }
        );
        return Ok(EXIT_SETTLED);
    }
    println!("{HEADER}");
    for r in &list {
        println!("{}", line(r));
    }
    Ok(EXIT_SETTLED)
}
