//! `inspect recovery` (contract §11): whether the ledger is recovering and since when, one
//! line or one JSON object; `--begin --since T` marks it so (an older mark's instant is kept),
//! `--end` ends it, each written to the ledger's events with `operator:` and the system's name
//! of the user running it (never a flag), and the reason. A bad flag is exit 2 naming it, with
//! nothing written; a ledger from before the mark's table reads as not recovering.

use serde_json::{Value, json};

use super::inspect;
use crate::util::*;

/// The user this test runs as, as the history names people (`cli::identity`): the tool it
/// starts inherits the same login and user ids.
fn me() -> String {
    format!("operator:{}", ledger::identity::operator())
}

/// `inspect recovery --json`, exit 0.
fn mark(db: &TempLedger) -> Value {
    let r = inspect(db, &["recovery", "--json"]);
    r.expect_code(EXIT_SETTLED);
    r.json()
}

/// The ledger's events, as the view lists them: (who, event, detail).
fn events(db: &TempLedger) -> Vec<(String, String, String)> {
    mark(db)["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| {
            let s = |k: &str| e[k].as_str().unwrap_or_default().to_string();
            (s("who"), s("event"), s("detail"))
        })
        .collect()
}

/// Asserts that `who`, as the events list it, names the user running the test. (On
/// PostgreSQL the view adds the database role when it is not the same name.)
#[track_caller]
fn assert_by_me(who: &str) {
    let me = me();
    assert!(
        who == me || who.starts_with(&format!("{me} (database role ")),
        "{who:?} is not {me:?}"
    );
}

#[test]
fn a_ledger_not_recovering_says_so_in_one_line_and_in_json() {
    skip_if_unavailable!();
    let db = temp_ledger();
    db.create();
    let r = inspect(&db, &["recovery"]);
    r.expect_code(EXIT_SETTLED);
    assert_eq!(r.stdout(), "not recovering\nledger events: none recorded\n");
    let j = mark(&db);
    assert_eq!(
        (&j["recovering"], &j["since"], &j["events"]),
        (&json!(false), &Value::Null, &json!([])),
        "{j}"
    );
    // --db after the command, as for the other commands.
    let r = tool("inspect", &["recovery", "--db", db.arg()]);
    r.expect_code(EXIT_SETTLED);
    assert!(r.stdout().starts_with("not recovering\n"), "{}", r.stdout());
}

#[test]
fn begin_marks_the_ledger_recovering_and_names_the_operator() {
    skip_if_unavailable!();
    let db = temp_ledger();
    db.create();
    // An offset is taken, and stored in UTC.
    let r = inspect(
        &db,
        &[
            "recovery",
            "--begin",
            "--since",
            "2026-03-01T10:57:03+01:00",
            "--reason",
            "PITR INC-7",
        ],
    );
    r.expect_code(EXIT_SETTLED);
    let out = r.stdout();
    assert!(
        out.starts_with(&format!(
            "recovery begun: recovering since 2026-03-01T09:57:03Z (marked by {} at ",
            me()
        )),
        "{out}"
    );
    assert_eq!(
        out.lines().count(),
        1,
        "no note: nothing older was kept: {out}"
    );

    // A second look, read-only, sees the mark.
    let j = mark(&db);
    assert_eq!(
        (&j["recovering"], &j["since"], &j["who"]),
        (&json!(true), &json!("2026-03-01T09:57:03Z"), &json!(me())),
        "{j}"
    );
    assert!(j["at"].as_str().is_some_and(|a| a.ends_with('Z')), "{j}");
    let r = inspect(&db, &["recovery"]);
    r.expect_code(EXIT_SETTLED);
    let first = r.stdout().lines().next().unwrap_or_default();
    assert!(
        first.starts_with("recovering since 2026-03-01T09:57:03Z (marked by operator:"),
        "{}",
        r.stdout()
    );
    assert!(
        r.stdout().contains("\nat\twho\tevent\tdetail\n")
            && r.stdout()
                .contains("\trecovery begun\trecovering since 2026-03-01T09:57:03Z: PITR INC-7\n"),
        "{}",
        r.stdout()
    );
    // What the relay and reprocess read: the ledger's own mark.
    let m = db
        .store()
        .recovery()
        .expect("read the mark")
        .expect("a mark");
    assert_eq!(
        (m.since.as_str(), m.who.as_str()),
        ("2026-03-01T09:57:03Z", me().as_str())
    );

    let ev = events(&db);
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert_by_me(&ev[0].0);
    assert_eq!(
        (ev[0].1.as_str(), ev[0].2.as_str()),
        (
            "recovery begun",
            "recovering since 2026-03-01T09:57:03Z: PITR INC-7"
        )
    );
}

