//! `reconcile` (CONTRACT §10): a day built through the real relay and the core simulator's
//! `--journal`, each break class alone and all together, the window's edges, bad journals,
//! exit codes, `--json`, `--metrics-file`, and the read-only guarantee. Runs on both ledgers.

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::util::*;

/// `reconcile --db DB --journal FILE EXTRA…`
fn reconcile(db: &TempLedger, journal: &Path, extra: &[&str]) -> Run {
    let j = journal.to_str().expect("UTF-8 path");
    tool(
        "reconcile",
        &[&["--db", db.arg(), "--journal", j], extra].concat(),
    )
}

/// `reconcile … --json`, its exit code checked, and its object.
fn reconcile_json(db: &TempLedger, journal: &Path, extra: &[&str], code: u8) -> Value {
    let r = reconcile(db, journal, &[extra, &["--json"]].concat());
    r.expect_code(code);
    r.json()
}

fn counts(j: &Value) -> Value {
    j["counts"].clone()
}

/// The six counts, those not named 0.
fn want(named: &[(&str, u64)]) -> Value {
    let mut v = json!({"double":0,"ghost":0,"pending":0,"matched":0,"mismatch":0,"missing":0});
    for (k, n) in named {
        v[*k] = json!(n);
    }
    v
}

/// `(class, guid)` of every break, in the report's order.
fn breaks(j: &Value) -> Vec<(String, String)> {
    j["breaks"]
        .as_array()
        .expect("breaks")
        .iter()
        .map(|b| {
            (
                b["class"].as_str().unwrap().to_string(),
                b["guid"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// A day: the relay in front of a core writing its journal. Booked (`BOOK1`, `BOOK2`),
/// rejected (`REJ`), failed with a 500 (`E500`, UNKNOWN, not booked), booked with the
/// answer lost (`DROP`, UNKNOWN: pending), and a FAILED row (`FAIL`, hand-made as a relay
/// that could not connect leaves it). Clean: 2 matched, 1 pending.
struct Day {
    scene: Scene,
    journal: PathBuf,
    m: Vec<Vec<u8>>,
}

fn day() -> Day {
    let dir = tempfile::tempdir().expect("tempdir");
    let journal = dir.keep().join("journal.jsonl");
    let scene = Scene::new()
        .core(&["--journal", journal.to_str().unwrap()])
        .relay(&[])
        .build();
    let m = vec![
        msg("BOOK1", 1500, "rent"),
        msg("BOOK2", 2500, "gas"),
        msg("REJ", 100, "REJECT"),
        msg("E500", 200, "FAIL500"),
        msg("DROP", 300, "DROP"),
        msg("FAIL", 400, "never left"),
    ];
    assert_code(&scene.call(&m[0]), "0000");
    assert_code(&scene.call(&m[1]), "0000");
    assert_code(&scene.call(&m[2]), "B001");
    assert_code(&scene.call(&m[3]), "E901");
    assert_code(&scene.call(&m[4]), "E901");
    scene.put(RowSpec::failed(&m[5]));
    assert_eq!(scene.core().total_bookings(), 3);
    Day { scene, journal, m }
}

/// The journal's lines, each changed by `f` (`None`: left out), written to a new file.
fn edited(journal: &Path, f: impl Fn(Value) -> Option<Value>) -> PathBuf {
    let text = fs::read_to_string(journal).expect("journal");
    let out: Vec<String> = text
        .lines()
        .filter_map(|l| f(serde_json::from_str(l).expect("a journal line")))
        .map(|v| v.to_string())
        .collect();
    let path = journal.with_file_name(format!("edited-{}.jsonl", fastrand_name()));
    fs::write(&path, out.join("\n") + "\n").expect("write");
    path
}

fn fastrand_name() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    format!(
        "{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// A journal of the test's own.
fn journal_of(db: &TempLedger, lines: &[&str]) -> PathBuf {
    let path = db.dir().join(format!("journal-{}.jsonl", fastrand_name()));
    let mut text = lines.join("\n");
    if !lines.is_empty() {
        text.push('\n');
    }
    fs::write(&path, text).expect("write journal");
    path
}

fn line(guid: &str, core_ref: &str, amount: u64, at: &str) -> String {
    json!({"guid": guid, "core_ref": core_ref, "amount": amount, "booked_at": at}).to_string()
}

#[test]
fn a_clean_day_reports_no_break_and_changes_nothing() {
    skip_if_unavailable!();
    let d = day();
    let db = &d.scene.db;
    let rows_before = rows_by_guid(db);
    let history_before: Vec<_> = rows_before
        .iter()
        .map(|r| db.store().history(&r.guid).unwrap())
        .collect();
    let stats_before = d.scene.core().stats();

    let j = reconcile_json(db, &d.journal, &[], EXIT_SETTLED);
    assert_eq!(counts(&j), want(&[("matched", 2), ("pending", 1)]));
    assert_eq!(j["breaks"], json!([]));
    assert_eq!(j["totals"]["journal"], json!({"count": 3, "amount": 4300}));
    assert_eq!(j["totals"]["ledger"], json!({"count": 2, "amount": 4000}));
    // The default window: the earliest booking to one second after the latest.
    let times: Vec<String> = fs::read_to_string(&d.journal)
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["booked_at"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(j["window"]["from"], json!(times.iter().min().unwrap()));
    let last = times.iter().max().unwrap();
    assert!(j["window"]["to"].as_str().unwrap() > last.as_str());

    let text = reconcile(db, &d.journal, &[]);
    text.expect_code(EXIT_SETTLED);
    assert!(
        text.stdout().trim_end().lines().count() == 1
            && text
                .stdout()
                .contains("0 double, 0 ghost, 1 pending, 2 matched, 0 mismatch, 0 missing"),
        "{}",
        text.stdout()
    );
    assert_eq!(text.stderr(), "");

    // Read-only: the rows and their history as they were, the core never asked.
    assert_eq!(rows_by_guid(db), rows_before);
    let history_after: Vec<_> = rows_before
        .iter()
        .map(|r| db.store().history(&r.guid).unwrap())
        .collect();
    assert_eq!(history_after, history_before);
    assert_eq!(d.scene.core().stats(), stats_before);
}

#[test]
fn a_transfer_booked_again_around_the_relay_is_a_double() {
    skip_if_unavailable!();
    let d = day();
    d.scene.core().book(&d.m[0]);
    let j = reconcile_json(&d.scene.db, &d.journal, &[], EXIT_FATAL);
    assert_eq!(
        counts(&j),
        want(&[("double", 1), ("matched", 1), ("pending", 1)])
    );
    assert_eq!(breaks(&j), [("double".into(), "BOOK1".into())]);
    let b = &j["breaks"][0];
    assert_eq!(b["journal"].as_array().unwrap().len(), 2);
    assert_eq!(b["ledger"]["state"], "DONE");
    assert_eq!(b["ledger"]["reply"]["amount"], 1500);
}

#[test]
fn a_booking_without_a_row_or_on_a_failed_row_is_a_ghost() {
    skip_if_unavailable!();
    let d = day();
    d.scene.core().book(&msg("AROUND", 700, "")); // a channel that went around the relay
    d.scene.core().book(&d.m[5]); // the FAILED row's transfer, booked after all
    let j = reconcile_json(&d.scene.db, &d.journal, &[], EXIT_FATAL);
    assert_eq!(
        counts(&j),
        want(&[("ghost", 2), ("matched", 2), ("pending", 1)])
    );
    assert_eq!(
        breaks(&j),
        [
            ("ghost".into(), "AROUND".into()),
            ("ghost".into(), "FAIL".into())
        ]
    );
    assert_eq!(j["breaks"][0]["ledger"], Value::Null);
    assert_eq!(j["breaks"][1]["ledger"]["state"], "FAILED");
    assert_eq!(j["breaks"][1]["ledger"]["rsp_code"], "E902");
}

#[test]
fn a_booking_on_a_sent_or_received_row_is_pending_and_on_a_done_row_without_code_a_ghost() {
    skip_if_unavailable!();
    let d = day();
    let sent = msg("P-SENT", 10, "");
    let received = msg("P-RECV", 20, "");
    let no_code = msg("G-NULL", 30, "");
    d.scene.put(RowSpec::sent(&sent));
    d.scene.put(RowSpec::of(&received, State::Received));
    d.scene.put(RowSpec::of(&no_code, State::Done).code(None));
    for m in [&sent, &received, &no_code] {
        d.scene.core().book(m);
    }
    let j = reconcile_json(&d.scene.db, &d.journal, &[], EXIT_FATAL);
    assert_eq!(
        counts(&j),
        want(&[("ghost", 1), ("matched", 2), ("pending", 3)])
    );
    assert_eq!(breaks(&j), [("ghost".into(), "G-NULL".into())]);
    assert_eq!(j["breaks"][0]["ledger"]["state"], "DONE");
    assert_eq!(j["breaks"][0]["ledger"]["rsp_code"], Value::Null);
}

#[test]
fn a_rejected_row_the_core_booked_is_a_ghost() {
    skip_if_unavailable!();
    let d = day();
    d.scene.core().book(&msg("REJ", 100, "")); // DONE/B001 in the ledger, booked at the core
    let j = reconcile_json(&d.scene.db, &d.journal, &[], EXIT_FATAL);
    assert_eq!(
        counts(&j),
        want(&[("ghost", 1), ("matched", 2), ("pending", 1)])
    );
    assert_eq!(breaks(&j), [("ghost".into(), "REJ".into())]);
}

#[test]
fn an_amount_the_core_booked_otherwise_is_a_mismatch() {
    skip_if_unavailable!();
    let d = day();
    let journal = edited(&d.journal, |mut v| {
        if v["guid"] == "BOOK2" {
            v["amount"] = json!(2501);
        }
        Some(v)
    });
    let j = reconcile_json(&d.scene.db, &journal, &[], EXIT_FATAL);
    assert_eq!(
        counts(&j),
        want(&[("matched", 1), ("mismatch", 1), ("pending", 1)])
    );
    assert_eq!(breaks(&j), [("mismatch".into(), "BOOK2".into())]);
    assert_eq!(j["breaks"][0]["journal"][0]["amount"], 2501);
    assert_eq!(j["breaks"][0]["ledger"]["reply"]["amount"], 2500);
    // core_ref and booked_at are compared too.
    for (field, value) in [
        ("core_ref", json!("C99")),
        ("booked_at", json!("2030-01-01T00:00:00Z")),
    ] {
        let journal = edited(&d.journal, |mut v| {
            if v["guid"] == "BOOK2" {
                v[field] = value.clone();
            }
            Some(v)
        });
        let j = reconcile_json(
            &d.scene.db,
            &journal,
            &[
                "--from",
                "2000-01-01T00:00:00Z",
                "--to",
                "2040-01-01T00:00:00Z",
            ],
            EXIT_FATAL,
        );
        assert_eq!(breaks(&j), [("mismatch".into(), "BOOK2".into())], "{field}");
    }
}

#[test]
fn a_done_row_the_core_has_no_record_of_is_missing() {
    skip_if_unavailable!();
    let d = day();
    let journal = edited(&d.journal, |v| (v["guid"] != "BOOK2").then_some(v));
    let wide = [
        "--from",
        "2000-01-01T00:00:00Z",
        "--to",
        "2100-01-01T00:00:00+02:00",
    ];
    let j = reconcile_json(&d.scene.db, &journal, &wide, EXIT_FATAL);
    assert_eq!(
        counts(&j),
        want(&[("matched", 1), ("missing", 1), ("pending", 1)])
    );
    assert_eq!(breaks(&j), [("missing".into(), "BOOK2".into())]);
    assert_eq!(j["breaks"][0]["journal"], json!([]));
    assert_eq!(
        j["window"],
        json!({"from": "2000-01-01T00:00:00Z", "to": "2099-12-31T22:00:00Z"})
    );
}

#[test]
fn every_break_at_once_with_exact_counts() {
    skip_if_unavailable!();
    let d = day();
    let core = d.scene.core();
    core.book(&d.m[0]); // double
    core.book(&msg("AROUND", 700, "")); // ghost, no row
    core.book(&d.m[5]); // ghost, FAILED
    // missing BOOK2, and a mismatch on a hand-made DONE/0000 row without a stored reply
    d.scene
        .put(RowSpec::new("NOREPLY", State::Done).code("0000"));
    core.book(&msg("NOREPLY", 900, ""));
    let journal = edited(&d.journal, |v| (v["guid"] != "BOOK2").then_some(v));
    let wide = [
        "--from",
        "2000-01-01T00:00:00Z",
        "--to",
        "2100-01-01T00:00:00Z",
    ];
    let j = reconcile_json(&d.scene.db, &journal, &wide, EXIT_FATAL);
    assert_eq!(
        counts(&j),
        want(&[
            ("double", 1),
            ("ghost", 2),
            ("pending", 1),
            ("mismatch", 1),
            ("missing", 1)
        ])
    );
    assert_eq!(
        breaks(&j),
        [
            ("double".into(), "BOOK1".into()),
            ("ghost".into(), "AROUND".into()),
            ("ghost".into(), "FAIL".into()),
            ("mismatch".into(), "NOREPLY".into()),
            ("missing".into(), "BOOK2".into()),
        ]
    );
    // The text: one line per break naming both sides, then the summary.
    let r = reconcile(&d.scene.db, &journal, &wide);
    r.expect_code(EXIT_FATAL);
    let lines: Vec<&str> = r.stdout().trim_end().lines().collect();
    assert_eq!(lines.len(), 6, "{}", r.stdout());
    assert!(
        lines[0].starts_with("double BOOK1: journal 2 booking(s) [C"),
        "{}",
        lines[0]
    );
    assert!(
        lines[0].contains("; ledger DONE 0000 reply [C"),
        "{}",
        lines[0]
    );
    assert!(
        lines[1].starts_with("ghost AROUND: journal 1 booking(s) [C")
            && lines[1].ends_with("ledger no row"),
        "{}",
        lines[1]
    );
    assert!(
        lines[3].contains("ledger DONE 0000 (no stored reply)"),
        "{}",
        lines[3]
    );
    assert!(
        lines[4].starts_with("missing BOOK2: journal no booking; ledger DONE 0000 reply [C")
            && lines[4].contains(" 2500 "),
        "{}",
        lines[4]
    );
    assert!(lines[5].starts_with("reconcile: window [2000-01-01T00:00:00Z, 2100-01-01T00:00:00Z): 1 double, 2 ghost, 1 pending, 0 matched, 1 mismatch, 1 missing"), "{}", lines[5]);
    // --metrics-file: the counts per class and the exit code.
    let prom = d.scene.db.dir().join("reconcile.prom");
    let r = reconcile(
        &d.scene.db,
        &journal,
        &[&wide[..], &["--metrics-file", prom.to_str().unwrap()]].concat(),
    );
    r.expect_code(EXIT_FATAL);
    let s = samples(&fs::read_to_string(&prom).unwrap());
    for (class, n) in [
        ("double", 1.0),
        ("ghost", 2.0),
        ("pending", 1.0),
        ("matched", 0.0),
        ("mismatch", 1.0),
        ("missing", 1.0),
    ] {
        assert_eq!(
            s[&format!("txrelay_batch_rows{{outcome=\"{class}\",tool=\"reconcile\"}}")],
            n,
            "{class}"
        );
    }
    assert_eq!(s["txrelay_batch_exit_code{tool=\"reconcile\"}"], 1.0);
}

const T0: &str = "2026-12-02T09:00:00Z";
const T1: &str = "2026-12-02T09:00:10Z";
const T2: &str = "2026-12-02T09:00:20Z";

#[test]
fn the_window_is_from_included_to_excluded_and_a_bound_alone_replaces_its_default() {
    skip_if_unavailable!();
    let db = temp_ledger();
    db.create();
    let journal = journal_of(
        &db,
        &[
            &line("A", "C1", 1, T0),
            &line("B", "C2", 2, T1),
            &line("C", "C3", 3, T2),
        ],
    );
    let guids = |j: &Value| breaks(j).into_iter().map(|(_, g)| g).collect::<Vec<_>>();
    let j = reconcile_json(&db, &journal, &[], EXIT_FATAL);
    assert_eq!(guids(&j), ["A", "B", "C"]);
    assert_eq!(
        j["window"],
        json!({"from": T0, "to": "2026-12-02T09:00:21Z"})
    );
    assert_eq!(j["totals"]["journal"], json!({"count": 3, "amount": 6}));
    let j = reconcile_json(&db, &journal, &["--from", T1], EXIT_FATAL);
    assert_eq!(guids(&j), ["B", "C"]);
    assert_eq!(
        j["window"],
        json!({"from": T1, "to": "2026-12-02T09:00:21Z"})
    );
    let j = reconcile_json(&db, &journal, &["--to", T1], EXIT_FATAL);
    assert_eq!(guids(&j), ["A"]);
    assert_eq!(j["window"], json!({"from": T0, "to": T1}));
    let j = reconcile_json(&db, &journal, &["--from", T1, "--to", T2], EXIT_FATAL);
    assert_eq!(guids(&j), ["B"]);
    // The same instant in another offset.
    let j = reconcile_json(
        &db,
        &journal,
        &["--from", "2026-12-02T10:00:10+01:00", "--to", T2],
        EXIT_FATAL,
    );
    assert_eq!(guids(&j), ["B"]);
    let j = reconcile_json(
        &db,
        &journal,
        &[
            "--from",
            "2026-12-02T09:00:21Z",
            "--to",
            "2026-12-02T09:00:30Z",
        ],
        EXIT_SETTLED,
    );
    assert_eq!(counts(&j), want(&[]));
}

#[test]
fn a_reported_guid_is_classified_from_all_its_lines_wherever_they_fall() {
    skip_if_unavailable!();
    let db = temp_ledger();
    db.create();
    // A: booked at T0 and T2; only T2 is in the window, and A is a double.
    // B: booked at T0 only: outside the window, not reported.
    let journal = journal_of(
        &db,
        &[
            &line("A", "C1", 1, T0),
            &line("B", "C2", 2, T0),
            &line("A", "C9", 1, T2),
        ],
    );
    let j = reconcile_json(&db, &journal, &["--from", T1], EXIT_FATAL);
    assert_eq!(breaks(&j), [("double".into(), "A".into())]);
    assert_eq!(j["breaks"][0]["journal"].as_array().unwrap().len(), 2);
    assert_eq!(j["totals"]["journal"], json!({"count": 1, "amount": 1}));
}

#[test]
fn a_done_row_without_a_readable_reply_is_placed_by_updated_at() {
    skip_if_unavailable!();
    let db = temp_ledger();
    RowSpec::new("HAND", State::Done).code("0000").insert(&db);
    RowSpec::new("REJ", State::Done).code("B001").insert(&db);
    RowSpec::new("UNK", State::Unknown).code("E901").insert(&db);
    let empty = journal_of(&db, &[]);
    let j = reconcile_json(
        &db,
        &empty,
        &[
            "--from",
            "2000-01-01T00:00:00Z",
            "--to",
            "2100-01-01T00:00:00Z",
        ],
        EXIT_FATAL,
    );
    assert_eq!(counts(&j), want(&[("missing", 1)]));
    assert_eq!(breaks(&j), [("missing".into(), "HAND".into())]);
    assert_eq!(j["breaks"][0]["ledger"]["reply_error"], "no stored reply");
    // A window that ends before the row's updated_at does not report it.
    let j = reconcile_json(
        &db,
        &empty,
        &[
            "--from",
            "2000-01-01T00:00:00Z",
            "--to",
            "2001-01-01T00:00:00Z",
        ],
        EXIT_SETTLED,
    );
    assert_eq!(counts(&j), want(&[]));
}

#[test]
fn a_done_row_is_placed_by_its_replys_booked_at_at_the_windows_edges() {
    skip_if_unavailable!();
    let db = temp_ledger();
    RowSpec::new("PLACED", State::Done).code("0000").insert(&db);
    // Its stored reply says booked at T1; its updated_at is now.
    let reply = format!(
        "RTRNF{:<36}0000{:<18}{:013}20261202090010",
        "PLACED", "C1", 5
    );
    let hex: String = reply.bytes().map(|b| format!("{b:02x}")).collect();
    by_hand(
        &db,
        &format!("UPDATE tx SET response = X'{hex}' WHERE guid = 'PLACED'"),
        &format!("UPDATE tx SET response = '\\x{hex}'::bytea WHERE guid = 'PLACED'"),
    );
    let empty = journal_of(&db, &[]);
    let reported = |from: &str, to: &str| {
        let code = if from <= T1 && T1 < to {
            EXIT_FATAL
        } else {
            EXIT_SETTLED
        };
        let j = reconcile_json(&db, &empty, &["--from", from, "--to", to], code);
        breaks(&j)
            .into_iter()
            .map(|(c, g)| format!("{c} {g}"))
            .collect::<Vec<_>>()
    };
    assert_eq!(reported(T1, T2), ["missing PLACED"], "from is included");
    assert!(reported(T0, T1).is_empty(), "to is excluded");
    // Not by updated_at: a window around now, far from T1, does not report it.
    assert!(reported("2026-12-03T00:00:00Z", "2100-01-01T00:00:00Z").is_empty());
}

#[test]
fn usage_errors_exit_2() {
    skip_if_unavailable!();
    let db = temp_ledger();
    db.create();
    let journal = journal_of(&db, &[&line("A", "C1", 1, T0)]);
    let empty = journal_of(&db, &["", "   "]);
    for (j, args, names) in [
        (&journal, vec!["--from", T1, "--to", T0], "window"),
        (&journal, vec!["--from", T0, "--to", T0], "window"),
        (&journal, vec!["--to", T0], "window"), // from defaults to T0
        (&journal, vec!["--from", "2026-12-02T09:00:00"], "--from"),
        (&journal, vec!["--to", "2026-12-02"], "--to"),
        (&empty, vec![], "--from and --to"),
        (&empty, vec!["--from", T0], "--from and --to"),
    ] {
        let r = reconcile(&db, j, &args);
        r.expect_code(EXIT_USAGE);
        assert!(r.stderr().contains(names), "{args:?}: {}", r.stderr());
        assert_eq!(r.stdout(), "", "{args:?}");
    }
    // An empty journal with both bounds is a run.
    reconcile(&db, &empty, &["--from", T0, "--to", T1]).expect_code(EXIT_SETTLED);
}

#[test]
fn a_bad_journal_line_stops_the_run_naming_file_and_line() {
    skip_if_unavailable!();
    let db = temp_ledger();
    // A row that would be a break: a half-read journal must not report anything.
    RowSpec::new("HAND", State::Done).code("0000").insert(&db);
    let good = line("A", "C1", 1, T0);
    for (lines, n) in [
        (
            vec![good.clone(), String::new(), "{\"guid\":\"B\"}".into()],
            3,
        ),
        (vec![good.clone(), "not json".into(), good.clone()], 2),
        (
            vec![good.clone(), line("B", "C2", 1, "2026-12-02T09:00:00")],
            2,
        ),
        (
            vec![
                good.clone(),
                r#"{"guid":"B","core_ref":"C2","amount":-1,"booked_at":"2026-12-02T09:00:00Z"}"#
                    .into(),
            ],
            2,
        ),
        (vec![good.clone(), line("", "C2", 1, T0)], 2),
        // Same guid and core_ref, another amount: a bad journal.
        (vec![good.clone(), line("A", "C1", 2, T0)], 2),
        (vec![good.clone(), line("A", "C1", 1, T1)], 2),
    ] {
        let journal = journal_of(&db, &lines.iter().map(String::as_str).collect::<Vec<_>>());
        let r = reconcile(&db, &journal, &[]);
        r.expect_code(3);
        assert_eq!(r.stdout(), "");
        let err: Vec<&str> = r.stderr().lines().collect();
        assert_eq!(err.len(), 1, "{}", r.stderr());
        assert!(
            err[0].contains(&format!("journal {} line {n}:", journal.display())),
            "{}",
            err[0]
        );
    }
    // A torn last line (no newline, cut short).
    let journal = db.dir().join("torn.jsonl");
    fs::write(&journal, format!("{good}\n{}", &good[..20])).unwrap();
    let r = reconcile(&db, &journal, &[]);
    r.expect_code(3);
    assert!(
        r.stderr().contains("line 2:") && r.stderr().contains("torn"),
        "{}",
        r.stderr()
    );
    // With --json: the failure object, exit 3.
    let r = reconcile(&db, &journal, &["--json"]);
    r.expect_code(3);
    assert_eq!(r.json()["exit_code"], 3);
    // A journal that is not there.
    let r = reconcile(&db, &db.dir().join("nowhere.jsonl"), &[]);
    r.expect_code(3);
    assert!(
        r.stderr().contains("nowhere.jsonl") && r.stderr().lines().count() == 1,
        "{}",
        r.stderr()
    );
}

#[test]
fn identical_lines_are_one_booking() {
    skip_if_unavailable!();
    let db = temp_ledger();
    db.create();
    let l = line("A", "C1", 5, T0);
    let same_instant = line("A", "C1", 5, "2026-12-02T10:00:00+01:00");
    let journal = journal_of(&db, &[&l, &l, &same_instant]);
    let j = reconcile_json(&db, &journal, &[], EXIT_FATAL);
    assert_eq!(counts(&j), want(&[("ghost", 1)]));
    assert_eq!(j["totals"]["journal"], json!({"count": 1, "amount": 5}));
}

#[test]
fn a_ledger_that_cannot_be_read_exits_3() {
    skip_if_unavailable!();
    let db = temp_ledger();
    db.create();
    let journal = journal_of(&db, &[&line("A", "C1", 1, T0)]);
    for bad in unusable_ledgers(&db) {
        let j = journal.to_str().unwrap();
        let r = tool("reconcile", &["--db", &bad, "--journal", j]);
        r.expect_code(3);
        assert_eq!(r.stderr().lines().count(), 1, "{bad}: {}", r.stderr());
        assert!(r.stderr().contains("ledger"), "{}", r.stderr());
    }
}

sqlite_only! {
    "a missing SQLite file is not created (PostgreSQL has no file)",
    fn a_missing_ledger_is_not_created() {
        let db = temp_ledger();
        let journal = journal_of(&db, &[&line("A", "C1", 1, T0)]);
        let r = reconcile(&db, &journal, &[]);
        r.expect_code(3);
        assert!(!db.path().exists());
    }
}

/// `bash scripts/reconcile.sh ARGS` with only PATH, the binaries' directory and `env`.
fn reconcile_sh(args: &[&str], env: &[(&str, &str)]) -> Run {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/reconcile.sh");
    let mut cmd = std::process::Command::new("bash");
    cmd.arg(script).args(args).env_clear();
    cmd.env("PATH", std::env::var_os("PATH").unwrap_or_default());
    cmd.env("RELAY_BIN_DIR", testkit::spawn::bin_dir());
    cmd.envs(env.iter().copied());
    Run::command(cmd, std::time::Duration::from_secs(60))
}

sqlite_only! {
    "the wrapper's report directory defaults to the SQLite ledger's",
    fn the_wrapper_reconciles_a_day_and_keeps_a_dated_report() {
        let db = temp_ledger();
        db.create();
        // 2026-12-02: A (a ghost); B on the 3rd, outside the day.
        let journal = journal_of(
            &db,
            &[&line("A", "C1", 1, T0), &line("B", "C2", 2, "2026-12-03T00:00:00Z")],
        );
        let j = journal.to_str().unwrap();
        let env = [("LEDGER_DB", db.arg()), ("RECONCILE_JOURNAL", j), ("RECONCILE_DAY", "2026-12-02")];
        let r = reconcile_sh(&[], &env);
        r.expect_code(EXIT_FATAL);
        let report = db.dir().join("reconcile-2026-12-02.txt");
        let kept = fs::read_to_string(&report).expect("the dated report");
        assert_eq!(kept, r.stdout());
        assert!(kept.starts_with("ghost A: "), "{kept}");
        assert!(kept.contains("window [2026-12-02T00:00:00Z, 2026-12-03T00:00:00Z): 0 double, 1 ghost"), "{kept}");
        let last = r.stderr().lines().last().unwrap();
        assert!(last.contains("reconcile.sh: reconcile exited 1 (breaks): reconcile: window"), "{}", r.stderr());
        // The 3rd: B alone; --json passes through.
        let env3 = [("LEDGER_DB", db.arg()), ("RECONCILE_JOURNAL", j), ("RECONCILE_DAY", "2026-12-03")];
        let r = reconcile_sh(&["--json"], &env3);
        r.expect_code(EXIT_FATAL);
        assert_eq!(breaks(&r.json()), [("ghost".into(), "B".into())]);
        // A bad journal: exit 3, and no report for the day.
        let bad = journal_of(&db, &["{"]);
        let env4 = [("LEDGER_DB", db.arg()), ("RECONCILE_JOURNAL", bad.to_str().unwrap()), ("RECONCILE_DAY", "2026-12-04")];
        reconcile_sh(&[], &env4).expect_code(3);
        assert!(!db.dir().join("reconcile-2026-12-04.txt").exists());
        // Settings checked before anything runs.
        reconcile_sh(&[], &[("LEDGER_DB", db.arg())]).expect_code(EXIT_USAGE);
        reconcile_sh(&[], &[("LEDGER_DB", db.arg()), ("RECONCILE_JOURNAL", j), ("RECONCILE_DAY", "yesterday")]).expect_code(EXIT_USAGE);
        // Another run holding the lock: 75, nothing done.
        let lock = fs::File::create(format!("{}.reconcile.lock", db.arg())).unwrap();
        lock.lock().unwrap();
        reconcile_sh(&[], &env).expect_code(75);
    }
}

#[test]
fn every_row_is_read_once_across_pages() {
    skip_if_unavailable!();
    // More rows than one page of PostgreSQL's cursor (10,000): each counted exactly once.
    let db = temp_ledger();
    let rows: Vec<RowSpec> = (0..25_003)
        .map(|i| RowSpec::new(&format!("P-{i:05}"), State::Done).code("0000"))
        .collect();
    insert_all(&db, &rows);
    let empty = journal_of(&db, &[]);
    let j = reconcile_json(
        &db,
        &empty,
        &[
            "--from",
            "2000-01-01T00:00:00Z",
            "--to",
            "2100-01-01T00:00:00Z",
        ],
        EXIT_FATAL,
    );
    assert_eq!(counts(&j), want(&[("missing", 25_003)]));
    assert_eq!(j["totals"]["ledger"], json!({"count": 25_003, "amount": 0}));
}
