//! The batch tools end to end: the real `resolve`, `reprocess` and `purge` binaries against
//! the real core simulator and a temp ledger each, with rows made by a real relay or by hand.
//! Every test checks the ledger rows AND the core's per-GUID booking counts.

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use common::*;
use ledger::{Row, State, wire};

/// Age given to rows that every selection below should admit (`--min-age 60`).
const OLD: u64 = 120;
const WAIT: Duration = Duration::from_secs(10);
const DAY: u64 = 24 * 60 * 60;

/// A hand-made row with a known attempts count and age.
fn put(
    db: &Db,
    guid: &str,
    state: &str,
    rsp: Option<&str>,
    req: Option<&[u8]>,
    attempts: i64,
    age: u64,
) {
    insert_row(
        db,
        &HandRow {
            guid,
            state,
            rsp_code: rsp,
            request: req,
            response: None,
            attempts: Some(attempts),
            age_secs: age,
        },
    );
}

/// The header-only reply the relay gives for `m` with `code`.
fn short(m: &[u8], code: &[u8; 4]) -> Vec<u8> {
    wire::reply_to(m, code, None)
}

fn resolve(db: &Db, core: &str, extra: &[&str]) -> Run {
    let mut args = vec!["--db", db.arg(), "--core", core];
    args.extend_from_slice(extra);
    tool("resolve", &args)
}

fn reprocess(db: &Db, core: &str, extra: &[&str]) -> Run {
    let mut args = vec!["--db", db.arg(), "--core", core];
    args.extend_from_slice(extra);
    tool("reprocess", &args)
}

fn purge(db: &Db, extra: &[&str]) -> Run {
    let mut args = vec!["--db", db.arg()];
    args.extend_from_slice(extra);
    tool("purge", &args)
}

fn inquiries(core: &Server) -> u64 {
    stats(core)["inquiries"].as_u64().unwrap()
}

fn total_bookings(core: &Server) -> u64 {
    stats(core)["bookings"].as_u64().unwrap()
}

/// Asserts a DONE/0000 row whose stored reply is the one the relay would have built from
/// `m` and the core's (first) booking of its GUID; returns that reply.
fn assert_done_as_booked(db: &Db, core: &Server, m: &[u8]) -> Vec<u8> {
    let guid = wire::parse_request(m).unwrap().guid;
    let row = db.row(&guid).unwrap();
    assert_eq!(
        (row.state, row.rsp_code.as_deref()),
        (State::Done, Some("0000")),
        "{guid}"
    );
    assert_eq!(row.request.as_deref(), Some(m), "{guid}: request unchanged");
    let booking = core_inquiry(core, &guid).unwrap_or_else(|| panic!("{guid} not booked"));
    let response = row.response.unwrap();
    assert_eq!(response.len(), 90, "{guid}");
    assert_eq!(&response[..45], &short(m, b"0000")[..], "{guid}: header");
    assert_eq!(
        String::from_utf8_lossy(&response),
        String::from_utf8_lossy(&booked_reply(m, &booking)),
        "{guid}: body from the core's booking"
    );
    let parsed = wire::parse_reply(&response).unwrap().booking.unwrap();
    assert_eq!(parsed.amount, wire::parse_request(m).unwrap().amount);
    response
}

/// Asserts a FAILED/E902 row with the 45-byte E902 reply stored.
fn assert_failed_e902(db: &Db, m: &[u8], attempts: i64) {
    let guid = wire::parse_request(m).unwrap().guid;
    let row = db.row(&guid).unwrap();
    assert_eq!(
        (row.state, row.rsp_code.as_deref(), row.attempts),
        (State::Failed, Some("E902"), Some(attempts)),
        "{guid}"
    );
    assert_eq!(
        row.response.as_deref(),
        Some(&short(m, b"E902")[..]),
        "{guid}"
    );
}

fn by_guid(core: &Server) -> BTreeMap<String, u64> {
    stats(core)["by_guid"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_u64().unwrap()))
        .collect()
}

// ---------------------------------------------------------------------------------------
// resolve
// ---------------------------------------------------------------------------------------

#[test]
fn resolve_settles_unknown_rows_by_inquiry_and_never_posts() {
    let core = coresim(&["--slow-ms", "1000"]);
    let db = Db::new();
    let relay = relay(&db, &core.url(), &["--read-timeout-ms", "300"]);
    let drop_m = msg("G-RS-DROP", 1500, "DROP");
    let slow_m = msg("G-RS-SLOW", 2500, "SLOW");
    let f500_m = msg("G-RS-500", 30, "FAIL500");
    let young_m = msg("G-RS-YOUNG", 40, "DROP");
    for m in [&drop_m, &slow_m, &f500_m, &young_m] {
        assert_eq!(call(&relay.addr, m), short(m, b"E901"));
    }
    // A row whose send never reached the core, left UNKNOWN (say, by a relay that timed out
    // before the core read it): a plain memo, so that a later resend can book it.
    let plain_m = msg("G-RS-PLAIN", 50, "rent");
    put(
        &db,
        "G-RS-PLAIN",
        "UNKNOWN",
        Some("E901"),
        Some(&plain_m),
        1,
        OLD,
    );
    assert!(eventually(WAIT, || bookings(&core, "G-RS-SLOW") == 1));
    for g in ["G-RS-DROP", "G-RS-SLOW", "G-RS-500"] {
        age_row(&db, g, OLD);
    }
    let young_before = db.row("G-RS-YOUNG").unwrap();
    let before = stats(&core);

    let r = resolve(&db, &core.url(), &["--min-age", "60"]);
    r.expect_code(0);
    assert_eq!(
        r.stdout(),
        "resolve: 4 examined, 2 DONE, 2 FAILED, 0 left (inquiry error), 0 SENT->UNKNOWN, \
         0 skipped, 0 changed by another writer\n"
    );
    assert!(!r.stderr().contains("warning"), "{}", r.stderr());

    let after = stats(&core);
    assert_eq!(after["bookings"], before["bookings"], "resolve never POSTs");
    assert_eq!(after["by_guid"], before["by_guid"], "resolve never POSTs");
    assert_eq!(
        after["inquiries"].as_u64().unwrap(),
        before["inquiries"].as_u64().unwrap() + 4,
        "one inquiry per examined row"
    );
    assert_eq!(
        db.row("G-RS-YOUNG").unwrap(),
        young_before,
        "younger than --min-age"
    );

    let drop_reply = assert_done_as_booked(&db, &core, &drop_m);
    let slow_reply = assert_done_as_booked(&db, &core, &slow_m);
    assert_failed_e902(&db, &f500_m, 1);
    assert_failed_e902(&db, &plain_m, 1);

    // Resends now: DONE replays byte for byte without a POST; FAILED is re-claimed.
    assert_eq!(call(&relay.addr, &drop_m), drop_reply);
    assert_eq!(call(&relay.addr, &slow_m), slow_reply);
    let plain_reply = call(&relay.addr, &plain_m);
    assert_eq!(code(&plain_reply), "0000");
    assert_eq!(call(&relay.addr, &plain_m), plain_reply);
    let row = db.row("G-RS-PLAIN").unwrap();
    assert_eq!((row.state, row.attempts), (State::Done, Some(2)));
    assert_eq!(call(&relay.addr, &f500_m), short(&f500_m, b"E901"));
    assert_eq!(
        db.row("G-RS-500").unwrap().attempts,
        Some(2),
        "re-claimed once"
    );
    assert_eq!(bookings(&core, "G-RS-DROP"), 1);
    assert_eq!(bookings(&core, "G-RS-SLOW"), 1);
    assert_eq!(bookings(&core, "G-RS-PLAIN"), 1);
    assert_eq!(bookings(&core, "G-RS-500"), 0);
    assert_eq!(bookings(&core, "G-RS-YOUNG"), 1);
}

