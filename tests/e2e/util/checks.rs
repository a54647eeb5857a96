//! Assertions several test modules make about a row against the core's bookings, and about
//! a tool's `--json` summary.

use ledger::State;
use serde_json::Value;
use testkit::TempLedger;
use wire::{self, E_NOT_SENT, OK};

use super::EXIT_FATAL;
use super::coresim::Core;
use super::messages::{booked_reply, guid_of, short};
use super::process::Run;
use super::scene::Scene;

/// Asserts a DONE/0000 row whose stored reply is the one the relay would have built from
/// `m` and the core's (first) booking of its GUID; returns that reply.
pub fn assert_done_as_booked(db: &TempLedger, core: &Core, m: &[u8]) -> Vec<u8> {
    let guid = guid_of(m);
    let row = db.row(&guid).unwrap_or_else(|| panic!("no row {guid}"));
    assert_eq!(
        (row.state, row.rsp_code.as_deref()),
        (State::Done, Some("0000")),
        "{guid}"
    );
    assert_eq!(row.request.as_deref(), Some(m), "{guid}: request unchanged");
    let booking = core
        .inquiry(&guid)
        .unwrap_or_else(|| panic!("{guid} not booked"));
    let response = row.response.expect("a stored reply");
    assert_eq!(response.len(), 90, "{guid}");
    assert_eq!(&response[..45], &short(m, &OK)[..], "{guid}: header");
    assert_eq!(
        String::from_utf8_lossy(&response),
        String::from_utf8_lossy(&booked_reply(m, &booking)),
        "{guid}: body from the core's booking"
    );
    let parsed = wire::parse_reply(&response)
        .expect("a valid reply")
        .booking
        .expect("a booking");
    assert_eq!(
        parsed.amount,
        wire::parse_request(m).expect("a valid request").amount
    );
    response
}

/// Asserts the row is DONE/0000 on its first attempt, holding `reply`, which is the reply
/// built from `m` and the core's (only) booking of its GUID.
pub fn assert_done_with(db: &TempLedger, core: &Core, m: &[u8], reply: &[u8]) {
    let guid = guid_of(m);
    let booking = core
        .inquiry(&guid)
        .unwrap_or_else(|| panic!("{guid} not booked"));
    assert_eq!(
        String::from_utf8_lossy(reply),
        String::from_utf8_lossy(&booked_reply(m, &booking)),
        "{guid}: the reply carries the core's booking"
    );
    let row = db.row(&guid).unwrap_or_else(|| panic!("no row {guid}"));
    assert_eq!(
        (row.state, row.rsp_code.as_deref(), row.attempts),
        (State::Done, Some("0000"), Some(1)),
        "{guid}"
    );
    assert_eq!(row.request.as_deref(), Some(m), "{guid}: request unchanged");
    assert_eq!(row.response.as_deref(), Some(reply), "{guid}: reply stored");
}

/// Asserts a FAILED/E902 row on attempt `attempts`, with the 45-byte E902 reply stored.
pub fn assert_failed_e902(db: &TempLedger, m: &[u8], attempts: i64) {
    assert_settled_short(db, m, State::Failed, &E_NOT_SENT, attempts);
}

/// Asserts a row in `state` with the header-only reply for `code` stored, on attempt
/// `attempts`.
pub fn assert_settled_short(
    db: &TempLedger,
    m: &[u8],
    state: State,
    code: &wire::Code,
    attempts: i64,
) {
    let guid = guid_of(m);
    let row = db.row(&guid).unwrap_or_else(|| panic!("no row {guid}"));
    let code_str = String::from_utf8_lossy(code);
    assert_eq!(
        (row.state, row.rsp_code.as_deref(), row.attempts),
        (state, Some(&*code_str), Some(attempts)),
        "{guid}"
    );
    assert_eq!(row.response.as_deref(), Some(&short(m, code)[..]), "{guid}");
}

/// Asserts the numbers of a `--json` summary, showing the whole object on a mismatch.
pub fn assert_counts(j: &Value, want: &[(&str, u64)]) {
    let got: Vec<(&str, Option<u64>)> = want.iter().map(|(k, _)| (*k, j[*k].as_u64())).collect();
    let want: Vec<(&str, Option<u64>)> = want.iter().map(|(k, v)| (*k, Some(*v))).collect();
    assert_eq!(got, want, "{j}");
}

