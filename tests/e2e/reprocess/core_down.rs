//! A core that is down spends no attempt (contract §5, v1.2): before any claim reprocess
//! makes sure the core answers — the canary inquiry resolve makes, or in a ledger without a
//! booking an inquiry about the first row to resend — and claims nothing while it does not.

use std::collections::BTreeMap;

use crate::util::*;

const RUNS: usize = 10;

fn failed_msgs(prefix: &str) -> Vec<Vec<u8>> {
    (0..3)
        .map(|i| msg(&format!("{prefix}-{i}"), 10 + i, ""))
        .collect()
}

/// Every row still FAILED/E902 with `attempts` attempts.
fn assert_all_failed(db: &TempLedger, msgs: &[Vec<u8>], attempts: i64) {
    for m in msgs {
        let row = db.row(&guid_of(m)).unwrap();
        assert_eq!(
            (row.state, row.rsp_code.as_deref(), row.attempts),
            (State::Failed, Some("E902"), Some(attempts)),
            "{}",
            row.guid
        );
    }
}

/// `RUNS` runs against a dead core: each exits 3 with one line on stderr saying no row was
/// claimed, counts every row "not tried", and leaves every row as it was.
fn ten_runs_against_a_dead_core(db: &TempLedger, msgs: &[Vec<u8>], extra: &[&str]) {
    let mut args = vec!["--max-attempts", "3", "--json"];
    args.extend_from_slice(extra);
    for run in 0..RUNS {
        let r = reprocess(db, &dead_url(), &args);
        r.expect_code(EXIT_LEFT);
        assert_counts(
            &r.json(),
            &[
                ("examined", msgs.len() as u64),
                ("sent", 0),
                ("not_tried", msgs.len() as u64),
                ("exit_code", EXIT_LEFT.into()),
            ],
        );
        let lines: Vec<&str> = r.stderr().lines().collect();
        assert_eq!(lines.len(), 1, "run {run}: one line: {:?}", r.stderr());
        assert!(
            lines[0].contains("no row claimed"),
            "run {run}: {:?}",
            lines[0]
        );
        assert_all_failed(db, msgs, 1);
    }
}

#[test]
fn ten_runs_against_a_core_that_is_down_spend_no_attempt() {
    skip_if_unavailable!();
    let msgs = failed_msgs("G-RD");
    let s = Scene::new()
        .rows(
            msgs.iter()
                .enumerate()
                .map(|(i, m)| RowSpec::failed(m).age(300 - 100 * i as u64)),
        )
        .build();
    // No booking in the ledger: the probe is an inquiry about the oldest row, G-RD-0.
    ten_runs_against_a_dead_core(&s.db, &msgs, &[]);
    ten_runs_against_a_dead_core(&s.db, &msgs, &["--parallel", "8"]);
    let r = reprocess(&s.db, &dead_url(), &["--max-attempts", "3"]);
    assert_eq!(
        r.stdout(),
        "reprocess: 3 examined, 0 sent, 0 DONE, 0 FAILED, 0 UNKNOWN, \
         3 not tried (core unreachable), 0 skipped, 0 changed by another writer\n"
    );

    // The core is back: every row goes once, on its second attempt.
    let core = Core::start(&[]);
    let r = reprocess(&s.db, &core.url(), &["--max-attempts", "2", "--json"]);
    r.expect_code(EXIT_SETTLED);
    assert_counts(&r.json(), &[("examined", 3), ("sent", 3), ("done", 3)]);
    let want: BTreeMap<String, u64> = msgs.iter().map(|m| (guid_of(m), 1)).collect();
    assert_eq!(core.by_guid(), want);
    for m in &msgs {
        assert_done_as_booked(&s.db, &core, m);
        assert_eq!(s.db.row(&guid_of(m)).unwrap().attempts, Some(2));
    }
}

#[test]
fn the_canary_decides_before_any_claim() {
    skip_if_unavailable!();
    let canary = msg("G-RDC-CANARY", 5, "");
    let msgs = failed_msgs("G-RDC");
    let s = Scene::new()
        .core(&[])
        .row(RowSpec::of(&canary, State::Done).code("0000").age(DAY))
        .rows(msgs.iter().map(|m| RowSpec::failed(m).age(OLD)))
        .build();
    ten_runs_against_a_dead_core(&s.db, &msgs, &[]);

    // A core that never booked the ledger's newest booking (another environment): exit 1,
    // nothing claimed, nothing POSTed.
    let r = s.reprocess(&["--max-attempts", "3"]);
    r.expect_code(EXIT_FATAL);
    assert_eq!(r.stdout(), "");
    assert!(r.stderr().contains("G-RDC-CANARY"), "{}", r.stderr());
    assert!(r.stderr().contains("no row claimed"), "{}", r.stderr());
    assert_all_failed(&s.db, &msgs, 1);
    assert_eq!(s.core().total_bookings(), 0);

    // The core that booked it: the canary passes and the rows go.
    s.core().book(&canary);
    let r = s.reprocess(&["--max-attempts", "3", "--json"]);
    r.expect_code(EXIT_SETTLED);
    assert_counts(&r.json(), &[("examined", 3), ("sent", 3), ("done", 3)]);
    for m in &msgs {
        assert_done_as_booked(&s.db, s.core(), m);
    }

    // Nothing left to resend: nothing to ask, even of a core that is down.
    let r = reprocess(&s.db, &dead_url(), &["--max-attempts", "3"]);
    r.expect_code(EXIT_SETTLED);
    assert!(
        r.stdout().starts_with("reprocess: 0 examined"),
        "{}",
        r.stdout()
    );
    assert!(!r.stderr().contains("no row claimed"), "{}", r.stderr());
}