#[test]
fn resolve_with_the_core_down_leaves_rows_and_exits_3() {
    let db = Db::new();
    let a = msg("G-RD-A", 10, "");
    let b = msg("G-RD-B", 20, "");
    put(&db, "G-RD-A", "UNKNOWN", Some("E901"), Some(&a), 1, OLD);
    put(
        &db,
        "G-RD-B",
        "UNKNOWN",
        Some("E901"),
        Some(&b),
        1,
        OLD + 10,
    );
    let before = all_rows(&db);

    let r = resolve(&db, &dead_core_url(), &["--min-age", "60", "--json"]);
    r.expect_code(3);
    let j = run_json(&r);
    assert_eq!(j["tool"], "resolve");
    assert_eq!(j["exit_code"], 3);
    assert_eq!(
        (
            &j["examined"],
            &j["done"],
            &j["failed"],
            &j["left"],
            &j["skipped"]
        ),
        (&2.into(), &0.into(), &0.into(), &2.into(), &0.into()),
        "{j}"
    );
    assert_eq!(all_rows(&db), before, "an inquiry error settles nothing");
    for g in ["G-RD-A", "G-RD-B"] {
        assert!(
            r.stderr().contains(g),
            "left row {g} reported: {}",
            r.stderr()
        );
    }

    // The core is back; B was booked by the lost send, A never reached it.
    let core = coresim(&[]);
    core_book(&core, &b);
    let r = resolve(&db, &core.url(), &["--min-age", "60"]);
    r.expect_code(0);
    assert!(
        r.stdout()
            .starts_with("resolve: 2 examined, 1 DONE, 1 FAILED, 0 left"),
        "{}",
        r.stdout()
    );
    assert_failed_e902(&db, &a, 1);
    assert_done_as_booked(&db, &core, &b);
    assert_eq!(total_bookings(&core), 1);
}

