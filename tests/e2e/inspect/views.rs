//! `inspect summary`, `list` and `show` on a ledger the relay wrote against the core
//! simulator (booked, rejected, outcome unknown with and without a booking), plus rows an
//! operator must look at, made by hand: FAILED/E902 at reprocess's attempt cap, a SENT row
//! left by a relay that died, an UNKNOWN row resolve gave up on. Read-only: nothing changes.

use serde_json::{Value, json};

use super::inspect;
use crate::util::*;

/// The ledger every view test reads, and the core that booked what it says is booked.
fn ledger_to_look_at() -> Scene {
    let s = Scene::new()
        .core(&[])
        .relay(&[])
        .rows([
            RowSpec::unknown(&msg("G-V-GIVEN-UP", 7, "")).age(DAY),
            RowSpec::failed(&msg("G-V-CAP", 8, ""))
                .attempts(3)
                .age(HOUR),
            RowSpec::failed(&msg("G-V-RETRY", 9, "")).age(MINUTE),
            RowSpec::sent(&msg("G-V-SENT", 10, "")).age(OLD),
            RowSpec::new("G-V-JUNK", State::Done)
                .code("0000")
                .request(b"junk")
                .age(DAY),
        ])
        .build();
    assert_code(&s.call(&msg("G-V-OK", 5, "rent")), "0000");
    assert_code(&s.call(&msg("G-V-REJ", 6, "REJECT")), "B001");
    assert_code(&s.call(&msg("G-V-DROP", 11, "DROP")), "E901");
    assert_code(&s.call(&msg("G-V-500", 12, "FAIL500")), "E901");
    // resolve gives up on G-V-GIVEN-UP: every inquiry about it answers with a booking no
    // reply can carry, and one failure is all --max-inquiries 1 allows.
    s.core().book_unrepresentable("G-V-GIVEN-UP");
    s.resolve(&["--min-age", "60", "--max-inquiries", "1"])
        .expect_code(EXIT_LEFT);
    assert_eq!(inquiry_failures(&s.db, "G-V-GIVEN-UP"), Some(1));
    s
}

fn lines(r: &Run) -> Vec<&str> {
    r.stdout().lines().collect()
}

/// Asserts that a line of `r`'s stdout starts with `prefix`.
#[track_caller]
fn assert_line(r: &Run, prefix: &str) {
    assert!(
        r.stdout().lines().any(|l| l.starts_with(prefix)),
        "no line starting {prefix:?} in:\n{}",
        r.stdout()
    );
}