#[test]
fn begin_again_keeps_the_older_instant_and_says_so() {
    skip_if_unavailable!();
    let db = temp_ledger();
    db.create();
    let begin = |since: &str, extra: &[&str]| {
        let r = inspect(
            &db,
            &[&["recovery", "--begin", "--since", since][..], extra].concat(),
        );
        r.expect_code(EXIT_SETTLED);
        r
    };
    begin("2026-03-01T09:00:00Z", &[]);
    // A later instant: the ledger may have forgotten claims since the older one still.
    let r = begin("2026-03-01T12:00:00Z", &[]);
    let out = r.stdout();
    assert!(
        out.starts_with("recovery begun: recovering since 2026-03-01T09:00:00Z (marked by "),
        "{out}"
    );
    assert!(
        out.contains(
            "\nnote: the ledger was already recovering since 2026-03-01T09:00:00Z, before \
             --since 2026-03-01T12:00:00Z: the older instant is kept\n"
        ),
        "{out}"
    );
    let j = begin("2026-03-01T12:00:00Z", &["--json"]).json();
    assert_eq!(
        (
            &j["recovering"],
            &j["since"],
            &j["older_kept"],
            &j["asked_since"]
        ),
        (
            &json!(true),
            &json!("2026-03-01T09:00:00Z"),
            &json!("2026-03-01T09:00:00Z"),
            &json!("2026-03-01T12:00:00Z")
        ),
        "{j}"
    );
    assert_eq!(mark(&db)["since"], "2026-03-01T09:00:00Z");
    // An earlier instant widens the window.
    let j = begin("2026-02-28T23:00:00Z", &["--json"]).json();
    assert_eq!(
        (&j["since"], &j["older_kept"]),
        (&json!("2026-02-28T23:00:00Z"), &Value::Null),
        "{j}"
    );
    assert_eq!(mark(&db)["since"], "2026-02-28T23:00:00Z");
    // Every begin is an event; without --reason the detail says it was begun by hand.
    let ev = events(&db);
    assert_eq!(ev.len(), 4, "{ev:?}");
    for (who, event, detail) in &ev {
        assert_by_me(who);
        assert_eq!(event, "recovery begun");
        assert!(
            detail.ends_with(": begun by hand (inspect recovery --begin)"),
            "{detail}"
        );
    }
}

#[test]
fn end_ends_it_records_an_event_and_ending_again_writes_nothing() {
    skip_if_unavailable!();
    let db = temp_ledger();
    db.create();
    inspect(
        &db,
        &["recovery", "--begin", "--since", "2026-03-01T09:57:03Z"],
    )
    .expect_code(EXIT_SETTLED);
    let r = inspect(&db, &["recovery", "--end", "--reason", "reconcile clean"]);
    r.expect_code(EXIT_SETTLED);
    assert!(
        r.stdout().starts_with(&format!(
            "recovery ended: had been recovering since 2026-03-01T09:57:03Z (marked by {} at ",
            me()
        )) && r.stdout().ends_with("); not recovering now\n"),
        "{}",
        r.stdout()
    );
    let j = mark(&db);
    assert_eq!(
        (&j["recovering"], &j["since"]),
        (&json!(false), &Value::Null),
        "{j}"
    );
    assert_eq!(db.store().recovery().expect("read the mark"), None);
    let ev = events(&db);
    assert_eq!(ev.len(), 2, "{ev:?}");
    assert_by_me(&ev[1].0);
    assert_eq!(
        (ev[1].1.as_str(), ev[1].2.as_str()),
        (
            "recovery ended",
            "had been recovering since 2026-03-01T09:57:03Z: reconcile clean"
        )
    );

    // Nothing to end: said, exit 0 (not recovering is what was asked), and no event.
    let r = inspect(&db, &["recovery", "--end"]);
    r.expect_code(EXIT_SETTLED);
    assert_eq!(
        r.stdout(),
        "not recovering: there was no recovery to end; nothing written\n"
    );
    let j = inspect(&db, &["recovery", "--end", "--json"]);
    j.expect_code(EXIT_SETTLED);
    let j = j.json();
    assert_eq!(
        (&j["recovering"], &j["ended"], &j["written"]),
        (&json!(false), &Value::Null, &json!(false)),
        "{j}"
    );
    assert_eq!(events(&db).len(), 2, "no event for nothing ended");
}

