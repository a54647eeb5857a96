//! `purge` end to end: only DONE rows older than the retention go, in chunks; `--days 0`
//! only with `--force`.

use crate::util::*;

/// A row holding a request for `guid`, in `state` with `rsp`, `age` seconds old.
fn aged(guid: &str, state: State, rsp: Option<&str>, age: u64) -> RowSpec {
    RowSpec::of(&msg(guid, 1, ""), state).code(rsp).age(age)
}

#[test]
fn purge_deletes_only_done_rows_older_than_the_retention() {
    skip_if_unavailable!();
    let s = Scene::new()
        .core(&[])
        .relay(&[])
        .rows([
            aged("G-PU-DONE-30D", State::Done, Some("0000"), 30 * DAY),
            aged("G-PU-DONE-8D", State::Done, Some("B001"), 8 * DAY),
            aged("G-PU-DONE-6D", State::Done, Some("0000"), 6 * DAY),
            aged("G-PU-DONE-1D", State::Done, Some("0000"), DAY),
            aged("G-PU-UNKNOWN", State::Unknown, Some("E901"), 100 * DAY),
            aged("G-PU-FAILED", State::Failed, Some("E902"), 100 * DAY),
            aged("G-PU-SENT", State::Sent, None, 100 * DAY),
            aged("G-PU-RECEIVED", State::Received, None, 100 * DAY),
            RowSpec::new("G-PU-DONE-NULL", State::Done)
                .attempts(0)
                .age(9 * DAY),
        ])
        .build();
    let real = msg("G-PU-REAL", 5, "");
    assert_eq!(code(&s.call(&real)), "0000");
    s.db.age("G-PU-REAL", 10 * DAY);
    let before = rows_by_guid(&s.db);
    let at = |g: &str| s.db.row(g).unwrap().updated_at;

    let r = purge(&s.db, &["--days", "7", "--dry-run"]);
    r.expect_code(EXIT_SETTLED);
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
    let r = purge(&s.db, &["--days", "7", "--dry-run", "--json"]);
    r.expect_code(EXIT_SETTLED);
    assert_eq!(r.json()["count"], 4);
    assert_eq!(rows_by_guid(&s.db), before, "a dry run deletes nothing");

    let r = purge(&s.db, &["--days", "7"]);
    r.expect_code(EXIT_SETTLED);
    assert_eq!(
        r.stdout(),
        "purge: 4 deleted (DONE rows older than 7 days)\n"
    );
    let left: Vec<String> = rows_by_guid(&s.db).into_iter().map(|r| r.guid).collect();
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
    for row in rows_by_guid(&s.db) {
        assert_eq!(
            Some(&row),
            before.iter().find(|b| b.guid == row.guid),
            "kept rows unchanged"
        );
    }

    let r = purge(&s.db, &["--days", "7", "--json"]);
    r.expect_code(EXIT_SETTLED);
    let j = r.json();
    assert_eq!(j["tool"], "purge", "{j}");
    assert_counts(
        &j,
        &[
            ("deleted", 0),
            ("days", 7),
            ("exit_code", EXIT_SETTLED.into()),
        ],
    );
    assert!(!r.stderr().contains("warning"), "{}", r.stderr());

    let r = purge(&s.db, &["--days", "0"]);
    r.expect_code(EXIT_USAGE);
    assert!(r.stderr().contains("--days"), "{}", r.stderr());
    assert_eq!(s.db.count(), 6, "refused: nothing deleted");
    let r = purge(&s.db, &["--days", "0", "--force"]);
    r.expect_code(EXIT_SETTLED);
    assert!(
        r.stderr().contains("warning"),
        "--days 0 --force warns: {}",
        r.stderr()
    );
    assert_eq!(
        r.stdout(),
        "purge: 2 deleted (DONE rows older than 0 days)\n"
    );
    let left: Vec<String> = rows_by_guid(&s.db).into_iter().map(|r| r.guid).collect();
    assert_eq!(
        left,
        ["G-PU-FAILED", "G-PU-RECEIVED", "G-PU-SENT", "G-PU-UNKNOWN"]
    );
    assert_eq!(s.core().total_bookings(), 1);
}