#[test]
fn summary_counts_and_the_rows_that_want_an_operator() {
    skip_if_unavailable!();
    let s = ledger_to_look_at();
    let before = rows_by_guid(&s.db);

    let r = inspect(&s.db, &["summary", "--max-inquiries", "1"]);
    r.expect_code(EXIT_SETTLED);
    assert_eq!(
        lines(&r)[0],
        "rows by state: 3 DONE, 2 FAILED, 1 SENT, 3 UNKNOWN"
    );
    assert_line(
        &r,
        "oldest UNKNOWN: G-V-GIVEN-UP (rsp_code E901, attempts 1), unchanged for 1d (",
    );
    assert_line(
        &r,
        "oldest SENT: G-V-SENT (rsp_code -, attempts 1), unchanged for 2m",
    );
    assert_line(
        &r,
        "oldest FAILED: G-V-CAP (rsp_code E902, attempts 3), unchanged for 1h (",
    );
    assert_line(
        &r,
        "at the attempt cap (FAILED/E902 with 3 or more attempts; reprocess no longer resends \
         them): 1",
    );
    assert_line(&r, "  G-V-CAP (attempts 3, since ");
    assert_line(
        &r,
        "given up by resolve (1 or more failed inquiries; need an operator): 1",
    );
    assert_line(
        &r,
        "  needs operator: G-V-GIVEN-UP (1 inquiries failed; resolve no longer asks; last error: ",
    );

    let r = inspect(&s.db, &["summary", "--json", "--max-inquiries", "1"]);
    r.expect_code(EXIT_SETTLED);
    let j = r.json();
    assert_eq!(
        j["by_state"],
        json!({"DONE": 3, "FAILED": 2, "SENT": 1, "UNKNOWN": 3})
    );
    let age = |state: &str| j["oldest"][state]["age_secs"].as_u64().unwrap_or(0);
    assert_eq!(j["oldest"]["UNKNOWN"]["guid"], "G-V-GIVEN-UP", "{j}");
    assert!((DAY..DAY + 60).contains(&age("UNKNOWN")), "{j}");
    assert_eq!(j["oldest"]["SENT"]["guid"], "G-V-SENT", "{j}");
    assert!((OLD..OLD + 60).contains(&age("SENT")), "{j}");
    assert_eq!(j["oldest"]["FAILED"]["guid"], "G-V-CAP", "{j}");
    assert!((HOUR..HOUR + 60).contains(&age("FAILED")), "{j}");
    assert_eq!(j["max_attempts"], 3);
    let guids = |v: &Value| -> Vec<String> {
        v.as_array()
            .unwrap_or_else(|| panic!("an array: {v}"))
            .iter()
            .map(|r| r["guid"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    assert_eq!(guids(&j["at_attempt_cap"]), ["G-V-CAP"]);
    assert_eq!(guids(&j["needs_operator"]), ["G-V-GIVEN-UP"]);
    assert_eq!(j["needs_operator"][0]["failures"], 1);

    // The caps are the tools': as resolve's and reprocess's are set (flag or environment).
    let r = Run::with_env(
        "inspect",
        &["--db", s.db.arg(), "summary", "--json"],
        &[("INSPECT_MAX_ATTEMPTS", "4")],
    );
    r.expect_code(EXIT_SETTLED);
    let j = r.json();
    assert_eq!(j["at_attempt_cap"], json!([]), "{j}");
    assert_eq!(j["needs_operator"], json!([]), "the default is 20: {j}");
    let r = inspect(&s.db, &["summary", "--json", "--max-attempts", "1"]);
    assert_eq!(guids(&r.json()["at_attempt_cap"]), ["G-V-CAP", "G-V-RETRY"]);

    // The listing names them too: every one, or only the --guid asked about.
    let j = inspect(&s.db, &["--json", "--max-inquiries", "1"]).json();
    assert_eq!(guids(&j["needs_operator"]), ["G-V-GIVEN-UP"], "{j}");
    assert_eq!(j["needs_operator_count"], 1, "{j}");
    for (guid, want) in [("G-V-GIVEN-UP", &["G-V-GIVEN-UP"][..]), ("G-V-OK", &[][..])] {
        let args = ["--guid", guid, "--json", "--max-inquiries", "1"];
        let j = inspect(&s.db, &args).json();
        assert_eq!(guids(&j["needs_operator"]), want, "{guid}: {j}");
        assert_eq!(j["needs_operator_count"], want.len(), "{guid}: {j}");
        assert_eq!(
            (&j["limit"], &j["next"]),
            (&Value::Null, &Value::Null),
            "{j}"
        );
    }
    let r = inspect(&s.db, &["--guid", "G-V-GIVEN-UP", "--max-inquiries", "2"]);
    assert!(!r.stdout().contains("needs operator"), "{}", r.stdout());
    let r = inspect(&s.db, &["--guid", "G-V-GIVEN-UP", "--max-inquiries", "1"]);
    assert_line(&r, "needs operator: G-V-GIVEN-UP (1 inquiries failed; ");

    assert_eq!(rows_by_guid(&s.db), before, "nothing changed");
}

#[test]
fn summary_of_an_empty_ledger() {
    skip_if_unavailable!();
    let s = Scene::new().core(&[]).relay(&[]).build();
    let r = inspect(&s.db, &["summary"]);
    r.expect_code(EXIT_SETTLED);
    assert_eq!(
        r.stdout(),
        "rows by state: none\n\
         oldest UNKNOWN: none\n\
         oldest SENT: none\n\
         oldest FAILED: none\n\
         at the attempt cap (FAILED/E902 with 3 or more attempts; reprocess no longer resends \
         them): 0\n\
         given up by resolve (20 or more failed inquiries; need an operator): 0\n\
         settlement requests pending a second person: 0\n"
    );
    let j = inspect(&s.db, &["summary", "--json"]).json();
    assert_eq!(
        j["oldest"],
        json!({"UNKNOWN": null, "SENT": null, "FAILED": null})
    );
    assert_eq!(
        j["settle_requests"],
        json!({"pending": 0, "oldest_pending_secs": null, "expired": 0})
    );
}

#[test]
fn list_one_state_oldest_first_by_age_and_limit() {
    skip_if_unavailable!();
    let s = ledger_to_look_at();
    let before = rows_by_guid(&s.db);

    let r = inspect(&s.db, &["list", "--state", "UNKNOWN"]);
    r.expect_code(EXIT_SETTLED);
    let l = lines(&r);
    assert_eq!(l[0], "guid\tstate\trsp_code\tattempts\tupdated_at");
    assert!(
        l[1].starts_with("G-V-GIVEN-UP\tUNKNOWN\tE901\t1\t"),
        "{l:?}"
    );
    let mut rest: Vec<&str> = l[2..4]
        .iter()
        .map(|x| x.split('\t').next().unwrap())
        .collect();
    rest.sort();
    assert_eq!(rest, ["G-V-500", "G-V-DROP"]);
    assert_eq!(l[4], "list: 3 of 3 UNKNOWN rows, oldest first");
    assert_eq!(l.len(), 5);

    let r = inspect(&s.db, &["list", "--state", "unknown", "--older-than", "1h"]);
    r.expect_code(EXIT_SETTLED);
    let l = lines(&r);
    assert_eq!(l.len(), 3, "{l:?}");
    assert!(l[1].starts_with("G-V-GIVEN-UP\t"), "{l:?}");
    assert_eq!(
        l[2],
        "list: 1 of 1 UNKNOWN rows unchanged for at least 1h, oldest first"
    );

    let r = inspect(
        &s.db,
        &["list", "--state", "FAILED", "--older-than", "30m", "--json"],
    );
    r.expect_code(EXIT_SETTLED);
    let j = r.json();
    assert_eq!(
        (&j["count"], &j["total"], &j["older_than_secs"], &j["state"]),
        (&json!(1), &json!(1), &json!(1800), &json!("FAILED")),
        "{j}"
    );
    assert_eq!(j["rows"][0]["guid"], "G-V-CAP");
    assert_eq!(j["rows"][0]["attempts"], 3);

    let j = inspect(
        &s.db,
        &["list", "--state", "UNKNOWN", "--limit", "2", "--json"],
    )
    .json();
    assert_eq!((&j["count"], &j["total"]), (&json!(2), &json!(3)), "{j}");
    assert_eq!(j["rows"][0]["guid"], "G-V-GIVEN-UP");

    let j = inspect(
        &s.db,
        &["list", "--state", "SENT", "--older-than", "90s", "--json"],
    )
    .json();
    assert_eq!(j["rows"][0]["guid"], "G-V-SENT", "{j}");
    let j = inspect(
        &s.db,
        &["list", "--state", "SENT", "--older-than", "1d", "--json"],
    )
    .json();
    assert_eq!(j["rows"], json!([]), "{j}");

    for (args, flag) in [
        (&["list"][..], "--state"),
        (&["list", "--state", "LOST"][..], "--state"),
        (
            &["list", "--state", "UNKNOWN", "--older-than", "15"][..],
            "--older-than",
        ),
        (
            &["list", "--state", "UNKNOWN", "--older-than", "soon"][..],
            "--older-than",
        ),
        (
            &["list", "--state", "UNKNOWN", "--limit", "0"][..],
            "--limit",
        ),
    ] {
        let r = inspect(&s.db, args);
        r.expect_code(EXIT_USAGE);
        assert!(r.stderr().contains(flag), "{args:?}: {}", r.stderr());
    }
    assert_eq!(rows_by_guid(&s.db), before, "nothing changed");
}

#[test]
fn show_decodes_the_request_and_the_reply_and_gives_the_history() {
    skip_if_unavailable!();
    let s = ledger_to_look_at();
    let before = rows_by_guid(&s.db);

    let booking = s.core().inquiry("G-V-OK").expect("booked");
    let core_ref = booking["core_ref"].as_str().unwrap();
    let row = s.db.row("G-V-OK").unwrap();
    let booked_at = wire_booked_at(row.response.as_deref().unwrap());
    let r = inspect(&s.db, &["show", "G-V-OK"]);
    r.expect_code(EXIT_SETTLED);
    let want_head = format!(
        "guid:       G-V-OK\n\
         state:      DONE\n\
         rsp_code:   0000\n\
         attempts:   1\n\
         updated_at: {} UTC\n\
         channel:    - (anonymous, or made by hand)\n\
         request:    from 00000000000001 to 00000000000002 amount 5 memo \"rent\"\n\
         reply:      0000 core_ref {core_ref} amount 5 booked_at {booked_at} (",
        row.updated_at
    );
    assert!(
        r.stdout().starts_with(&want_head),
        "want:\n{want_head}\ngot:\n{}",
        r.stdout()
    );
    assert!(
        r.stdout()
            .contains("history:\nat\tfrom\tto\trsp_code\tattempts\tchannel\twho\treason\n"),
        "{}",
        r.stdout()
    );
    let history: Vec<&str> = r
        .stdout()
        .lines()
        .skip_while(|l| !l.starts_with("at\t"))
        .skip(1)
        .map(|l| l.split_once('\t').expect("at, then the rest").1)
        .collect();
    assert_eq!(
        history,
        [
            "(new)\tSENT\t-\t1\t-\trelay\t-",
            "SENT\tDONE\t0000\t1\t-\trelay\t-"
        ]
    );

    let r = inspect(&s.db, &["show", "G-V-REJ"]);
    r.expect_code(EXIT_SETTLED);
    assert_line(&r, "reply:      B001 (header only)");
    assert_line(
        &r,
        "request:    from 00000000000001 to 00000000000002 amount 6 memo \"REJECT\"",
    );

    let r = inspect(&s.db, &["show", "G-V-JUNK"]);
    r.expect_code(EXIT_SETTLED);
    assert_line(&r, "request:    unusable: stored request is invalid");
    assert_line(&r, "reply:      none stored");

    let r = inspect(&s.db, &["show", "G-V-CAP"]);
    assert_line(
        &r,
        "note:       at the attempt cap: reprocess no longer resends it",
    );

    // --json, with the GUID resolve gave up on.
    let r = inspect(
        &s.db,
        &["show", "G-V-GIVEN-UP", "--json", "--max-inquiries", "1"],
    );
    r.expect_code(EXIT_SETTLED);
    let j = r.json();
    assert_eq!(j["row"]["state"], "UNKNOWN", "{j}");
    assert_eq!(
        j["request"],
        json!({"from_account": "00000000000001", "to_account": "00000000000002",
               "amount": 7, "memo": ""})
    );
    assert_eq!(j["reply"], Value::Null, "a hand-made row without a reply");
    assert_eq!(j["inquiry"]["failures"], 1);
    assert_eq!(j["needs_operator"], true);
    assert_eq!(j["history"][0]["who"], "sql", "inserted by hand: {j}");
    let r = inspect(&s.db, &["show", "G-V-GIVEN-UP", "--max-inquiries", "1"]);
    assert_line(&r, "inquiries:  1 failed, the last: ");
    assert_line(
        &r,
        "note:       needs an operator: resolve no longer asks about it",
    );

    let j = inspect(&s.db, &["show", "G-V-DROP", "--json"]).json();
    assert_eq!(
        j["reply"],
        json!({"code": "E901", "core_ref": null, "amount": null,
                                  "booked_at": null})
    );

    // A GUID the ledger knows nothing of.
    let r = inspect(&s.db, &["show", "G-V-NEVER"]);
    r.expect_code(EXIT_FATAL);
    assert_eq!(r.stdout(), "");
    assert_eq!(r.stderr().lines().count(), 1, "{}", r.stderr());
    assert!(r.stderr().contains("G-V-NEVER"), "{}", r.stderr());

    assert_eq!(rows_by_guid(&s.db), before, "nothing changed");
}

/// The booked_at field (`YYYYMMDDhhmmss`) of a `0000` reply.
fn wire_booked_at(reply: &[u8]) -> String {
    wire::parse_reply(reply)
        .expect("a reply")
        .booking
        .expect("a booking")
        .booked_at
}

/// What `r` printed, less the ages (`summary`'s oldest rows), which grow between runs.
fn timeless(r: &Run) -> String {
    match serde_json::from_str::<Value>(r.stdout()) {
        Ok(mut j) => {
            if let Some(o) = j.as_object_mut() {
                o.remove("oldest");
            }
            j.to_string()
        }
        Err(_) => r
            .stdout()
            .lines()
            .filter(|l| !l.starts_with("oldest "))
            .collect::<Vec<_>>()
            .join("\n"),
    }
}

#[test]
fn db_before_or_after_the_command_or_from_the_environment() {
    skip_if_unavailable!();
    let s = ledger_to_look_at();
    let d = s.db.arg();
    for (before, after) in [
        (&["summary"][..], &["summary", "--json"][..]),
        (
            &["list", "--state", "FAILED"][..],
            &["list", "--state", "FAILED", "--json"][..],
        ),
        (&["show", "G-V-OK"][..], &["show", "G-V-OK", "--json"][..]),
    ] {
        for args in [before, after] {
            let first = tool("inspect", &[&["--db", d][..], args].concat());
            first.expect_code(EXIT_SETTLED);
            let last = tool("inspect", &[args, &["--db", d][..]].concat());
            last.expect_code(EXIT_SETTLED);
            assert_eq!(timeless(&first), timeless(&last), "{args:?}");
            let env = Run::with_env("inspect", args, &[("INSPECT_DB", d)]);
            env.expect_code(EXIT_SETTLED);
            assert_eq!(timeless(&first), timeless(&env), "{args:?} with INSPECT_DB");
        }
    }
    // Without a command, as before.
    let r = tool("inspect", &["--guid", "G-V-OK", "--db", d]);
    r.expect_code(EXIT_SETTLED);
    assert!(
        r.stdout().contains("G-V-OK\tDONE\t0000\t1\t"),
        "{}",
        r.stdout()
    );
    // No ledger at all, and --guid with a command: usage errors.
    let r = Run::new("inspect", &["summary"]);
    r.expect_code(EXIT_USAGE);
    assert!(r.stderr().contains("--db"), "{}", r.stderr());
    let r = tool("inspect", &["--db", d, "--guid", "G-V-OK", "summary"]);
    r.expect_code(EXIT_USAGE);
    assert!(r.stderr().contains("--guid"), "{}", r.stderr());
}