#[test]
fn bad_flags_are_exit_2_naming_the_flag_and_write_nothing() {
    skip_if_unavailable!();
    let db = temp_ledger();
    db.create();
    let t = "2026-03-01T09:57:03Z";
    let cases: &[(&[&str], &str)] = &[
        (&["--begin"], "--since"),
        (&["--begin", "--since", "yesterday"], "--since"),
        (&["--begin", "--since", "2026-03-01 09:57:03"], "--since"),
        (&["--begin", "--since", "2026-03-01T09:57:03"], "--since"),
        (&["--begin", "--since", ""], "--since"),
        (&["--begin", "--since", t, "--end"], "--end"),
        (&["--end", "--begin", "--since", t], "--begin"),
        (&["--since", t], "--begin"),
        (&["--reason", "why"], "--begin"),
        (&["--end", "--reason", " "], "--reason"),
        (&["--end", "--reason", "a\nb"], "--reason"),
    ];
    for (args, flag) in cases {
        for json in [false, true] {
            let extra: &[&str] = if json { &["--json"] } else { &[] };
            let r = inspect(&db, &[&["recovery"][..], args, extra].concat());
            r.expect_code(EXIT_USAGE);
            assert!(r.stderr().contains(flag), "{args:?}: {}", r.stderr());
            assert_stdout_for_failure(&r, json, EXIT_USAGE);
        }
    }
    assert_eq!(db.store().recovery().expect("read the mark"), None);
    assert_eq!(events(&db), vec![], "nothing written");
}

sqlite_only! {
    "a ledger file from before the mark's table is an SQLite file (a PostgreSQL ledger that \
     old is refused by every read-only view)",
    fn a_ledger_from_before_the_mark_reads_as_not_recovering() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.db");
        let schema = include_str!("../../../schema.sql");
        let (table, _) = schema
            .split_once("-- resolve, reprocess and purge")
            .expect("schema.sql: the table first");
        rusqlite::Connection::open(&path)
            .unwrap()
            .execute_batch(table)
            .unwrap();
        let before = std::fs::read(&path).unwrap();
        let db = path.to_str().unwrap();
        let r = tool("inspect", &["--db", db, "recovery"]);
        r.expect_code(EXIT_SETTLED);
        assert_eq!(r.stdout(), "not recovering\nledger events: none recorded\n");
        let r = tool("inspect", &["--db", db, "recovery", "--json"]);
        r.expect_code(EXIT_SETTLED);
        let j = r.json();
        assert_eq!((&j["recovering"], &j["since"]), (&json!(false), &Value::Null), "{j}");
        assert!(std::fs::read(&path).unwrap() == before, "the file is unchanged");
    }
}