/// Runs a batch tool (`run`: `Scene::resolve` or `Scene::reprocess`) with `args` and
/// `--parallel 1 --json` on one scene and with `--parallel 8 --json` on another, both built
/// by `scene`; asserts that both exit `code` and print the same summary. Returns the summary
/// and the two scenes (one at a time, eight at once).
pub fn same_summary_one_or_eight_at_once(
    scene: impl Fn() -> Scene,
    run: impl Fn(&Scene, &[&str]) -> Run,
    args: &[&str],
    code: u8,
) -> (Value, Scene, Scene) {
    let runs: Vec<(Value, Scene)> = ["1", "8"]
        .into_iter()
        .map(|k| {
            let s = scene();
            let r = run(&s, &[args, &["--parallel", k, "--json"]].concat());
            r.expect_code(code);
            (r.json(), s)
        })
        .collect();
    let [(j1, one), (j8, many)]: [(Value, Scene); 2] =
        runs.try_into().unwrap_or_else(|_| unreachable!());
    assert_eq!(j1, j8, "the same summary, one at a time or eight at once");
    (j8, one, many)
}

/// Asserts that `backup` refused a PostgreSQL ledger: exit 2, one line pointing to the
/// database's own tools.
pub fn assert_backup_refused_postgres(r: &Run) {
    r.expect_code(super::EXIT_USAGE);
    let err = r.stderr().trim_end();
    assert!(!err.contains('\n'), "one line: {err}");
    assert!(
        err.contains("pg_dump") && err.contains("pg_basebackup"),
        "{err}"
    );
}

/// Whether a log line of `text` is about `guid` (its `guid=` field) and says `what`.
pub fn line_about(text: &str, guid: &str, what: &str) -> bool {
    let field = format!("guid={guid}");
    text.lines()
        .any(|l| l.contains(what) && l.split([' ', ']']).any(|w| w == field))
}

/// A failed run's stdout: with `--json`, one JSON object `{"error","exit","exit_code","tool"}`
/// naming `exit`; without, nothing.
pub fn assert_stdout_for_failure(r: &Run, json: bool, exit: u8) {
    if !json {
        assert_eq!(r.stdout(), "", "{:?}: nothing on stdout", r.argv);
        return;
    }
    assert_eq!(
        r.stdout().lines().count(),
        1,
        "{:?}: {}",
        r.argv,
        r.stdout()
    );
    let v: serde_json::Value = serde_json::from_str(r.stdout()).expect("one JSON object");
    assert_eq!(v["exit"], exit, "{v}");
    assert!(v["error"].as_str().is_some_and(|e| !e.is_empty()), "{v}");
}

/// Asserts that `r` failed with exit 1, nothing on stdout (no `listening on`) and one line on
/// stderr holding every one of `want`.
#[track_caller]
pub fn one_line_refusal(r: &Run, want: &[&str]) {
    r.expect_code(EXIT_FATAL);
    assert_eq!(r.stdout(), "", "nothing on stdout (no `listening on`)");
    assert_eq!(r.stderr().lines().count(), 1, "one line: {}", r.stderr());
    for w in want {
        assert!(r.stderr().contains(w), "{w:?} in {}", r.stderr());
    }
}

/// Asserts that `r` (a run of `tool` with `--json`) exited `exit` and printed exactly one JSON
/// object on stdout, one line, naming the tool and that exit code (`exit_code`), as every run
/// with `--json` does, a failed one included; returns it.
#[track_caller]
pub fn assert_one_json_object(r: &Run, tool: &str, exit: u8) -> Value {
    r.expect_code(exit);
    let out = r.stdout();
    assert_eq!(out.lines().count(), 1, "{:?}: one line: {out:?}", r.argv);
    let v: Value = serde_json::from_str(out)
        .unwrap_or_else(|e| panic!("{:?}: not one JSON object ({e}): {out:?}", r.argv));
    assert!(v.is_object(), "{:?}: {v}", r.argv);
    assert_eq!(v["tool"], tool, "{:?}: {v}", r.argv);
    assert_eq!(v["exit_code"], exit, "{:?}: {v}", r.argv);
    v
}
