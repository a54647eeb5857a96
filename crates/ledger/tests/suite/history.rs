//! The history that outlives the row: one `tx_history` row for every change of a `tx` row,
//! whoever made it (our tools, or SQL by hand), written in the same transaction; never
//! updated; kept when the row is purged; with a retention of its own.

use ledger::{Access, Change, Db, State, Store};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

use crate::backend::{Backend, hand};

/// One thing that may change rows: through the store, or by hand.
#[derive(Debug, Clone)]
enum Op {
    Claim(usize),
    ReclaimFailed(usize),
    ReclaimForResend(usize),
    Transition(usize, State, State),
    Purge,
    HandInsert(usize),
    HandUpdate(usize, State),
    HandDelete(usize),
    /// SQLite's `INSERT OR REPLACE` (PostgreSQL's twin: an upsert that updates).
    HandReplace(usize),
}

const GUIDS: [&str; 3] = ["H-A", "H-B", "H-C"];
fn op() -> impl Strategy<Value = Op> {
    let g = 0..GUIDS.len();
    let st = proptest::sample::select(&State::ALL[..]);
    prop_oneof![
        3 => g.clone().prop_map(Op::Claim),
        1 => g.clone().prop_map(Op::ReclaimFailed),
        1 => g.clone().prop_map(Op::ReclaimForResend),
        4 => (g.clone(), st.clone(), st.clone()).prop_map(|(g, a, b)| Op::Transition(g, a, b)),
        1 => Just(Op::Purge),
        1 => g.clone().prop_map(Op::HandInsert),
        2 => (g.clone(), st).prop_map(|(g, s)| Op::HandUpdate(g, s)),
        1 => g.clone().prop_map(Op::HandDelete),
        1 => g.prop_map(Op::HandReplace),
    ]
}

/// Runs `op` and returns how many rows it changed, and who the history must name.
fn run(b: &Backend, s: &dyn Store, op: &Op) -> (u64, &'static str) {
    let req = |g: usize| format!("request {}", GUIDS[g]).into_bytes();
    match op {
        Op::Claim(g) => (
            u64::from(s.claim_new(GUIDS[*g], "TRNF", &req(*g), None).unwrap()),
            "suite",
        ),
        Op::ReclaimFailed(g) => (
            u64::from(
                s.reclaim_failed(GUIDS[*g], &req(*g), None)
                    .unwrap()
                    .is_some(),
            ),
            "suite",
        ),
        Op::ReclaimForResend(g) => (
            u64::from(s.reclaim_for_resend(GUIDS[*g], 9).unwrap().is_some()),
            "suite",
        ),
        Op::Transition(g, from, to) => {
            let c = Change::new(GUIDS[*g], *from, None, *to, *b"E901", b"r".to_vec());
            (u64::from(s.transition(&c).unwrap()), "suite")
        }
        Op::Purge => (s.purge_chunk(0, 100).unwrap() as u64, "suite"),
        Op::HandInsert(g) => (
            b.by_hand(&format!(
                "INSERT INTO tx (guid, state) VALUES ('{}', 'DONE') ON CONFLICT (guid) DO NOTHING",
                GUIDS[*g]
            ))
            .unwrap(),
            "sql",
        ),
        Op::HandUpdate(g, st) => (
            b.by_hand(&format!(
                "UPDATE tx SET state = '{}' WHERE guid = '{}'",
                st.as_str(),
                GUIDS[*g]
            ))
            .unwrap(),
            "sql",
        ),
        Op::HandDelete(g) => (
            b.by_hand(&format!("DELETE FROM tx WHERE guid = '{}'", GUIDS[*g]))
                .unwrap(),
            "sql",
        ),
        Op::HandReplace(g) => match b.db {
            // The replaced row is deleted (a change the history records) and a new one
            // inserted; SQLite counts only the insert.
            Db::Sqlite(_) => {
                let existed = u64::from(s.read(GUIDS[*g]).unwrap().is_some());
                let sql = format!(
                    "INSERT OR REPLACE INTO tx (guid, state) VALUES ('{}', 'DONE')",
                    GUIDS[*g]
                );
                (existed + b.by_hand(&sql).unwrap(), "sql")
            }
            Db::Postgres(_) => (
                b.by_hand(&format!(
                    "INSERT INTO tx (guid, state) VALUES ('{}', 'DONE') \
                     ON CONFLICT (guid) DO UPDATE SET state = excluded.state",
                    GUIDS[*g]
                ))
                .unwrap(),
                "sql",
            ),
        },
    }
}

