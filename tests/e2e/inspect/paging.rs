//! `inspect` pages through a ledger of any size: the listing without a command (every
//! state) and `list --state S` give a page (50 rows unless `--limit`), oldest change first by
//! `(updated_at, guid)`, and the cursor of the next page (`--after`); following the cursors
//! gives every row exactly once, in order, ties of `updated_at` and of several states
//! included. (`summary` and `list` on a million rows: `million`.)

use serde_json::{Value, json};

use super::inspect;
use crate::util::*;

/// Rows of three states, many sharing their `updated_at` (one transaction, one age), and on
/// PostgreSQL a second of rows whose microseconds run against their GUIDs' order: the key
/// is `updated_at` to the microsecond, which the rows show only to the second.
fn ledger_of_ties() -> Scene {
    let mut rows = Vec::new();
    for i in 0..7 {
        rows.push(
            RowSpec::new(&format!("G-P-D{i}"), State::Done)
                .code("0000")
                .age(DAY),
        );
    }
    for i in 0..3 {
        rows.push(RowSpec::new(&format!("G-P-F{i}"), State::Failed).age(DAY));
    }
    for i in 0..2 {
        rows.push(RowSpec::new(&format!("G-P-U{i}"), State::Unknown).age(2 * DAY));
    }
    for i in 0..4 {
        rows.push(RowSpec::new(&format!("G-P-M{i}"), State::Done).age(HOUR));
    }
    let s = Scene::new().rows(rows).build();
    by_hand(
        &s.db,
        "SELECT 1",
        "UPDATE tx SET updated_at = date_trunc('second', updated_at) \
             + (4 - substr(guid, 6)::int) * interval '1 microsecond' \
         WHERE guid LIKE 'G-P-M%'",
    );
    s
}

/// The rows in the order the pages must give them: oldest change first, then by GUID (on
/// PostgreSQL the G-P-M rows by their microseconds: M3, M2, M1, M0).
fn in_order(db: &TempLedger, state: Option<State>) -> Vec<String> {
    let mut rows: Vec<Row> = db
        .rows()
        .into_iter()
        .filter(|r| state.is_none_or(|s| r.state == s))
        .collect();
    rows.sort_by(|a, b| (&a.updated_at, &a.guid).cmp(&(&b.updated_at, &b.guid)));
    let mut guids: Vec<String> = rows.into_iter().map(|r| r.guid).collect();
    if db.backend() == Backend::Postgres {
        let m: Vec<usize> = (0..guids.len())
            .filter(|&i| guids[i].starts_with("G-P-M"))
            .collect();
        let mut ms: Vec<String> = m.iter().map(|&i| guids[i].clone()).collect();
        ms.reverse();
        for (i, g) in m.into_iter().zip(ms) {
            guids[i] = g;
        }
    }
    guids
}

fn guids(j: &Value) -> Vec<String> {
    j["rows"]
        .as_array()
        .unwrap_or_else(|| panic!("rows: {j}"))
        .iter()
        .map(|r| r["guid"].as_str().unwrap().to_string())
        .collect()
}

/// Follows `next` from `args` (with `--json`) to the last page: the pages' GUIDs.
fn follow(db: &TempLedger, args: &[&str]) -> Vec<Vec<String>> {
    let mut pages = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let mut a: Vec<&str> = args.to_vec();
        a.push("--json");
        if let Some(c) = &after {
            a.extend(["--after", c]);
        }
        let r = inspect(db, &a);
        r.expect_code(EXIT_SETTLED);
        let j = r.json();
        pages.push(guids(&j));
        match &j["next"] {
            Value::Null => return pages,
            Value::String(c) => after = Some(c.clone()),
            other => panic!("next: {other}"),
        }
        assert!(pages.len() < 20, "no end: {pages:?}");
    }
}

#[test]
fn the_listing_pages_through_every_state_each_row_once_in_order() {
    skip_if_unavailable!();
    let s = ledger_of_ties();
    let before = rows_by_guid(&s.db);
    let want = in_order(&s.db, None);
    assert_eq!(want.len(), 16);

    let pages = follow(&s.db, &["--limit", "5"]);
    let sizes: Vec<usize> = pages.iter().map(Vec::len).collect();
    assert_eq!(sizes, [5, 5, 5, 1], "{pages:?}");
    assert_eq!(pages.concat(), want);
    // A last page that is exactly full says there is no next one.
    let pages = follow(&s.db, &["--limit", "8"]);
    assert_eq!(pages.iter().map(Vec::len).collect::<Vec<_>>(), [8, 8]);
    assert_eq!(pages.concat(), want);
    // The default page holds them all: no next page.
    let j = inspect(&s.db, &["--json"]).json();
    assert_eq!(
        (guids(&j), &j["next"], &j["limit"]),
        (want.clone(), &json!(null), &json!(50))
    );

    // The text names the next page's command; run as printed, it gives the next page.
    let r = inspect(&s.db, &["--limit", "5"]);
    r.expect_code(EXIT_SETTLED);
    let l: Vec<&str> = r.stdout().lines().collect();
    assert_eq!(l[0], "guid\tstate\trsp_code\tattempts\tupdated_at");
    let first: Vec<&str> = l[1..6]
        .iter()
        .map(|x| x.split('\t').next().unwrap())
        .collect();
    assert_eq!(first, want[..5]);
    let next = l[6]
        .strip_prefix("next page: inspect ")
        .unwrap_or_else(|| panic!("{l:?}"));
    assert_eq!(l[7], "rows by state: 11 DONE, 3 FAILED, 2 UNKNOWN");
    let args: Vec<&str> = next.split(' ').collect();
    assert_eq!(args[..3], ["--limit", "5", "--after"], "{next}");
    let r = inspect(&s.db, &args);
    r.expect_code(EXIT_SETTLED);
    let second: Vec<&str> = r
        .stdout()
        .lines()
        .skip(1)
        .take(5)
        .map(|x| x.split('\t').next().unwrap())
        .collect();
    assert_eq!(second, want[5..10]);
    assert_eq!(rows_by_guid(&s.db), before, "nothing changed");
}