#[test]
fn resolve_dry_run_lists_rows_and_neither_asks_nor_writes() {
    let core = coresim(&[]);
    let db = Db::new();
    let booked = msg("G-DRY-BOOKED", 10, "");
    let unbooked = msg("G-DRY-UNBOOKED", 20, "");
    let sent = msg("G-DRY-SENT", 30, "");
    core_book(&core, &booked);
    put(
        &db,
        "G-DRY-BOOKED",
        "UNKNOWN",
        Some("E901"),
        Some(&booked),
        1,
        OLD + 20,
    );
    put(
        &db,
        "G-DRY-UNBOOKED",
        "UNKNOWN",
        Some("E901"),
        Some(&unbooked),
        2,
        OLD,
    );
    put(
        &db,
        "G-DRY-YOUNG",
        "UNKNOWN",
        Some("E901"),
        Some(&msg("G-DRY-YOUNG", 1, "")),
        1,
        5,
    );
    put(&db, "G-DRY-SENT", "SENT", None, Some(&sent), 1, OLD);
    put(
        &db,
        "G-DRY-FAILED",
        "FAILED",
        Some("E902"),
        Some(&msg("G-DRY-FAILED", 1, "")),
        1,
        OLD,
    );
    let before = all_rows(&db);
    let at = |g: &str| db.row(g).unwrap().updated_at;

    let r = resolve(&db, &core.url(), &["--min-age", "60", "--dry-run"]);
    r.expect_code(0);
    assert_eq!(
        r.stdout(),
        format!(
            "guid\tstate\trsp_code\tattempts\tupdated_at\n\
             G-DRY-BOOKED\tUNKNOWN\tE901\t1\t{}\n\
             G-DRY-UNBOOKED\tUNKNOWN\tE901\t2\t{}\n\
             resolve: dry run, 2 rows selected, nothing sent or written\n",
            at("G-DRY-BOOKED"),
            at("G-DRY-UNBOOKED")
        )
    );

    // With --stale-sent the aged SENT row is listed too; the core is not needed at all.
    let r = resolve(
        &db,
        &dead_core_url(),
        &[
            "--min-age",
            "60",
            "--stale-sent",
            "60",
            "--dry-run",
            "--json",
        ],
    );
    r.expect_code(0);
    let j = run_json(&r);
    assert_eq!(
        (&j["tool"], &j["dry_run"], &j["count"], &j["exit_code"]),
        (&"resolve".into(), &true.into(), &3.into(), &0.into())
    );
    let listed: Vec<(&str, &str)> = j["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["guid"].as_str().unwrap(), r["state"].as_str().unwrap()))
        .collect();
    assert_eq!(
        listed,
        [
            ("G-DRY-BOOKED", "UNKNOWN"),
            ("G-DRY-UNBOOKED", "UNKNOWN"),
            ("G-DRY-SENT", "SENT")
        ]
    );
    let sent_row = &j["rows"][2];
    assert_eq!(sent_row["rsp_code"], serde_json::Value::Null);
    assert_eq!(sent_row["attempts"], 1);
    assert_eq!(sent_row["updated_at"], at("G-DRY-SENT"));

    assert_eq!(all_rows(&db), before, "a dry run writes nothing");
    assert_eq!(inquiries(&core), 0, "a dry run asks nothing");
    assert_eq!(total_bookings(&core), 1);
}

#[test]
fn resolve_warns_under_60_seconds_but_does_its_work() {
    let core = coresim(&[]);
    let db = Db::new();
    let relay = relay(&db, &core.url(), &[]);
    let m = msg("G-RW-1", 77, "DROP");
    assert_eq!(code(&call(&relay.addr, &m)), "E901");

    // 59 s: warned, and the just-written row is still too young.
    let r = resolve(&db, &core.url(), &["--min-age", "59"]);
    r.expect_code(0);
    assert!(
        r.stderr().contains("warning") && r.stderr().contains("--min-age 59"),
        "{}",
        r.stderr()
    );
    assert!(
        r.stdout().starts_with("resolve: 0 examined"),
        "{}",
        r.stdout()
    );
    assert_eq!(db.state("G-RW-1"), Some(State::Unknown));

    // 0 s: warned, and settled.
    let r = resolve(&db, &core.url(), &["--min-age", "0"]);
    r.expect_code(0);
    assert!(
        r.stderr().contains("warning") && r.stderr().contains("--min-age 0"),
        "{}",
        r.stderr()
    );
    let reply = assert_done_as_booked(&db, &core, &m);
    assert_eq!(call(&relay.addr, &m), reply);
    assert_eq!(bookings(&core, "G-RW-1"), 1);

    // 60 s: no warning.
    let r = resolve(&db, &core.url(), &["--min-age", "60"]);
    r.expect_code(0);
    assert!(!r.stderr().contains("warning"), "{}", r.stderr());
}

#[test]
fn resolve_skips_rows_without_a_usable_request_and_settles_the_rest() {
    let core = coresim(&[]);
    let db = Db::new();
    let good = msg("G-RK-GOOD", 10, "");
    core_book(&core, &good);
    put(&db, "G-RK-NULL", "UNKNOWN", None, None, 0, OLD + 30);
    put(
        &db,
        "G-RK-OTHER",
        "UNKNOWN",
        Some("E901"),
        Some(&msg("G-RK-ELSE", 5, "")),
        1,
        OLD + 20,
    );
    put(
        &db,
        "G-RK-JUNK",
        "UNKNOWN",
        Some("E901"),
        Some(b"junk"),
        1,
        OLD + 10,
    );
    put(
        &db,
        "G-RK-GOOD",
        "UNKNOWN",
        Some("E901"),
        Some(&good),
        1,
        OLD,
    );
    let bad = ["G-RK-NULL", "G-RK-OTHER", "G-RK-JUNK"];
    let before: Vec<Row> = bad.iter().map(|g| db.row(g).unwrap()).collect();

    let r = resolve(&db, &core.url(), &["--min-age", "60", "--json"]);
    r.expect_code(3);
    let j = run_json(&r);
    assert_eq!(
        (&j["examined"], &j["done"], &j["skipped"], &j["exit_code"]),
        (&4.into(), &1.into(), &3.into(), &3.into()),
        "{j}"
    );
    for g in bad {
        assert!(r.stderr().contains(g), "{g} reported: {}", r.stderr());
    }
    let after: Vec<Row> = bad.iter().map(|g| db.row(g).unwrap()).collect();
    assert_eq!(after, before);
    assert_done_as_booked(&db, &core, &good);
    assert_eq!(total_bookings(&core), 1);
}

// ---------------------------------------------------------------------------------------
// resolve --stale-sent
// ---------------------------------------------------------------------------------------

#[test]
fn resolve_stale_sent_settles_orphaned_sent_rows_only_with_the_flag() {
    let core = coresim(&["--slow-ms", "600"]);
    let db = Db::new();
    // A relay that dies between claim and result leaves its row SENT, booked by the core.
    // The ledger's write lock holds the relay's result back until it is killed.
    let orphan = msg("G-SS-ORPHAN", 4242, "SLOW");
    {
        let mut dying = relay(&db, &core.url(), &[]);
        let mut c = Chan::connect(&dying.addr);
        c.send(&orphan);
        assert!(eventually(WAIT, || db.state("G-SS-ORPHAN") == Some(State::Sent)));
        let lock = rusqlite::Connection::open(&db.path).unwrap();
        lock.execute_batch("BEGIN IMMEDIATE").unwrap();
        assert!(eventually(WAIT, || bookings(&core, "G-SS-ORPHAN") == 1));
        dying.kill();
        lock.execute_batch("ROLLBACK").unwrap();
    }
    assert_eq!(db.state("G-SS-ORPHAN"), Some(State::Sent));
    age_row(&db, "G-SS-ORPHAN", OLD);
    let never = msg("G-SS-NEVER", 11, "");
    put(&db, "G-SS-NEVER", "SENT", None, Some(&never), 1, OLD);
    put(
        &db,
        "G-SS-YOUNG",
        "SENT",
        None,
        Some(&msg("G-SS-YOUNG", 12, "")),
        1,
        5,
    );
    let unk = msg("G-SS-UNK", 13, "");
    put(&db, "G-SS-UNK", "UNKNOWN", Some("E901"), Some(&unk), 1, OLD);
    core_book(&core, &unk);
    // Other states are never resolve's business, whatever their age and the flags.
    let others = ["G-SS-RECEIVED", "G-SS-FAILED", "G-SS-DONE"];
    for (g, state, rsp) in [
        (others[0], "RECEIVED", None),
        (others[1], "FAILED", Some("E902")),
        (others[2], "DONE", Some("0000")),
    ] {
        put(&db, g, state, rsp, Some(&msg(g, 14, "")), 1, OLD);
    }
    // The booked one is known to the core, as the canary inquiry expects.
    core_book(&core, &msg(others[2], 14, ""));
    let others_rows = || -> Vec<Row> { others.iter().map(|g| db.row(g).unwrap()).collect() };
    let others_before = others_rows();
    let sent_rows = || -> Vec<Row> {
        ["G-SS-ORPHAN", "G-SS-NEVER", "G-SS-YOUNG"]
            .iter()
            .map(|g| db.row(g).unwrap())
            .collect()
    };
    let sent_before = sent_rows();

    // Without the flag: SENT rows are never touched (nor asked about).
    let r = resolve(&db, &core.url(), &["--min-age", "60"]);
    r.expect_code(0);
    assert!(
        r.stdout()
            .starts_with("resolve: 1 examined, 1 DONE, 0 FAILED"),
        "{}",
        r.stdout()
    );
    assert_eq!(inquiries(&core), 2, "the canary, then G-SS-UNK");
    assert_eq!(sent_rows(), sent_before);
    assert_done_as_booked(&db, &core, &unk);

    // With a threshold above the rows' age: still untouched.
    let r = resolve(
        &db,
        &core.url(),
        &["--min-age", "60", "--stale-sent", "1000"],
    );
    r.expect_code(0);
    assert!(
        r.stdout().starts_with("resolve: 0 examined"),
        "{}",
        r.stdout()
    );
    assert_eq!(sent_rows(), sent_before);

    // With the flag: aged SENT rows settled like UNKNOWN ones; the young one stays.
    let asked = inquiries(&core);
    let r = resolve(
        &db,
        &core.url(),
        &["--min-age", "60", "--stale-sent", "100", "--json"],
    );
    r.expect_code(0);
    assert_eq!(
        inquiries(&core),
        asked + 3,
        "the canary, then only the two aged SENT rows were asked about"
    );
    let j = run_json(&r);
    assert_eq!(
        (
            &j["examined"],
            &j["done"],
            &j["failed"],
            &j["sent_to_unknown"]
        ),
        (&2.into(), &1.into(), &1.into(), &0.into()),
        "{j}"
    );
    let orphan_reply = assert_done_as_booked(&db, &core, &orphan);
    assert_eq!(db.row("G-SS-ORPHAN").unwrap().attempts, Some(1));
    assert_failed_e902(&db, &never, 1);
    assert_eq!(db.row("G-SS-YOUNG").unwrap(), sent_before[2]);
    assert_eq!(others_rows(), others_before);

    // A new relay on the same ledger: the orphan replays, the never-sent one books once.
    let relay = relay(&db, &core.url(), &[]);
    assert_eq!(call(&relay.addr, &orphan), orphan_reply);
    assert_eq!(code(&call(&relay.addr, &never)), "0000");
    assert_eq!(code(&call(&relay.addr, &msg("G-SS-YOUNG", 12, ""))), "E903");
    assert_eq!(bookings(&core, "G-SS-ORPHAN"), 1);
    assert_eq!(bookings(&core, "G-SS-NEVER"), 1);
    assert_eq!(bookings(&core, "G-SS-YOUNG"), 0);
    assert_eq!(bookings(&core, "G-SS-UNK"), 1);
}

#[test]
fn resolve_stale_sent_with_the_core_down_moves_sent_to_unknown() {
    let db = Db::new();
    let s1 = msg("G-SD-1", 10, "");
    let s2 = msg("G-SD-2", 20, "");
    let u = msg("G-SD-U", 30, "");
    put(&db, "G-SD-1", "SENT", None, Some(&s1), 1, OLD);
    put(&db, "G-SD-2", "SENT", None, Some(&s2), 2, OLD);
    put(&db, "G-SD-U", "UNKNOWN", Some("E901"), Some(&u), 1, OLD);
    let u_before = db.row("G-SD-U").unwrap();

    let r = resolve(
        &db,
        &dead_core_url(),
        &["--min-age", "60", "--stale-sent", "60", "--json"],
    );
    r.expect_code(3);
    let j = run_json(&r);
    assert_eq!(
        (
            &j["examined"],
            &j["left"],
            &j["sent_to_unknown"],
            &j["exit_code"]
        ),
        (&3.into(), &1.into(), &2.into(), &3.into()),
        "{j}"
    );
    for (m, attempts) in [(&s1, 1), (&s2, 2)] {
        let guid = wire::parse_request(m).unwrap().guid;
        let row = db.row(&guid).unwrap();
        assert_eq!(
            (row.state, row.rsp_code.as_deref(), row.attempts),
            (State::Unknown, Some("E901"), Some(attempts)),
            "{guid}"
        );
        assert_eq!(row.response.as_deref(), Some(&short(m, b"E901")[..]));
    }
    assert_eq!(db.row("G-SD-U").unwrap(), u_before);

    // Resends now get E901 at once instead of E903 for ever, and reach no core.
    let core = coresim(&[]);
    let relay = relay(&db, &core.url(), &[]);
    assert_eq!(call(&relay.addr, &s1), short(&s1, b"E901"));
    assert_eq!(total_bookings(&core), 0);

    // A later run settles them (the core booked only G-SD-2).
    core_book(&core, &s2);
    let r = resolve(&db, &core.url(), &["--min-age", "0", "--stale-sent", "60"]);
    r.expect_code(0);
    assert_failed_e902(&db, &s1, 1);
    assert_done_as_booked(&db, &core, &s2);
    assert_failed_e902(&db, &u, 1);
    assert_eq!(total_bookings(&core), 1);
}

// ---------------------------------------------------------------------------------------
// reprocess
// ---------------------------------------------------------------------------------------

#[test]
fn reprocess_sends_only_failed_e902_rows_below_max_attempts() {
    let core = coresim(&[]);
    let db = Db::new();
    // A real FAILED row: a relay whose core was down.
    let down_relay = relay(&db, &dead_core_url(), &[]);
    let real = msg("G-RP-REAL", 900, "rent");
    assert_eq!(call(&down_relay.addr, &real), short(&real, b"E902"));
    age_row(&db, "G-RP-REAL", OLD);
    let ok1 = msg("G-RP-OK1", 101, "");
    let ok2 = msg("G-RP-OK2", 102, "");
    put(&db, "G-RP-OK1", "FAILED", Some("E902"), Some(&ok1), 1, OLD);
    put(&db, "G-RP-OK2", "FAILED", Some("E902"), Some(&ok2), 2, 5);
    let never = [
        ("G-RP-UNKNOWN", "UNKNOWN", Some("E901"), 1),
        ("G-RP-SENT", "SENT", None, 1),
        ("G-RP-RECEIVED", "RECEIVED", None, 0),
        ("G-RP-DONE", "DONE", Some("0000"), 1),
        ("G-RP-DONE-E902", "DONE", Some("E902"), 1),
        ("G-RP-UNKNOWN-E902", "UNKNOWN", Some("E902"), 1),
        ("G-RP-F-E901", "FAILED", Some("E901"), 1),
        ("G-RP-F-B001", "FAILED", Some("B001"), 1),
        ("G-RP-F-NULL", "FAILED", None, 1),
        ("G-RP-F-MAX", "FAILED", Some("E902"), 3),
        ("G-RP-F-OVER", "FAILED", Some("E902"), 7),
    ];
    for (g, state, rsp, attempts) in never {
        put(&db, g, state, rsp, Some(&msg(g, 5, "")), attempts, OLD);
    }
    let never_before: Vec<Row> = never.iter().map(|(g, ..)| db.row(g).unwrap()).collect();

    let r = reprocess(&db, &core.url(), &["--max-attempts", "3"]);
    r.expect_code(0);
    assert_eq!(
        r.stdout(),
        "reprocess: 3 examined, 3 sent, 3 DONE, 0 FAILED, 0 UNKNOWN, \
         0 not tried (core unreachable), 0 skipped, 0 changed by another writer\n"
    );
    let booked = by_guid(&core);
    assert_eq!(
        booked,
        BTreeMap::from([
            ("G-RP-OK1".into(), 1),
            ("G-RP-OK2".into(), 1),
            ("G-RP-REAL".into(), 1)
        ]),
        "only FAILED/E902 rows below --max-attempts reach the core"
    );
    let never_after: Vec<Row> = never.iter().map(|(g, ..)| db.row(g).unwrap()).collect();
    assert_eq!(never_after, never_before);

    for (m, attempts) in [(&real, 2), (&ok1, 2), (&ok2, 3)] {
        let reply = assert_done_as_booked(&db, &core, m);
        let guid = wire::parse_request(m).unwrap().guid;
        assert_eq!(db.row(&guid).unwrap().attempts, Some(attempts), "{guid}");
        // Any relay replays it byte for byte, even one whose core is still down.
        assert_eq!(call(&down_relay.addr, m), reply, "{guid}");
    }
    assert_eq!(total_bookings(&core), 3);

    // Nothing left to do: a second run sends nothing.
    let r = reprocess(&db, &core.url(), &["--max-attempts", "3"]);
    r.expect_code(0);
    assert!(
        r.stdout().starts_with("reprocess: 0 examined, 0 sent"),
        "{}",
        r.stdout()
    );
    assert_eq!(total_bookings(&core), 3);
}

#[test]
fn reprocess_limit_sends_the_oldest_first() {
    let core = coresim(&[]);
    let db = Db::new();
    let ages = [500, 100, 400, 200, 300];
    let msgs: Vec<Vec<u8>> = (0..5)
        .map(|i| msg(&format!("G-RL-{i}"), 10 + i, ""))
        .collect();
    for (i, age) in ages.iter().enumerate() {
        put(
            &db,
            &format!("G-RL-{i}"),
            "FAILED",
            Some("E902"),
            Some(&msgs[i]),
            1,
            *age,
        );
    }

    let r = reprocess(
        &db,
        &core.url(),
        &["--max-attempts", "3", "--limit", "2", "--json"],
    );
    r.expect_code(0);
    let j = run_json(&r);
    assert_eq!(
        (
            &j["examined"],
            &j["sent"],
            &j["done"],
            &j["tool"],
            &j["exit_code"]
        ),
        (
            &2.into(),
            &2.into(),
            &2.into(),
            &"reprocess".into(),
            &0.into()
        ),
        "{j}"
    );
    // Oldest: G-RL-0 (500 s) and G-RL-2 (400 s).
    assert_eq!(
        by_guid(&core),
        BTreeMap::from([("G-RL-0".into(), 1), ("G-RL-2".into(), 1)])
    );
    for i in [1, 3, 4] {
        let row = db.row(&format!("G-RL-{i}")).unwrap();
        assert_eq!((row.state, row.attempts), (State::Failed, Some(1)));
    }

    let r = reprocess(&db, &core.url(), &["--max-attempts", "3", "--limit", "2"]);
    r.expect_code(0);
    // Next oldest: G-RL-4 (300 s) and G-RL-3 (200 s).
    assert_eq!(
        by_guid(&core),
        BTreeMap::from([
            ("G-RL-0".into(), 1),
            ("G-RL-2".into(), 1),
            ("G-RL-3".into(), 1),
            ("G-RL-4".into(), 1)
        ])
    );
    assert_eq!(db.state("G-RL-1"), Some(State::Failed));
    for i in [0, 2, 3, 4] {
        assert_done_as_booked(&db, &core, &msgs[i]);
    }
}

#[test]
fn reprocess_skips_rows_without_a_usable_request_and_sends_the_rest() {
    let core = coresim(&[]);
    let db = Db::new();
    put(&db, "G-RK-NULL", "FAILED", Some("E902"), None, 1, OLD + 40);
    put(
        &db,
        "G-RK-OTHER",
        "FAILED",
        Some("E902"),
        Some(&msg("G-RK-ELSE", 5, "")),
        1,
        OLD + 30,
    );
    put(
        &db,
        "G-RK-JUNK",
        "FAILED",
        Some("E902"),
        Some(b"junk"),
        1,
        OLD + 20,
    );
    let a = msg("G-RK-A", 10, "");
    let b = msg("G-RK-B", 20, "");
    put(&db, "G-RK-A", "FAILED", Some("E902"), Some(&a), 1, OLD + 10);
    put(&db, "G-RK-B", "FAILED", Some("E902"), Some(&b), 1, OLD);
    let bad = ["G-RK-NULL", "G-RK-OTHER", "G-RK-JUNK"];
    let before: Vec<Row> = bad.iter().map(|g| db.row(g).unwrap()).collect();

    let r = reprocess(&db, &core.url(), &["--max-attempts", "3", "--json"]);
    r.expect_code(3);
    let j = run_json(&r);
    assert_eq!(
        (
            &j["examined"],
            &j["sent"],
            &j["done"],
            &j["skipped"],
            &j["exit_code"]
        ),
        (&5.into(), &2.into(), &2.into(), &3.into(), &3.into()),
        "{j}"
    );
    for g in bad {
        assert!(r.stderr().contains(g), "{g} reported: {}", r.stderr());
    }
    let after: Vec<Row> = bad.iter().map(|g| db.row(g).unwrap()).collect();
    assert_eq!(
        after, before,
        "skipped before any claim: still FAILED, attempts unchanged"
    );
    assert_done_as_booked(&db, &core, &a);
    assert_done_as_booked(&db, &core, &b);
    assert_eq!(
        by_guid(&core),
        BTreeMap::from([("G-RK-A".into(), 1), ("G-RK-B".into(), 1)]),
        "a stored request for another GUID is never sent"
    );
}

#[test]
fn reprocess_with_the_core_down_stops_after_the_first_row() {
    let db = Db::new();
    let msgs: Vec<Vec<u8>> = (0..3)
        .map(|i| msg(&format!("G-RC-{i}"), 10 + i, ""))
        .collect();
    for (i, m) in msgs.iter().enumerate() {
        put(
            &db,
            &format!("G-RC-{i}"),
            "FAILED",
            Some("E902"),
            Some(m),
            1,
            300 - 100 * i as u64,
        );
    }
    let r = reprocess(&db, &dead_core_url(), &["--max-attempts", "3", "--json"]);
    r.expect_code(3);
    let j = run_json(&r);
    assert_eq!(
        (
            &j["examined"],
            &j["sent"],
            &j["failed"],
            &j["not_tried"],
            &j["done"],
            &j["exit_code"]
        ),
        (
            &3.into(),
            &1.into(),
            &1.into(),
            &2.into(),
            &0.into(),
            &3.into()
        ),
        "{j}"
    );
    assert_failed_e902(&db, &msgs[0], 2);
    for m in &msgs[1..] {
        let row = db.row(&wire::parse_request(m).unwrap().guid).unwrap();
        assert_eq!(
            (row.state, row.attempts, row.response),
            (State::Failed, Some(1), None)
        );
    }

    // The next run burns an attempt on the row that is now the oldest: G-RC-1.
    let r = reprocess(&db, &dead_core_url(), &["--max-attempts", "3"]);
    r.expect_code(3);
    assert_eq!(
        r.stdout(),
        "reprocess: 3 examined, 1 sent, 0 DONE, 1 FAILED, 0 UNKNOWN, \
         2 not tried (core unreachable), 0 skipped, 0 changed by another writer\n"
    );
    assert_failed_e902(&db, &msgs[0], 2);
    assert_failed_e902(&db, &msgs[1], 2);
    assert_eq!(db.row("G-RC-2").unwrap().attempts, Some(1));

    // The core is back: rows that used up their attempts stay; the other goes once.
    let core = coresim(&[]);
    let r = reprocess(&db, &core.url(), &["--max-attempts", "2", "--json"]);
    r.expect_code(0);
    let j = run_json(&r);
    assert_eq!(
        (&j["examined"], &j["sent"], &j["done"]),
        (&1.into(), &1.into(), &1.into()),
        "{j}"
    );
    assert_failed_e902(&db, &msgs[0], 2);
    assert_failed_e902(&db, &msgs[1], 2);
    assert_done_as_booked(&db, &core, &msgs[2]);
    assert_eq!(db.row("G-RC-2").unwrap().attempts, Some(2));
    assert_eq!(by_guid(&core), BTreeMap::from([("G-RC-2".into(), 1)]));
}

#[test]
fn reprocess_records_every_outcome_as_the_relay_does() {
    let core = coresim(&[]);
    let db = Db::new();
    let drop_m = msg("G-RO-DROP", 10, "DROP");
    let f500_m = msg("G-RO-500", 20, "FAIL500");
    let rej_m = msg("G-RO-REJ", 30, "REJECT");
    let ok_m = msg("G-RO-OK", 40, "");
    for (i, m) in [&drop_m, &f500_m, &rej_m, &ok_m].into_iter().enumerate() {
        let g = wire::parse_request(m).unwrap().guid;
        put(&db, &g, "FAILED", Some("E902"), Some(m), 1, OLD + i as u64);
    }
    let r = reprocess(&db, &core.url(), &["--max-attempts", "3", "--json"]);
    r.expect_code(3);
    let j = run_json(&r);
    assert_eq!(
        (&j["sent"], &j["done"], &j["unknown"], &j["failed"]),
        (&4.into(), &2.into(), &2.into(), &0.into()),
        "{j}"
    );

    for (m, booked) in [(&drop_m, 1), (&f500_m, 0)] {
        let guid = wire::parse_request(m).unwrap().guid;
        let row = db.row(&guid).unwrap();
        assert_eq!(
            (row.state, row.rsp_code.as_deref(), row.attempts),
            (State::Unknown, Some("E901"), Some(2)),
            "{guid}"
        );
        assert_eq!(row.response.as_deref(), Some(&short(m, b"E901")[..]));
        assert_eq!(bookings(&core, &guid), booked, "{guid}");
    }
    let row = db.row("G-RO-REJ").unwrap();
    assert_eq!(
        (row.state, row.rsp_code.as_deref()),
        (State::Done, Some("B001"))
    );
    assert_eq!(row.response.as_deref(), Some(&short(&rej_m, b"B001")[..]));
    let ok_reply = assert_done_as_booked(&db, &core, &ok_m);

    // Through a relay: UNKNOWN answers E901 without a POST, DONE replays.
    let relay = relay(&db, &core.url(), &[]);
    assert_eq!(call(&relay.addr, &drop_m), short(&drop_m, b"E901"));
    assert_eq!(call(&relay.addr, &rej_m), short(&rej_m, b"B001"));
    assert_eq!(call(&relay.addr, &ok_m), ok_reply);
    assert_eq!(
        by_guid(&core),
        BTreeMap::from([("G-RO-DROP".into(), 1), ("G-RO-OK".into(), 1)])
    );

    // And a later run never touches them again.
    let r = reprocess(&db, &core.url(), &["--max-attempts", "9"]);
    r.expect_code(0);
    assert!(
        r.stdout().starts_with("reprocess: 0 examined"),
        "{}",
        r.stdout()
    );
}

#[test]
fn reprocess_dry_run_lists_and_neither_sends_nor_writes() {
    let core = coresim(&[]);
    let db = Db::new();
    put(
        &db,
        "G-RY-OLD",
        "FAILED",
        Some("E902"),
        Some(&msg("G-RY-OLD", 1, "")),
        2,
        OLD + 10,
    );
    put(
        &db,
        "G-RY-NEW",
        "FAILED",
        Some("E902"),
        Some(&msg("G-RY-NEW", 2, "")),
        1,
        OLD,
    );
    put(&db, "G-RY-NULL", "FAILED", Some("E902"), None, 0, OLD - 10);
    put(
        &db,
        "G-RY-MAX",
        "FAILED",
        Some("E902"),
        Some(&msg("G-RY-MAX", 3, "")),
        3,
        OLD,
    );
    put(
        &db,
        "G-RY-UNK",
        "UNKNOWN",
        Some("E901"),
        Some(&msg("G-RY-UNK", 4, "")),
        1,
        OLD,
    );
    let before = all_rows(&db);
    let at = |g: &str| db.row(g).unwrap().updated_at;

    let r = reprocess(&db, &core.url(), &["--max-attempts", "3", "--dry-run"]);
    r.expect_code(0);
    assert_eq!(
        r.stdout(),
        format!(
            "guid\tstate\trsp_code\tattempts\tupdated_at\n\
             G-RY-OLD\tFAILED\tE902\t2\t{}\n\
             G-RY-NEW\tFAILED\tE902\t1\t{}\n\
             G-RY-NULL\tFAILED\tE902\t0\t{}\n\
             reprocess: dry run, 3 rows selected, nothing sent or written\n",
            at("G-RY-OLD"),
            at("G-RY-NEW"),
            at("G-RY-NULL")
        )
    );
    let r = reprocess(
        &db,
        &core.url(),
        &["--max-attempts", "3", "--dry-run", "--limit", "1", "--json"],
    );
    r.expect_code(0);
    let j = run_json(&r);
    assert_eq!(
        (&j["tool"], &j["dry_run"], &j["count"], &j["exit_code"]),
        (&"reprocess".into(), &true.into(), &1.into(), &0.into()),
        "{j}"
    );
    assert_eq!(j["rows"][0]["guid"], "G-RY-OLD");
    assert_eq!(j["rows"][0]["attempts"], 2);
    assert_eq!(j["rows"][0]["rsp_code"], "E902");
    assert_eq!(j["rows"][0]["state"], "FAILED");

    assert_eq!(all_rows(&db), before);
    assert_eq!(total_bookings(&core), 0);
}

// ---------------------------------------------------------------------------------------
// Races
// ---------------------------------------------------------------------------------------

#[test]
fn reprocess_racing_channel_resends_books_every_guid_once() {
    const N: usize = 30;
    const RESENDERS: usize = 4;
    let port = free_port();
    let core_url = format!("http://127.0.0.1:{port}");
    let db = Db::new();
    let relay = relay(&db, &core_url, &[]);
    let msgs: Arc<Vec<Vec<u8>>> = Arc::new(
        (0..N)
            .map(|i| msg(&format!("G-RA-{i:02}"), 100 + i as u64, "SLOW"))
            .collect(),
    );
    for m in msgs.iter() {
        assert_eq!(call(&relay.addr, m), short(m, b"E902"), "core down");
    }
    // The core comes back on the very address the relay uses.
    let core = Server::spawn(
        "coresim",
        &["--listen", &format!("127.0.0.1:{port}"), "--slow-ms", "20"],
    );

    let barrier = Arc::new(Barrier::new(2 + RESENDERS));
    let runs: Vec<_> = (0..2)
        .map(|_| {
            let (barrier, db_path, url) = (barrier.clone(), db.arg().to_string(), core_url.clone());
            thread::spawn(move || {
                barrier.wait();
                tool(
                    "reprocess",
                    &[
                        "--db",
                        &db_path,
                        "--core",
                        &url,
                        "--max-attempts",
                        "5",
                        "--json",
                    ],
                )
            })
        })
        .collect();
    let resenders: Vec<_> = (0..RESENDERS)
        .map(|t| {
            let (barrier, msgs, addr) = (barrier.clone(), msgs.clone(), relay.addr.clone());
            thread::spawn(move || {
                barrier.wait();
                let mut c = Chan::connect(&addr);
                (0..N)
                    .map(|k| {
                        let m = &msgs[(k * (t + 1) + t * 7) % N]; // a different order each
                        (m.clone(), c.call(m))
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut sent = 0;
    for h in runs {
        let r = h.join().unwrap();
        r.expect_code(0);
        sent += run_json(&r)["sent"].as_u64().unwrap();
    }
    let replies: Vec<(Vec<u8>, Vec<u8>)> = resenders
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();

    for (i, m) in msgs.iter().enumerate() {
        let guid = format!("G-RA-{i:02}");
        assert_eq!(bookings(&core, &guid), 1, "{guid}");
        let final_reply = assert_done_as_booked(&db, &core, m);
        assert_eq!(
            db.row(&guid).unwrap().attempts,
            Some(2),
            "{guid}: exactly one re-claim"
        );
        assert_eq!(call(&relay.addr, m), final_reply, "{guid}");
        for (sent_m, reply) in replies.iter().filter(|(sm, _)| sm == m) {
            assert!(
                *reply == final_reply || *reply == short(sent_m, b"E903"),
                "{guid}: {:?}",
                String::from_utf8_lossy(reply)
            );
        }
    }
    assert_eq!(total_bookings(&core), N as u64);
    assert!(sent <= N as u64, "reprocess runs sent {sent} in all");
}

#[test]
fn two_reprocess_runs_at_once_never_send_a_guid_twice() {
    const N: usize = 40;
    let core = coresim(&["--slow-ms", "40"]);
    let db = Db::new();
    let msgs: Vec<Vec<u8>> = (0..N)
        .map(|i| msg(&format!("G-R2-{i:02}"), 1 + i as u64, "SLOW"))
        .collect();
    for (i, m) in msgs.iter().enumerate() {
        put(
            &db,
            &format!("G-R2-{i:02}"),
            "FAILED",
            Some("E902"),
            Some(m),
            1,
            OLD,
        );
    }
    let barrier = Arc::new(Barrier::new(2));
    let runs: Vec<_> = (0..2)
        .map(|_| {
            let (barrier, db_path, url) = (barrier.clone(), db.arg().to_string(), core.url());
            thread::spawn(move || {
                barrier.wait();
                tool(
                    "reprocess",
                    &[
                        "--db",
                        &db_path,
                        "--core",
                        &url,
                        "--max-attempts",
                        "3",
                        "--json",
                    ],
                )
            })
        })
        .collect();
    let outs: Vec<serde_json::Value> = runs
        .into_iter()
        .map(|h| {
            let r = h.join().unwrap();
            r.expect_code(0);
            run_json(&r)
        })
        .collect();
    let n = |j: &serde_json::Value, k: &str| j[k].as_u64().unwrap();
    assert_eq!(
        n(&outs[0], "sent") + n(&outs[1], "sent"),
        N as u64,
        "{outs:?}"
    );
    for j in &outs {
        assert_eq!(n(j, "sent") + n(j, "raced"), n(j, "examined"), "{j}");
        assert_eq!(n(j, "done"), n(j, "sent"), "{j}");
    }
    for (i, m) in msgs.iter().enumerate() {
        let guid = format!("G-R2-{i:02}");
        assert_eq!(bookings(&core, &guid), 1, "{guid}");
        assert_done_as_booked(&db, &core, m);
        assert_eq!(db.row(&guid).unwrap().attempts, Some(2), "{guid}");
    }
    assert_eq!(total_bookings(&core), N as u64);
}

#[test]
fn resolve_racing_channel_resends_never_books_an_unknown_guid_twice() {
    const N: usize = 15;
    const RESENDERS: usize = 4;
    let core = coresim(&[]);
    let db = Db::new();
    let relay = relay(&db, &core.url(), &[]);
    // Half booked by a lost answer (DROP), half never reached the core (hand-made).
    let dropped: Vec<Vec<u8>> = (0..N)
        .map(|i| msg(&format!("G-RR-D{i:02}"), 1 + i as u64, "DROP"))
        .collect();
    let lost: Vec<Vec<u8>> = (0..N)
        .map(|i| msg(&format!("G-RR-L{i:02}"), 1 + i as u64, ""))
        .collect();
    for m in &dropped {
        assert_eq!(call(&relay.addr, m), short(m, b"E901"));
        age_row(&db, &wire::parse_request(m).unwrap().guid, OLD);
    }
    for m in &lost {
        put(
            &db,
            &wire::parse_request(m).unwrap().guid,
            "UNKNOWN",
            Some("E901"),
            Some(m),
            1,
            OLD,
        );
    }
    let all: Arc<Vec<Vec<u8>>> = Arc::new(dropped.iter().chain(&lost).cloned().collect());

    let barrier = Arc::new(Barrier::new(1 + RESENDERS));
    let run = {
        let (barrier, db_path, url) = (barrier.clone(), db.arg().to_string(), core.url());
        thread::spawn(move || {
            barrier.wait();
            tool(
                "resolve",
                &[
                    "--db",
                    &db_path,
                    "--core",
                    &url,
                    "--min-age",
                    "60",
                    "--json",
                ],
            )
        })
    };
    let resenders: Vec<_> = (0..RESENDERS)
        .map(|t| {
            let (barrier, all, addr) = (barrier.clone(), all.clone(), relay.addr.clone());
            thread::spawn(move || {
                barrier.wait();
                let mut c = Chan::connect(&addr);
                let mut out = Vec::new();
                for round in 0..3 {
                    for k in 0..all.len() {
                        let m = &all[(k + t * 5 + round * 3) % all.len()];
                        out.push((m.clone(), c.call(m)));
                    }
                }
                out
            })
        })
        .collect();
    let r = run.join().unwrap();
    r.expect_code(0);
    let j = run_json(&r);
    assert_eq!(
        (&j["examined"], &j["done"], &j["failed"], &j["raced"]),
        (&(2 * N).into(), &N.into(), &N.into(), &0.into()),
        "{j}"
    );
    let replies: Vec<(Vec<u8>, Vec<u8>)> = resenders
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();

    for m in &dropped {
        let guid = wire::parse_request(m).unwrap().guid;
        let final_reply = assert_done_as_booked(&db, &core, m);
        for (_, reply) in replies.iter().filter(|(sm, _)| sm == m) {
            assert!(
                *reply == final_reply || *reply == short(m, b"E901"),
                "{guid}: {:?}",
                String::from_utf8_lossy(reply)
            );
        }
        assert_eq!(call(&relay.addr, m), final_reply);
        assert_eq!(
            bookings(&core, &guid),
            1,
            "{guid}: booked by the lost send only"
        );
        assert_eq!(
            db.row(&guid).unwrap().attempts,
            Some(1),
            "{guid}: never re-claimed"
        );
    }
    for m in &lost {
        let guid = wire::parse_request(m).unwrap().guid;
        // Any resend after resolve made it FAILED re-claimed it; make sure one did.
        let final_reply = call(&relay.addr, m);
        assert_eq!(code(&final_reply), "0000", "{guid}");
        assert_eq!(assert_done_as_booked(&db, &core, m), final_reply);
        for (_, reply) in replies.iter().filter(|(sm, _)| sm == m) {
            assert!(
                *reply == final_reply || *reply == short(m, b"E901") || *reply == short(m, b"E903"),
                "{guid}: {:?}",
                String::from_utf8_lossy(reply)
            );
        }
        assert_eq!(bookings(&core, &guid), 1, "{guid}");
        assert_eq!(
            db.row(&guid).unwrap().attempts,
            Some(2),
            "{guid}: re-claimed once"
        );
    }
    assert_eq!(total_bookings(&core), 2 * N as u64);
}

#[test]
fn two_resolve_runs_at_once_settle_each_row_once() {
    const N: usize = 40;
    let core = coresim(&[]);
    let db = Db::new();
    let msgs: Vec<Vec<u8>> = (0..N)
        .map(|i| msg(&format!("G-R2R-{i:02}"), 1 + i as u64, ""))
        .collect();
    for (i, m) in msgs.iter().enumerate() {
        put(
            &db,
            &format!("G-R2R-{i:02}"),
            "UNKNOWN",
            Some("E901"),
            Some(m),
            1,
            OLD,
        );
        if i % 2 == 0 {
            core_book(&core, m);
        }
    }
    let barrier = Arc::new(Barrier::new(2));
    let runs: Vec<_> = (0..2)
        .map(|_| {
            let (barrier, db_path, url) = (barrier.clone(), db.arg().to_string(), core.url());
            thread::spawn(move || {
                barrier.wait();
                tool(
                    "resolve",
                    &[
                        "--db",
                        &db_path,
                        "--core",
                        &url,
                        "--min-age",
                        "60",
                        "--json",
                    ],
                )
            })
        })
        .collect();
    let outs: Vec<serde_json::Value> = runs
        .into_iter()
        .map(|h| {
            let r = h.join().unwrap();
            r.expect_code(0);
            run_json(&r)
        })
        .collect();
    let n = |k: &str| outs[0][k].as_u64().unwrap() + outs[1][k].as_u64().unwrap();
    assert_eq!(
        (n("done"), n("failed")),
        (N as u64 / 2, N as u64 / 2),
        "{outs:?}"
    );
    assert_eq!(
        n("done") + n("failed") + n("raced"),
        n("examined"),
        "{outs:?}"
    );
    for (i, m) in msgs.iter().enumerate() {
        if i % 2 == 0 {
            assert_done_as_booked(&db, &core, m);
        } else {
            assert_failed_e902(&db, m, 1);
        }
    }
    assert_eq!(total_bookings(&core), N as u64 / 2, "resolve never POSTs");
}

#[test]
fn resolve_stale_sent_and_the_relay_settling_the_same_row_one_writer_wins() {
    let core = coresim(&["--slow-ms", "500"]);
    let db = Db::new();
    let relay = relay(&db, &core.url(), &[]);
    let m = msg("G-1W", 321, "SLOW");
    let pending = {
        let (addr, m) = (relay.addr.clone(), m.clone());
        thread::spawn(move || call(&addr, &m))
    };
    assert!(eventually(WAIT, || db.state("G-1W") == Some(State::Sent)));
    // Old enough for the stale-sent floor (as if the relay had been paused that long).
    age_row(&db, "G-1W", OLD);
    // Hold the ledger's write lock so that the relay's result and resolve's settlement
    // both wait for it, then let them go at once.
    let lock = rusqlite::Connection::open(&db.path).unwrap();
    lock.execute_batch("BEGIN IMMEDIATE").unwrap();
    assert!(eventually(WAIT, || bookings(&core, "G-1W") == 1));
    let run = {
        let (db_path, url) = (db.arg().to_string(), core.url());
        thread::spawn(move || {
            tool(
                "resolve",
                &[
                    "--db",
                    &db_path,
                    "--core",
                    &url,
                    "--min-age",
                    "60",
                    "--stale-sent",
                    "60",
                    "--json",
                ],
            )
        })
    };
    assert!(eventually(WAIT, || inquiries(&core) == 1));
    lock.execute_batch("ROLLBACK").unwrap();

    let reply = pending.join().unwrap();
    let r = run.join().unwrap();
    r.expect_code(0);
    let j = run_json(&r);
    assert_eq!(
        (&j["examined"], &j["skipped"], &j["failed"]),
        (&1.into(), &0.into(), &0.into()),
        "{j}"
    );
    assert_eq!(
        j["done"].as_u64().unwrap() + j["raced"].as_u64().unwrap(),
        1,
        "{j}"
    );
    let stored = assert_done_as_booked(&db, &core, &m);
    assert_eq!(reply, stored, "the channel hears what the ledger holds");
    assert_eq!(call(&relay.addr, &m), stored);
    assert_eq!(db.row("G-1W").unwrap().attempts, Some(1));
    assert_eq!(bookings(&core, "G-1W"), 1);
}

/// A request message for `guid` written by hand: the encoder refuses GUIDs the contract
/// calls malformed, and these tests need to send them.
fn raw_msg(guid: &str, amount: u64, memo: &str) -> Vec<u8> {
    let mut m = msg("X", amount, memo);
    m[5..41].copy_from_slice(format!("{guid:<36}").as_bytes());
    m
}

#[test]
fn a_guid_made_only_of_dots_is_malformed_and_never_reaches_the_core() {
    // `/v1/transfers/..` is normalised by servers and proxies to another path, whose 404
    // would mark a booked transfer FAILED: such GUIDs are refused at the door (E900).
    let core = coresim(&[]);
    let db = Db::new();
    let relay = relay(&db, &core.url(), &[]);
    for g in [".", "..", "..."] {
        let m = raw_msg(g, 5, "");
        assert_eq!(call(&relay.addr, &m), short(&m, b"E900"), "{g}");
        assert_eq!(db.row(g), None);
    }
    // Dots among other characters are fine, and asked about verbatim.
    let dotted = msg("a..b", 5, "DROP");
    assert_eq!(call(&relay.addr, &dotted), short(&dotted, b"E901"));
    // A row made by hand for a dots-only GUID is skipped, never asked about.
    let hand = raw_msg("..", 6, "");
    put(&db, "..", "UNKNOWN", Some("E901"), Some(&hand), 1, OLD);
    age_row(&db, "a..b", OLD);
    let r = resolve(&db, &core.url(), &["--min-age", "60", "--json"]);
    r.expect_code(3);
    let j = run_json(&r);
    assert_eq!((&j["done"], &j["skipped"]), (&1.into(), &1.into()), "{j}");
    assert_eq!(inquiries(&core), 1, "only a..b was asked about");
    let reply = assert_done_as_booked(&db, &core, &dotted);
    assert_eq!(call(&relay.addr, &dotted), reply);
    assert_eq!(db.state(".."), Some(State::Unknown));
    assert_eq!(total_bookings(&core), 1);
}

// ---------------------------------------------------------------------------------------
// purge
// ---------------------------------------------------------------------------------------

#[test]
fn purge_deletes_only_done_rows_older_than_the_retention() {
    let core = coresim(&[]);
    let db = Db::new();
    let relay = relay(&db, &core.url(), &[]);
    let real = msg("G-PU-REAL", 5, "");
    assert_eq!(code(&call(&relay.addr, &real)), "0000");
    age_row(&db, "G-PU-REAL", 10 * DAY);
    let m = |g: &str| msg(g, 1, "");
    for (g, state, rsp, age) in [
        ("G-PU-DONE-30D", "DONE", Some("0000"), 30 * DAY),
        ("G-PU-DONE-8D", "DONE", Some("B001"), 8 * DAY),
        ("G-PU-DONE-6D", "DONE", Some("0000"), 6 * DAY),
        ("G-PU-DONE-1D", "DONE", Some("0000"), DAY),
        ("G-PU-UNKNOWN", "UNKNOWN", Some("E901"), 100 * DAY),
        ("G-PU-FAILED", "FAILED", Some("E902"), 100 * DAY),
        ("G-PU-SENT", "SENT", None, 100 * DAY),
        ("G-PU-RECEIVED", "RECEIVED", None, 100 * DAY),
    ] {
        put(&db, g, state, rsp, Some(&m(g)), 1, age);
    }
    put(&db, "G-PU-DONE-NULL", "DONE", None, None, 0, 9 * DAY);
    let before = all_rows(&db);
    let at = |g: &str| db.row(g).unwrap().updated_at;

    let r = purge(&db, &["--days", "7", "--dry-run"]);
    r.expect_code(0);
    assert_eq!(
        r.stdout(),
        format!(
            "guid\tstate\trsp_code\tattempts\tupdated_at\n\
             G-PU-DONE-30D\tDONE\t0000\t1\t{}\n\
             G-PU-REAL\tDONE\t0000\t1\t{}\n\
             G-PU-DONE-NULL\tDONE\t-\t0\t{}\n\
             G-PU-DONE-8D\tDONE\tB001\t1\t{}\n\
             purge: dry run, 4 rows selected, nothing sent or written\n",
            at("G-PU-DONE-30D"),
            at("G-PU-REAL"),
            at("G-PU-DONE-NULL"),
            at("G-PU-DONE-8D")
        )
    );
    let r = purge(&db, &["--days", "7", "--dry-run", "--json"]);
    r.expect_code(0);
    assert_eq!(run_json(&r)["count"], 4);
    assert_eq!(all_rows(&db), before, "a dry run deletes nothing");

    let r = purge(&db, &["--days", "7"]);
    r.expect_code(0);
    assert_eq!(
        r.stdout(),
        "purge: 4 deleted (DONE rows older than 7 days)\n"
    );
    let left: Vec<String> = all_rows(&db).into_iter().map(|r| r.guid).collect();
    assert_eq!(
        left,
        [
            "G-PU-DONE-1D",
            "G-PU-DONE-6D",
            "G-PU-FAILED",
            "G-PU-RECEIVED",
            "G-PU-SENT",
            "G-PU-UNKNOWN"
        ]
    );
    for row in all_rows(&db) {
        assert_eq!(
            Some(&row),
            before.iter().find(|b| b.guid == row.guid),
            "kept rows unchanged"
        );
    }

    let r = purge(&db, &["--days", "7", "--json"]);
    r.expect_code(0);
    let j = run_json(&r);
    assert_eq!(
        (&j["tool"], &j["deleted"], &j["days"], &j["exit_code"]),
        (&"purge".into(), &0.into(), &7.into(), &0.into()),
        "{j}"
    );
    assert!(!r.stderr().contains("warning"), "{}", r.stderr());

    let r = purge(&db, &["--days", "0"]);
    r.expect_code(2);
    assert!(r.stderr().contains("--days"), "{}", r.stderr());
    assert_eq!(all_rows(&db).len(), 6, "refused: nothing deleted");
    let r = purge(&db, &["--days", "0", "--force"]);
    r.expect_code(0);
    assert!(
        r.stderr().contains("warning"),
        "--days 0 --force warns: {}",
        r.stderr()
    );
    assert_eq!(
        r.stdout(),
        "purge: 2 deleted (DONE rows older than 0 days)\n"
    );
    let left: Vec<String> = all_rows(&db).into_iter().map(|r| r.guid).collect();
    assert_eq!(
        left,
        ["G-PU-FAILED", "G-PU-RECEIVED", "G-PU-SENT", "G-PU-UNKNOWN"]
    );
    assert_eq!(total_bookings(&core), 1);
}

// ---------------------------------------------------------------------------------------
// Fatal errors and usage
// ---------------------------------------------------------------------------------------

/// Each tool's arguments, all valid except the ledger path.
fn with_db<'a>(name: &str, db: &'a str, core: &'a str) -> Vec<&'a str> {
    match name {
        "resolve" => vec!["--db", db, "--core", core, "--min-age", "60"],
        "reprocess" => vec!["--db", db, "--core", core, "--max-attempts", "3"],
        "purge" => vec!["--db", db, "--days", "7"],
        _ => unreachable!(),
    }
}

#[test]
fn an_unusable_ledger_is_exit_1_with_one_line_naming_it() {
    let db = Db::new();
    let garbage = sibling(&db, "not-a-ledger.db");
    std::fs::write(&garbage, vec![b'x'; 4096]).unwrap();
    let core = dead_core_url();
    for name in ["resolve", "reprocess", "purge"] {
        for path in ["/nonexistent-dir/x.db", garbage.to_str().unwrap()] {
            for extra in [&[][..], &["--dry-run"][..], &["--json"][..]] {
                let mut args = with_db(name, path, &core);
                args.extend_from_slice(extra);
                let r = tool(name, &args);
                r.expect_code(1);
                let err = r.stderr();
                assert_eq!(err.lines().count(), 1, "{name} {path} {extra:?}: {err}");
                assert!(
                    err.contains(path),
                    "{name} {extra:?}: names the path: {err}"
                );
                assert!(err.starts_with(&format!("{name}: ")), "{err}");
                assert_eq!(r.stdout(), "", "{name}: nothing on stdout");
            }
        }
    }
}

#[test]
fn a_bad_core_url_is_exit_1_naming_it() {
    let db = Db::new();
    ledger::Ledger::open(&db.path).unwrap();
    for name in ["resolve", "reprocess"] {
        let r = tool(
            name,
            &[with_db(name, db.arg(), "ftp://x"), vec!["--dry-run"]].concat(),
        );
        r.expect_code(1);
        let r = tool(name, &with_db(name, db.arg(), "ftp://x"));
        r.expect_code(1);
        assert!(r.stderr().contains("ftp://x"), "{name}: {}", r.stderr());
        assert_eq!(r.stderr().lines().count(), 1, "{name}: {}", r.stderr());
    }
}

#[test]
fn a_mistyped_ledger_path_is_exit_1_and_creates_nothing() {
    let db = Db::new(); // the directory exists, the file does not
    let core = dead_core_url();
    for name in ["resolve", "reprocess", "purge", "inspect"] {
        let args = match name {
            "purge" => vec!["--db", db.arg(), "--days", "30"],
            "inspect" => vec!["--db", db.arg()],
            _ => with_db(name, db.arg(), &core),
        };
        let r = tool(name, &args);
        r.expect_code(1);
        assert!(
            r.stderr().contains("does not exist"),
            "{name}: {}",
            r.stderr()
        );
        assert_eq!(r.stderr().lines().count(), 1, "{name}: {}", r.stderr());
        assert!(!db.path.exists(), "{name} created the ledger");
    }
}

#[test]
fn bad_flags_are_exit_2_naming_the_flag() {
    let db = Db::new();
    let core = dead_core_url();
    let d = db.arg();
    let cases: Vec<(&str, Vec<&str>, &str)> = vec![
        ("resolve", vec!["--db", d, "--core", &core], "--min-age"),
        (
            "resolve",
            vec!["--db", d, "--core", &core, "--min-age", "soon"],
            "--min-age",
        ),
        (
            "resolve",
            vec!["--db", d, "--core", &core, "--min-age", "-1"],
            "-1",
        ),
        (
            "resolve",
            vec![
                "--db",
                d,
                "--core",
                &core,
                "--min-age",
                "60",
                "--stale-sent",
                "x",
            ],
            "--stale-sent",
        ),
        (
            "resolve",
            vec!["--db", d, "--core", &core, "--min-age", "60", "--bogus"],
            "--bogus",
        ),
        ("resolve", vec!["--core", &core, "--min-age", "60"], "--db"),
        (
            "reprocess",
            vec!["--db", d, "--core", &core],
            "--max-attempts",
        ),
        (
            "reprocess",
            vec!["--db", d, "--core", &core, "--max-attempts", "0"],
            "--max-attempts",
        ),
        (
            "reprocess",
            vec![
                "--db",
                d,
                "--core",
                &core,
                "--max-attempts",
                "3",
                "--limit",
                "few",
            ],
            "--limit",
        ),
        (
            "reprocess",
            vec!["--db", d, "--core", &core, "--max-attempts", "3", "--bogus"],
            "--bogus",
        ),
        ("purge", vec!["--db", d], "--days"),
        ("purge", vec!["--db", d, "--days", "seven"], "--days"),
        (
            "purge",
            vec!["--db", d, "--days", "7", "--bogus"],
            "--bogus",
        ),
    ];
    for (name, args, flag) in cases {
        let r = tool(name, &args);
        r.expect_code(2);
        assert!(r.stderr().contains(flag), "{name} {args:?}: {}", r.stderr());
        assert_eq!(r.stdout(), "");
    }
    assert!(
        !db.path.exists() || db.count() == 0,
        "usage errors write nothing"
    );
}