/// `--journal`: the core's bookings since the mark entered into a recovering ledger in use, on
/// either backend — a GUID without a row written DONE/0000 (no request; the reply carrying the
/// booking), a FAILED and an UNKNOWN row the core booked settled DONE/0000, a GUID booked twice
/// and a booking before the window left — exit 3 while something is left, the event naming
/// the operator; refused (exit 1, nothing written) on a ledger that is not recovering.
#[test]
fn journal_enters_the_bookings_of_the_window_into_a_recovering_ledger() {
    skip_if_unavailable!();
    let db = temp_ledger();
    db.create();
    let (failed, unknown) = (msg("G-RJ-F", 100, ""), msg("G-RJ-U", 200, ""));
    insert_all(&db, &[RowSpec::failed(&failed), RowSpec::unknown(&unknown)]);
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("journal.jsonl");
    let line = |guid: &str, core_ref: &str, amount: u64, at: &str| {
        format!(
            "{{\"guid\":\"{guid}\",\"core_ref\":\"{core_ref}\",\"amount\":{amount},\
             \"booked_at\":\"{at}\"}}\n"
        )
    };
    let text = [
        line("G-RJ-F", "C-F", 100, "2026-03-01T10:00:01Z"),
        line("G-RJ-U", "C-U", 200, "2026-03-01T10:00:02Z"),
        line("G-RJ-N", "C-N", 300, "2026-03-01T10:00:03Z"),
        line("G-RJ-D", "C-D1", 400, "2026-03-01T10:00:04Z"),
        line("G-RJ-D", "C-D2", 400, "2026-03-01T10:00:05Z"),
        line("G-RJ-OLD", "C-O", 500, "2026-03-01T08:00:00Z"),
    ]
    .concat();
    std::fs::write(&journal, text).unwrap();
    let j = journal.to_str().unwrap();

    // Not recovering: no window, nothing written.
    let r = inspect(&db, &["recovery", "--journal", j]);
    r.expect_code(EXIT_FATAL);
    assert!(r.stderr().contains("not recovering"), "{}", r.stderr());
    assert!(db.row("G-RJ-N").is_none());

    let r = inspect(
        &db,
        &["recovery", "--begin", "--since", "2026-03-01T09:55:00Z"],
    );
    r.expect_code(EXIT_SETTLED);
    let r = inspect(&db, &["recovery", "--journal", j, "--json"]);
    r.expect_code(EXIT_LEFT);
    let out = r.json();
    let counts = &out["journal"];
    assert_eq!(
        (
            &counts["written"],
            &counts["settled"],
            &counts["before_window"],
            &counts["doubles"]
        ),
        (&json!(1), &json!(2), &json!(1), &json!(["G-RJ-D"])),
        "{out}"
    );
    for (guid, amount, core_ref) in [
        ("G-RJ-F", 100, "C-F"),
        ("G-RJ-U", 200, "C-U"),
        ("G-RJ-N", 300, "C-N"),
    ] {
        let row = db.row(guid).unwrap_or_else(|| panic!("{guid} has a row"));
        assert_eq!(
            (row.state, row.rsp_code.as_deref()),
            (State::Done, Some("0000")),
            "{guid}"
        );
        let reply = row.response.expect("a stored reply");
        assert_eq!(reply.len(), 90, "{guid}");
        assert_eq!(code(&reply), "0000");
        assert_eq!(guid_of(&reply), guid);
        assert!(String::from_utf8_lossy(&reply).contains(core_ref), "{guid}");
        assert!(
            String::from_utf8_lossy(&reply).contains(&format!("{amount:013}")),
            "{guid}"
        );
        let h = db.store().history(guid).unwrap();
        let last = h.last().unwrap();
        assert!(last.who.starts_with(&me()), "{last:?}");
        assert_eq!(
            last.reason.as_deref(),
            Some(
                &format!(
                    "inspect recovery --journal: the core's journal shows it booked (core_ref {core_ref})"
                )[..]
            ),
        );
    }
    assert_eq!(
        db.row("G-RJ-N").unwrap().request,
        None,
        "no request to store"
    );
    assert!(db.row("G-RJ-D").is_none(), "a double is left");
    assert!(db.row("G-RJ-OLD").is_none(), "before the window");
    let ev = events(&db);
    let (who, event, detail) = ev.last().unwrap();
    assert_by_me(who);
    assert_eq!(event, "journal entered");
    assert!(detail.contains("1 written, 2 settled"), "{detail}");

    // Entered again: nothing more to do but the double.
    let r = inspect(&db, &["recovery", "--journal", j]);
    r.expect_code(EXIT_LEFT);
    assert!(
        r.stdout().contains("0 written, 0 settled, 3 already done"),
        "{}",
        r.stdout()
    );
}