/// Runs random sequences of operations on fresh ledgers made by `make`, through the store
/// `access` opens (a tool's, or the relay's, which shares commits on SQLite), and checks after
/// each operation that it added exactly as many history rows as it changed rows, naming who
/// made the change.
fn every_change_leaves_one_history_row(make: impl Fn() -> Backend, cases: u32, access: Access) {
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&proptest::collection::vec(op(), 1..25), |ops| {
            let b = make();
            let s = b.open(access);
            let mut expected = 0;
            for op in &ops {
                let (changed, who) = run(&b, s.as_ref(), op);
                expected += changed;
                prop_assert_eq!(b.history_count(), expected, "after {:?} in {:?}", op, ops);
                if changed == 1 {
                    let g = match op {
                        Op::Claim(g)
                        | Op::ReclaimFailed(g)
                        | Op::ReclaimForResend(g)
                        | Op::Transition(g, ..)
                        | Op::HandInsert(g)
                        | Op::HandUpdate(g, _)
                        | Op::HandDelete(g)
                        | Op::HandReplace(g) => GUIDS[*g],
                        Op::Purge => continue,
                    };
                    let last = s.history(g).unwrap().pop().unwrap();
                    prop_assert_eq!(&last.who, who, "{:?}", op);
                }
            }
            Ok(())
        })
        .unwrap();
}

pub fn every_change_of_a_row_leaves_exactly_one_history_row(b: &Backend) {
    // The suite's backend is one ledger; the property needs a fresh one per case.
    for access in [Access::Tool, Access::Relay] {
        if b.arg.starts_with("postgres") {
            every_change_leaves_one_history_row(|| Backend::postgres().unwrap(), 8, access);
        } else {
            every_change_leaves_one_history_row(Backend::sqlite, 32, access);
        }
    }
}