#[test]
fn purge_deletes_in_chunks_and_only_old_done_rows() {
    skip_if_unavailable!();
    const N: usize = 2500;
    let s = Scene::new()
        .rows([
            aged("K-UNKNOWN", State::Unknown, Some("E901"), 40 * DAY),
            aged("K-FAILED", State::Failed, Some("E902"), 40 * DAY),
            aged("K-SENT", State::Sent, None, 40 * DAY),
            aged("K-RECEIVED", State::Received, None, 40 * DAY),
            aged("K-DONE-29D", State::Done, Some("0000"), 29 * DAY),
            aged("K-DONE-YOUNG", State::Done, Some("B001"), 60),
        ])
        .build();
    let bulk: Vec<RowSpec> = (1..=N)
        .map(|i| {
            RowSpec::new(&format!("G-PC-{i:05}"), State::Done)
                .code("0000")
                .age(40 * DAY)
        })
        .collect();
    insert_all(&s.db, &bulk);
    let not_bulk = |rows: Vec<Row>| -> Vec<Row> {
        rows.into_iter()
            .filter(|r| !r.guid.starts_with("G-PC-"))
            .collect()
    };
    let before = not_bulk(rows_by_guid(&s.db));
    assert_eq!(before.len(), 6);
    assert_eq!(s.db.count(), (N + 6) as i64);

    let r = purge(&s.db, &["--days", "30", "--json"]);
    r.expect_code(EXIT_SETTLED);
    let j = r.json();
    let chunk = ledger::store::PURGE_CHUNK;
    assert_eq!(chunk, 1000);
    assert_eq!(j["tool"], "purge", "{j}");
    assert_counts(
        &j,
        &[
            ("deleted", N as u64),
            ("chunks", (N / chunk + 1) as u64),
            ("exit_code", EXIT_SETTLED.into()),
        ],
    );
    assert_eq!(j["chunks"], 3);
    assert_eq!(
        not_bulk(rows_by_guid(&s.db)),
        before,
        "other rows untouched"
    );
}

/// A history row for `guid` written by hand `days` ago (history rows are never updated, so
/// an old change is made by inserting it so).
fn old_history(db: &TempLedger, guid: &str, from: &str, to: &str, days: u64) {
    by_hand(
        db,
        &format!(
            "INSERT INTO tx_history (guid, from_state, to_state, who, at) VALUES ('{guid}', \
             '{from}', '{to}', 'relay', strftime('%Y-%m-%d %H:%M:%f', 'now', '-{days} days'))"
        ),
        &format!(
            "INSERT INTO tx_history (guid, from_state, to_state, who, at) VALUES ('{guid}', \
             '{from}', '{to}', 'relay', now() - make_interval(days => {days}))"
        ),
    );
}

#[test]
fn history_goes_by_its_own_retention_only_for_guids_no_longer_in_doubt() {
    skip_if_unavailable!();
    let s = Scene::new()
        .rows([
            aged("G-PH-UNKNOWN", State::Unknown, Some("E901"), 400 * DAY),
            aged("G-PH-SENT", State::Sent, None, 400 * DAY),
            aged("G-PH-FAILED", State::Failed, Some("E902"), 400 * DAY),
            aged("G-PH-DONE-YOUNG", State::Done, Some("0000"), DAY),
            aged("G-PH-DONE-OLD", State::Done, Some("0000"), 30 * DAY),
        ])
        .build();
    // Each row's claim and result 400 days ago; G-PH-GONE's row was purged long since.
    for g in [
        "G-PH-UNKNOWN",
        "G-PH-SENT",
        "G-PH-FAILED",
        "G-PH-DONE-YOUNG",
        "G-PH-DONE-OLD",
        "G-PH-GONE",
    ] {
        old_history(&s.db, g, "SENT", "UNKNOWN", 400);
    }
    old_history(&s.db, "G-PH-GONE", "DONE", "", 399);
    let len = |g: &str| s.db.store().history(g).expect("read the history").len();
    // The hand-made rows' own inserts (now) and the two old ones.
    assert_eq!(len("G-PH-UNKNOWN"), 2);
    assert_eq!(len("G-PH-GONE"), 2);

    let r = purge(&s.db, &["--days", "7", "--history-days", "365", "--json"]);
    r.expect_code(EXIT_SETTLED);
    let j = r.json();
    // G-PH-DONE-OLD is purged now (its delete is a new history row, kept), then its old
    // history goes, and G-PH-GONE's; nothing else.
    assert_counts(&j, &[("deleted", 1), ("history_deleted", 3)]);
    for (g, kept) in [
        ("G-PH-UNKNOWN", 2),
        ("G-PH-SENT", 2),
        ("G-PH-FAILED", 2),
        ("G-PH-DONE-YOUNG", 2),
        ("G-PH-DONE-OLD", 2),
        ("G-PH-GONE", 0),
    ] {
        assert_eq!(len(g), kept, "{g}");
    }
    // The rows in doubt still show their claim and their E901 in `inspect show`.
    let h = s.db.store().history("G-PH-UNKNOWN").unwrap();
    assert_eq!(
        (h[0].from_state.as_deref(), h[0].to_state.as_deref()),
        (None, Some("UNKNOWN"))
    );
    assert_eq!(h[1].to_state.as_deref(), Some("UNKNOWN"));
}