#[test]
fn list_pages_through_one_state_with_its_age_and_counts_them_all() {
    skip_if_unavailable!();
    let s = ledger_of_ties();
    let done = in_order(&s.db, Some(State::Done));
    assert_eq!(done.len(), 11);

    let pages = follow(&s.db, &["list", "--state", "DONE", "--limit", "4"]);
    assert_eq!(pages.iter().map(Vec::len).collect::<Vec<_>>(), [4, 4, 3]);
    assert_eq!(pages.concat(), done);
    // With --older-than: only the day-old rows, and the next page keeps the age.
    let pages = follow(
        &s.db,
        &[
            "list",
            "--state",
            "DONE",
            "--older-than",
            "2h",
            "--limit",
            "3",
        ],
    );
    assert_eq!(pages.concat(), done[..7]);

    let j = inspect(
        &s.db,
        &["list", "--state", "DONE", "--limit", "4", "--json"],
    )
    .json();
    assert_eq!(
        (&j["count"], &j["total"], &j["limit"], &j["after"]),
        (&json!(4), &json!(11), &json!(4), &json!(null)),
        "{j}"
    );
    let cursor = j["next"].as_str().expect("a next page").to_string();
    let j = inspect(
        &s.db,
        &[
            "list", "--state", "DONE", "--limit", "4", "--after", &cursor, "--json",
        ],
    )
    .json();
    assert_eq!((&j["count"], &j["total"]), (&json!(4), &json!(11)), "{j}");
    assert_eq!(j["after"], json!(cursor));
    assert_eq!(guids(&j), done[4..8]);

    let r = inspect(
        &s.db,
        &[
            "list",
            "--state",
            "DONE",
            "--older-than",
            "2h",
            "--limit",
            "3",
        ],
    );
    r.expect_code(EXIT_SETTLED);
    let l: Vec<&str> = r.stdout().lines().collect();
    assert_eq!(l.len(), 6, "{l:?}");
    assert_eq!(
        l[4],
        "list: 3 of 7 DONE rows unchanged for at least 2h, oldest first"
    );
    let next = l[5]
        .strip_prefix("next page: inspect ")
        .unwrap_or_else(|| panic!("{l:?}"));
    let args: Vec<&str> = next.split(' ').collect();
    assert_eq!(
        args[..8],
        [
            "list",
            "--state",
            "DONE",
            "--older-than",
            "7200s",
            "--limit",
            "3",
            "--after"
        ]
    );
    let r = inspect(&s.db, &args);
    r.expect_code(EXIT_SETTLED);
    let l: Vec<&str> = r.stdout().lines().collect();
    let page: Vec<&str> = l[1..4]
        .iter()
        .map(|x| x.split('\t').next().unwrap())
        .collect();
    assert_eq!(page, done[3..6]);
    assert_eq!(
        l[4],
        format!(
            "list: 3 of 7 DONE rows unchanged for at least 2h, oldest first, after {}",
            args[8]
        )
    );
}

#[test]
fn a_cursor_that_is_not_one_or_paging_flags_out_of_place_are_usage_errors() {
    skip_if_unavailable!();
    let s = ledger_of_ties();
    for args in [
        &["--after", "no-comma"][..],
        &["--after", "a b,G"][..],
        &["list", "--state", "DONE", "--after", "%zz,G"][..],
        &["--after", "x,G", "--guid", "G-P-D0"][..],
        &["--after", "x,G", "summary"][..],
        &["--limit", "5", "list", "--state", "DONE"][..],
        &["--limit", "0"][..],
    ] {
        let r = inspect(&s.db, args);
        r.expect_code(EXIT_USAGE);
        let flag = if args.contains(&"--after") {
            "--after"
        } else {
            "--limit"
        };
        assert!(r.stderr().contains(flag), "{args:?}: {}", r.stderr());
    }
}