pub fn the_history_names_who_changed_a_row_and_why(b: &Backend) {
    let s = b.tool();
    assert!(s.claim_new("H1", "TRNF", b"req", None).unwrap());
    let settle = Change::new(
        "H1",
        State::Sent,
        Some(1),
        State::Unknown,
        *b"E901",
        b"r".into(),
    )
    .by("operator:ann")
    .because("confirmed by phone");
    assert!(s.transition(&settle).unwrap());
    let relay = b.open(Access::Relay);
    let done = Change::new(
        "H1",
        State::Unknown,
        Some(1),
        State::Done,
        *b"0000",
        b"d".into(),
    )
    .because("late reply");
    assert!(relay.transition(&done).unwrap());
    b.by_hand("UPDATE tx SET attempts = 7 WHERE guid = 'H1'")
        .unwrap();
    let h = s.history("H1").unwrap();
    type Seen<'a> = (Option<&'a str>, Option<&'a str>, &'a str, Option<&'a str>);
    let seen: Vec<Seen<'_>> = h
        .iter()
        .map(|r| {
            (
                r.from_state.as_deref(),
                r.to_state.as_deref(),
                r.who.as_str(),
                r.reason.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            (None, Some("SENT"), "suite", None),
            (
                Some("SENT"),
                Some("UNKNOWN"),
                "operator:ann",
                Some("confirmed by phone")
            ),
            (Some("UNKNOWN"), Some("DONE"), "suite", Some("late reply")),
            (Some("DONE"), Some("DONE"), "sql", None),
        ]
    );
    assert_eq!(h[1].rsp_code.as_deref(), Some("E901"));
    assert_eq!(h[3].attempts, Some(7));
    assert!(
        h.windows(2)
            .all(|w| w[0].id < w[1].id && w[0].at <= w[1].at)
    );
}

pub fn history_rows_are_never_updated(b: &Backend) {
    assert!(b.tool().claim_new("H2", "TRNF", b"req", None).unwrap());
    let e = b
        .by_hand("UPDATE tx_history SET who = 'someone else'")
        .unwrap_err();
    assert!(e.contains("never updated"), "{e}");
    assert_eq!(b.tool().history("H2").unwrap()[0].who, "suite");
}

pub fn a_purged_row_keeps_its_history_and_history_has_its_own_retention(b: &Backend) {
    b.put(&[hand("H3", "DONE", Some("0000"), 1, 40 * 86_400)]);
    let s = b.tool();
    assert_eq!(s.purge_chunk(30, 10).unwrap(), 1);
    assert!(s.read("H3").unwrap().is_none());
    let h = s.history("H3").unwrap();
    assert_eq!(h.len(), 2, "inserted, then purged: {h:?}");
    assert_eq!(
        (h[1].from_state.as_deref(), h[1].to_state.as_deref()),
        (Some("DONE"), None)
    );
    assert_eq!(h[1].reason.as_deref(), Some("retention 30 days"));
    // History goes only by its own retention.
    b.old_history("H-OLD", 400);
    // … and only of GUIDs no longer in doubt: an old UNKNOWN row keeps all of it.
    b.put(&[hand("H-DOUBT", "UNKNOWN", Some("E901"), 1, 400 * 86_400)]);
    b.old_history("H-DOUBT", 400);
    assert_eq!(s.purge_history_chunk(365, 30, 10).unwrap(), 1);
    assert!(s.history("H-OLD").unwrap().is_empty());
    assert_eq!(s.history("H-DOUBT").unwrap().len(), 2, "in doubt: kept");
    assert_eq!(s.history("H3").unwrap().len(), 2, "young history stays");
}

pub fn evidence_is_a_history_row_that_changes_nothing(b: &Backend) {
    for access in [Access::Tool, Access::Relay] {
        let s = b.open(access);
        let guid = format!("H-EV-{access:?}");
        assert!(s.claim_new(&guid, "TRNF", b"req", None).unwrap());
        let row = s.read(&guid).unwrap();
        let e = ledger::state::Evidence {
            guid: guid.clone(),
            attempt: 1,
            rsp_code: "0000".into(),
            reason: "possible double booking: attempt 1 booked: core_ref C1".into(),
        };
        s.record_evidence(&e).unwrap();
        assert_eq!(s.read(&guid).unwrap(), row, "the row is untouched");
        let h = s.history(&guid).unwrap();
        assert_eq!(h.len(), 2, "{h:#?}");
        let last = &h[1];
        assert_eq!(
            (
                last.from_state.as_deref(),
                last.to_state.as_deref(),
                last.rsp_code.as_deref(),
                last.attempts,
                last.who.as_str(),
                last.reason.as_deref()
            ),
            (
                Some("SENT"),
                Some("SENT"),
                Some("0000"),
                Some(1),
                "suite",
                Some(e.reason.as_str())
            )
        );
    }
}

/// SQLite only: `INSERT OR REPLACE` deletes the row it replaces without firing the delete
/// trigger; the insert trigger records the replaced row (as its history last had it), on a
/// new ledger and on one made before schema version 5.
#[test]
fn sqlite_insert_or_replace_records_the_row_it_replaced() {
    let b = Backend::sqlite();
    let Db::Sqlite(path) = &b.db else {
        unreachable!()
    };
    let old_trigger = "DROP TRIGGER tx_history_on_insert; \
        CREATE TRIGGER tx_history_on_insert AFTER INSERT ON tx BEGIN \
        INSERT INTO tx_history (guid, from_state, to_state, rsp_code, attempts, who, reason) \
        VALUES (NEW.guid, NULL, NEW.state, NEW.rsp_code, NEW.attempts, 'sql', NULL); END; \
        PRAGMA user_version = 4;";
    for upgraded in [false, true] {
        if upgraded {
            let c = rusqlite::Connection::open(path).unwrap();
            c.execute_batch(old_trigger).unwrap();
        }
        let s = b.tool(); // applies the schema to a version-4 file
        let guid = format!("H-REPL-{upgraded}");
        assert!(s.claim_new(&guid, "TRNF", b"req", None).unwrap());
        let c = Change::new(
            &guid,
            State::Sent,
            Some(1),
            State::Unknown,
            *b"E901",
            b"r".into(),
        );
        assert!(s.transition(&c).unwrap());
        b.by_hand(&format!(
            "INSERT OR REPLACE INTO tx (guid, state, attempts) VALUES ('{guid}', 'FAILED', 3)"
        ))
        .unwrap();
        let seen: Vec<_> = s
            .history(&guid)
            .unwrap()
            .into_iter()
            .map(|h| {
                (
                    h.from_state,
                    h.to_state,
                    h.rsp_code,
                    h.attempts,
                    h.who,
                    h.reason,
                )
            })
            .collect();
        let st = |s: &str| Some(s.to_string());
        assert_eq!(
            seen[2..],
            [
                (
                    st("UNKNOWN"),
                    None,
                    st("E901"),
                    Some(1),
                    "sql".to_string(),
                    st("replaced by INSERT OR REPLACE (the row as its history last recorded it)")
                ),
                (None, st("FAILED"), None, Some(3), "sql".to_string(), None),
            ],
            "upgraded: {upgraded}"
        );
    }
}
