//! `inspect settle`: an operator asks to settle one GUID in doubt on evidence from outside
//! the relay, and another person carries it out (`inspect approve`, contract §12). `--booked`
//! makes it DONE/0000 with the reply resolve would have built from the booking (a resend then
//! gets exactly that reply, and resolve leaves the row alone); `--not-booked` makes it
//! FAILED/E902 only while the core's inquiry answers 404 (then reprocess books it, once),
//! unless `--force`, and only for a row unchanged for `--min-age` (300 s by default). Only
//! from UNKNOWN, or SENT unchanged for the stale-sent floor; one guarded statement;
//! `--dry-run` writes nothing; the history names both people and the reason.
//!
//! What the tests share is here; the tests, by what they settle: `booked`, `not_booked`,
//! which rows (`rows`), how old a row must be for `--not-booked` (`min_age`), `--dry-run`
//! and the flags (`usage`), and the two people (`two_people`: the maker refused, by the tool
//! and by the ledger, a row changed in between, expiry, rejection, the identity that no flag
//! or variable changes).

// Paths relative to this file's folder, as in `inspect.rs`.
#[path = "settle/booked.rs"]
mod booked;
#[path = "settle/forged.rs"]
mod forged;
#[path = "settle/min_age.rs"]
mod min_age;
#[path = "settle/not_booked.rs"]
mod not_booked;
#[path = "settle/operator_rights.rs"]
mod operator_rights;
#[path = "settle/rows.rs"]
mod rows;
#[path = "settle/two_people.rs"]
mod two_people;
#[path = "settle/usage.rs"]
mod usage;

use ledger::state::HistoryRow;
use serde_json::{Value, json};
use testkit::second_person::{REQUIRE_ENV, SecondPerson};

use super::inspect;
use crate::util::*;

/// `--booked` flags for the core's booking JSON `b`.
fn booked_flags(b: &Value) -> Vec<String> {
    vec![
        "--booked".into(),
        "--core-ref".into(),
        b["core_ref"].as_str().expect("core_ref").into(),
        "--amount".into(),
        b["amount"].as_u64().expect("amount").to_string(),
        "--booked-at".into(),
        b["booked_at"].as_str().expect("booked_at").into(),
    ]
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// The second person of this test's ledger (see `testkit::second_person`), or the test
/// returns: where there is none here, it says why once (a failure under
/// `REQUIRE_SECOND_PERSON`, as CI runs).
macro_rules! second_person {
    ($db:expr) => {
        match second_person_of($db) {
            Some(p) => p,
            None => return,
        }
    };
}
use second_person;

fn second_person_of(db: &TempLedger) -> Option<SecondPerson> {
    match SecondPerson::of(db) {
        Ok(p) => Some(p),
        Err(why) if std::env::var_os(REQUIRE_ENV).is_some() => {
            panic!("no second person here ({} is set): {why}", REQUIRE_ENV)
        }
        Err(why) => {
            static SAID: std::sync::Once = std::sync::Once::new();
            SAID.call_once(|| eprintln!("dual-control tests do not run here: {why}"));
            None
        }
    }
}

/// Who the tests run as, as the ledger names a maker: the system's user on SQLite, the URL's
/// role on PostgreSQL.
fn first_person(db: &TempLedger) -> String {
    db.store().identity().expect("the ledger's identity")
}

/// `inspect --db DB settle GUID ARGS… --reason R`: a request, made by the first person.
fn request(db: &TempLedger, guid: &str, args: &[&str], reason: &str) -> Run {
    inspect(
        db,
        &[&["settle", guid][..], args, &["--reason", reason]].concat(),
    )
}

/// `inspect approve ID ARGS…` (or any `inspect` command) run by the second person `p`.
fn as_second(p: &SecondPerson, args: &[&str]) -> Run {
    let mut cmd = p.command("inspect");
    cmd.args(["--db", p.db_arg()])
        .args(args)
        .env("RUST_LOG", "info");
    Run::command(cmd, std::time::Duration::from_secs(60))
}

/// `as_second` with `env` set too.
fn as_second_with_env(p: &SecondPerson, args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut cmd = p.command("inspect");
    cmd.args(["--db", p.db_arg()])
        .args(args)
        .env("RUST_LOG", "info")
        .envs(env.iter().copied());
    Run::command(cmd, std::time::Duration::from_secs(60))
}

/// The reason the history gives the approval by `p` of request `id` (`outcome`, made by the
/// first person with `reason`), `approval` being what the approval added: both people, and
/// when the request was made (as the ledger holds it).
fn approved_reason(
    db: &TempLedger,
    p: &SecondPerson,
    id: i64,
    outcome: &str,
    reason: &str,
    approval: Option<&str>,
) -> String {
    let made = db
        .store()
        .settle_request(id)
        .expect("read the request")
        .unwrap_or_else(|| panic!("no request {id}"));
    let mut s = format!(
        "settlement request {id} ({outcome}) made by {} at {}, approved by {}: {reason}",
        first_person(db),
        made.made_at,
        p.name
    );
    if let Some(a) = approval {
        s.push_str("; approval: ");
        s.push_str(a);
    }
    s
}

/// The id of the request a `settle` run made (its text or its JSON).
fn request_id(r: &Run) -> i64 {
    if let Ok(j) = serde_json::from_str::<Value>(r.stdout()) {
        return j["request"].as_i64().expect("a request id in the JSON");
    }
    let head = r.stdout().lines().next().unwrap_or_default();
    head.split(": request ")
        .nth(1)
        .and_then(|rest| rest.split(':').next())
        .and_then(|id| id.parse().ok())
        .unwrap_or_else(|| panic!("no request id in: {}", r.stdout()))
}

/// A settlement by two people: the first asks (`settle GUID ARGS… --reason R`), the second
/// approves (`approve ID`, with the `--core …` and `--json` of ARGS). The request's run if it
/// was refused or a dry run, else the approval's.
fn settle(db: &TempLedger, p: &SecondPerson, guid: &str, args: &[&str], reason: &str) -> Run {
    let asked = request(db, guid, args, reason);
    if asked.code != Some(EXIT_SETTLED.into()) || args.contains(&"--dry-run") {
        return asked;
    }
    let id = request_id(&asked).to_string();
    let mut approve = vec!["approve", id.as_str()];
    let mut rest = args.iter();
    while let Some(a) = rest.next() {
        match *a {
            "--core" => approve.extend(["--core", rest.next().expect("--core's value")]),
            "--json" => approve.push("--json"),
            _ => {}
        }
    }
    as_second(p, &approve)
}

/// A transfer the scene's core booked and the ledger holds as DONE/0000, a day old: what
/// the canary of `settle --not-booked` asks about.
fn booked_canary(s: &Scene, guid: &str) {
    let m = msg(guid, 1, "");
    s.core().book(&m);
    s.put(RowSpec::of(&m, State::Done).code("0000").age(DAY));
}

fn history(db: &TempLedger, guid: &str) -> Vec<HistoryRow> {
    db.store().history(guid).expect("read the history")
}

/// A refusal: exit 1, one line on stderr naming the GUID and `why`, nothing on stdout.
#[track_caller]
fn assert_refused(r: &Run, guid: &str, why: &str) {
    r.expect_code(EXIT_FATAL);
    let err = r.stderr();
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(
        err.contains(&format!("settle {guid}: refused: ")) && err.contains(why),
        "{why:?} in: {err}"
    );
    assert!(err.contains("nothing written"), "{err}");
    assert_eq!(r.stdout(), "");
}
