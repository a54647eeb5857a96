//! The history on PostgreSQL is written by statement-level triggers with transition tables
//! (schema version 4): one history row per changed row, whatever the statement — the group
//! commit's batched claims and results, multi-row statements and upserts by hand, an UPDATE
//! that changes a GUID — and a version 3 ledger (one row trigger) upgraded in place, its
//! history kept.

use crate::util::*;

/// One history row: guid, from, to, rsp_code, attempts, who, reason, channel.
type Seen = (
    String,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<i32>,
    String,
    Option<String>,
    Option<String>,
);

/// Every history row with an id above `after`, by id.
fn history_after(c: &mut postgres::Client, after: i64) -> Vec<Seen> {
    c.query(
        "SELECT guid, from_state, to_state, rsp_code, attempts, who, reason, channel \
         FROM tx_history WHERE id > $1 ORDER BY id",
        &[&after],
    )
    .expect("read the history")
    .iter()
    .map(|r| {
        (
            r.get(0),
            r.get(1),
            r.get(2),
            r.get(3),
            r.get(4),
            r.get(5),
            r.get(6),
            r.get(7),
        )
    })
    .collect()
}

/// The highest history id so far (0: none).
fn last_id(c: &mut postgres::Client) -> i64 {
    c.query_one("SELECT coalesce(max(id), 0) FROM tx_history", &[])
        .expect("the last history id")
        .get(0)
}

/// A history row, written briefly.
#[allow(clippy::too_many_arguments)]
fn seen(
    guid: &str,
    from: Option<&str>,
    to: Option<&str>,
    rsp: Option<&str>,
    attempts: i32,
    who: &str,
    reason: Option<&str>,
    channel: Option<&str>,
) -> Seen {
    let s = |x: Option<&str>| x.map(str::to_string);
    (
        guid.into(),
        s(from),
        s(to),
        s(rsp),
        Some(attempts),
        who.into(),
        s(reason),
        s(channel),
    )
}

/// The user triggers on `tx`, by name.
fn triggers_on_tx(c: &mut postgres::Client) -> Vec<String> {
    c.query(
        "SELECT tgname::text FROM pg_trigger WHERE tgrelid = 'tx'::regclass \
         AND NOT tgisinternal ORDER BY tgname",
        &[],
    )
    .expect("list the triggers")
    .iter()
    .map(|r| r.get(0))
    .collect()
}

const V4_TRIGGERS: [&str; 4] = [
    "tx_history_on_delete",
    "tx_history_on_insert",
    "tx_history_on_update",
    "tx_is_never_truncated",
];

/// A ledger made by the version 3 schema (its row trigger `tx_history`) with history of its
/// own is upgraded in place by the next tool that opens it: one log line, the row trigger
/// replaced by the three statement triggers, the old history kept as it was, and new changes
/// recorded by the new triggers, one row each. Applying the schema again changes nothing.
#[test]
fn a_version_3_ledger_is_upgraded_in_place_keeping_its_history() {
    skip_if_unavailable!();
    let db = temp_ledger();
    let mut c = db.pg_client();
    // The schema of version 3, rebuilt by the migration steps: the upgrade's starting point.
    ledger::postgres::create_at_version(&mut c, 3).expect("the version 3 schema");
    c.batch_execute(
        "INSERT INTO tx (guid, state, attempts) VALUES ('V3-B', 'SENT', 1), ('V3-A', 'SENT', 1); \
         UPDATE tx SET state = 'DONE', rsp_code = '0000' WHERE guid = 'V3-A'",
    )
    .expect("a version 3 ledger in use");
    assert_eq!(
        triggers_on_tx(&mut c),
        ["tx_history", "tx_is_never_truncated"]
    );
    let old = history_after(&mut c, 0);
    assert_eq!(old.len(), 3, "{old:#?}");

    let r = purge(&db, &["--days", "30"]);
    r.expect_code(EXIT_SETTLED);
    assert_eq!(
        r.stderr()
            .matches(&format!(
                "schema upgraded from version 3 to {}",
                ledger::postgres::SCHEMA_VERSION
            ))
            .count(),
        1,
        "{}",
        r.stderr()
    );
    assert_eq!(triggers_on_tx(&mut c), V4_TRIGGERS);
    let version: i32 = c
        .query_one("SELECT max(version) FROM ledger_schema", &[])
        .unwrap()
        .get(0);
    assert_eq!(version, ledger::postgres::SCHEMA_VERSION);
    assert_eq!(history_after(&mut c, 0), old, "the old history is kept");

    // New changes, by a tool and by hand, recorded once each by the new triggers.
    let mark = last_id(&mut c);
    assert_eq!(mark, 3);
    assert!(
        db.store()
            .claim_new("V3-C", "TRNF", b"req", Some("atm-1"))
            .unwrap()
    );
    c.batch_execute("UPDATE tx SET attempts = 2 WHERE guid IN ('V3-A', 'V3-B')")
        .unwrap();
    assert_eq!(
        history_after(&mut c, mark),
        [
            seen(
                "V3-C",
                None,
                Some("SENT"),
                None,
                1,
                "testkit",
                None,
                Some("atm-1")
            ),
            seen(
                "V3-A",
                Some("DONE"),
                Some("DONE"),
                Some("0000"),
                2,
                "sql",
                None,
                None
            ),
            seen(
                "V3-B",
                Some("SENT"),
                Some("SENT"),
                None,
                2,
                "sql",
                None,
                None
            ),
        ]
    );

    // The schema, run twice more by hand: no second set of triggers, no second row.
    c.batch_execute(&format!(
        "{}\n{}",
        ledger::postgres::SCHEMA,
        ledger::postgres::SCHEMA
    ))
    .expect("the schema, twice");
    assert_eq!(triggers_on_tx(&mut c), V4_TRIGGERS);
    let mark = last_id(&mut c);
    c.batch_execute("DELETE FROM tx WHERE guid = 'V3-C'")
        .unwrap();
    assert_eq!(
        history_after(&mut c, mark),
        [seen(
            "V3-C",
            Some("SENT"),
            None,
            None,
            1,
            "sql",
            None,
            Some("atm-1")
        )]
    );
}

/// A new ledger gets the statement triggers; multi-row statements by hand leave one row per
/// changed row, in the order of the GUIDs within a statement, none for rows not changed; and
/// TRUNCATE is still refused.
#[test]
fn multi_row_statements_by_hand_leave_one_row_per_changed_row() {
    skip_if_unavailable!();
    let db = temp_ledger();
    db.create();
    let mut c = db.pg_client();
    assert_eq!(triggers_on_tx(&mut c), V4_TRIGGERS);
    c.batch_execute(
        "INSERT INTO tx (guid, state) VALUES ('M-3', 'SENT'), ('M-1', 'SENT'), ('M-2', 'FAILED'); \
         UPDATE tx SET state = 'DONE', rsp_code = '0000' WHERE state = 'SENT'; \
         UPDATE tx SET state = 'DONE' WHERE guid = 'M-NONE'; \
         DELETE FROM tx WHERE guid IN ('M-2', 'M-3')",
    )
    .unwrap();
    let sql = |g, from, to, rsp| seen(g, from, to, rsp, 0, "sql", None, None);
    let (sent, done, failed) = (Some("SENT"), Some("DONE"), Some("FAILED"));
    assert_eq!(
        history_after(&mut c, 0),
        [
            sql("M-1", None, sent, None),
            sql("M-2", None, failed, None),
            sql("M-3", None, sent, None),
            sql("M-1", sent, done, Some("0000")),
            sql("M-3", sent, done, Some("0000")),
            sql("M-2", failed, None, None),
            sql("M-3", done, None, Some("0000")),
        ]
    );
    let e = c
        .batch_execute("TRUNCATE tx")
        .expect_err("TRUNCATE tx went through");
    assert!(format!("{e:?}").contains("TRUNCATE tx is refused"), "{e:?}");
}

/// The group commit's statements, written here by hand as a relay's session would send them:
/// a batch of claims `INSERT … SELECT … FROM unnest … ON CONFLICT DO NOTHING RETURNING guid`
/// and a batch of results `UPDATE … FROM unnest … RETURNING`. One history row for each row
/// the statement changed (what it returned), with the session's who and reason; none for a
/// claim lost to an existing row or a result whose guard failed.
#[test]
fn batched_claims_and_results_leave_one_row_per_changed_row() {
    skip_if_unavailable!();
    let db = temp_ledger();
    db.create();
    let mut c = db.pg_client();
    c.batch_execute(
        "INSERT INTO tx (guid, state, attempts, channel) VALUES ('B-OLD', 'DONE', 1, 'atm-9')",
    )
    .unwrap();
    let mark = last_id(&mut c);

    let mut t = c.transaction().unwrap();
    t.execute(
        "SELECT set_config('txrelay.who', 'relay', true), set_config('txrelay.reason', '', true)",
        &[],
    )
    .unwrap();
    let guids = ["B-3", "B-OLD", "B-1", "B-2"];
    let codes = ["TRNF"; 4];
    let requests: Vec<Vec<u8>> = guids.iter().map(|g| g.as_bytes().to_vec()).collect();
    let channels = [Some("atm-1"), Some("atm-1"), None, Some("atm-2")];
    let won: Vec<String> = t
        .query(
            "INSERT INTO tx (guid, tx_code, state, request, attempts, updated_at, channel) \
             SELECT v.guid, v.tx_code, 'SENT', v.request, 1, now(), v.channel \
             FROM unnest($1::text[], $2::text[], $3::bytea[], $4::text[]) \
                  AS v(guid, tx_code, request, channel) \
             ON CONFLICT (guid) DO NOTHING RETURNING guid",
            &[&&guids[..], &&codes[..], &requests, &&channels[..]],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    t.commit().unwrap();
    assert_eq!(won, ["B-3", "B-1", "B-2"], "the claims won");
    let relay = |g, from, to, rsp, attempts, reason, ch| {
        seen(g, from, to, rsp, attempts, "relay", reason, ch)
    };
    let (sent, unknown) = (Some("SENT"), Some("UNKNOWN"));
    assert_eq!(
        history_after(&mut c, mark),
        [
            relay("B-1", None, sent, None, 1, None, None),
            relay("B-2", None, sent, None, 1, None, Some("atm-2")),
            relay("B-3", None, sent, None, 1, None, Some("atm-1")),
        ],
        "none for B-OLD, which the batch did not change"
    );
    let mark = last_id(&mut c);

    // Results: B-1 and B-3 settle; B-2's guard fails (wrong attempt), as does B-OLD's (not SENT).
    let mut t = c.transaction().unwrap();
    t.execute(
        "SELECT set_config('txrelay.who', 'relay', true), \
         set_config('txrelay.reason', 'outcome unknown: read timeout', true)",
        &[],
    )
    .unwrap();
    let guids = ["B-3", "B-2", "B-1", "B-OLD"];
    let from = ["SENT", "SENT", "SENT", "SENT"];
    let to = ["UNKNOWN", "DONE", "UNKNOWN", "DONE"];
    let codes = ["E901", "0000", "E901", "0000"];
    let responses: Vec<Vec<u8>> = vec![b"r".to_vec(); 4];
    let attempts = [1i32, 2, 1, 1];
    let settled: Vec<String> = t
        .query(
            "UPDATE tx SET state = v.to_state, rsp_code = v.rsp_code, response = v.response, \
                 updated_at = now() \
             FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bytea[], \
                         $6::integer[]) AS v(guid, from_state, to_state, rsp_code, response, \
                                             attempts) \
             WHERE tx.guid = v.guid AND tx.state = v.from_state AND tx.attempts = v.attempts \
             RETURNING tx.guid",
            &[
                &&guids[..],
                &&from[..],
                &&to[..],
                &&codes[..],
                &responses,
                &&attempts[..],
            ],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    t.commit().unwrap();
    let mut settled = settled;
    settled.sort();
    assert_eq!(settled, ["B-1", "B-3"]);
    let why = Some("outcome unknown: read timeout");
    assert_eq!(
        history_after(&mut c, mark),
        [
            relay("B-1", sent, unknown, Some("E901"), 1, why, None),
            relay("B-3", sent, unknown, Some("E901"), 1, why, Some("atm-1")),
        ]
    );
}

/// An UPDATE by hand that changes a row's GUID: old and new cannot be paired by GUID, so the
/// old GUID is recorded as leaving its state and the new one as arriving, each saying why;
/// a row of the same statement that keeps its GUID is recorded as any update.
#[test]
fn an_update_that_changes_a_guid_is_recorded_as_leaving_and_arriving() {
    skip_if_unavailable!();
    let db = temp_ledger();
    db.create();
    let mut c = db.pg_client();
    c.batch_execute(
        "INSERT INTO tx (guid, state, rsp_code, attempts, channel) \
         VALUES ('R-OLD', 'UNKNOWN', 'E901', 2, 'atm-1'), ('R-KEPT', 'SENT', NULL, 1, NULL)",
    )
    .unwrap();
    let mark = last_id(&mut c);
    c.batch_execute(
        "SET txrelay.reason = 'fixing a typo'; \
         UPDATE tx SET guid = CASE guid WHEN 'R-OLD' THEN 'R-NEW' ELSE guid END, \
                       attempts = attempts + 1",
    )
    .unwrap();
    assert_eq!(
        history_after(&mut c, mark),
        [
            seen(
                "R-KEPT",
                Some("SENT"),
                Some("SENT"),
                None,
                2,
                "sql",
                Some("fixing a typo"),
                None
            ),
            seen(
                "R-NEW",
                None,
                Some("UNKNOWN"),
                Some("E901"),
                3,
                "sql",
                Some("fixing a typo; guid changed by UPDATE (this row had another guid)"),
                Some("atm-1")
            ),
            seen(
                "R-OLD",
                Some("UNKNOWN"),
                None,
                Some("E901"),
                2,
                "sql",
                Some("fixing a typo; guid changed by UPDATE (this row now has another guid)"),
                Some("atm-1")
            ),
        ]
    );
}

/// `INSERT … ON CONFLICT DO UPDATE` by hand: the rows it inserted are recorded as inserted,
/// the rows it updated as updated, one row each.
#[test]
fn an_upsert_records_the_rows_it_inserted_and_the_rows_it_updated() {
    skip_if_unavailable!();
    let db = temp_ledger();
    db.create();
    let mut c = db.pg_client();
    c.batch_execute("INSERT INTO tx (guid, state, attempts) VALUES ('U-1', 'SENT', 1)")
        .unwrap();
    let mark = last_id(&mut c);
    c.batch_execute(
        "INSERT INTO tx (guid, state, rsp_code, attempts) \
         VALUES ('U-2', 'DONE', '0000', 1), ('U-1', 'DONE', '0000', 1) \
         ON CONFLICT (guid) DO UPDATE SET state = excluded.state, rsp_code = excluded.rsp_code",
    )
    .unwrap();
    let mut h = history_after(&mut c, mark);
    // The two triggers of one statement fire in an order of PostgreSQL's: compare as a set.
    h.sort();
    assert_eq!(
        h,
        [
            seen(
                "U-1",
                Some("SENT"),
                Some("DONE"),
                Some("0000"),
                1,
                "sql",
                None,
                None
            ),
            seen(
                "U-2",
                None,
                Some("DONE"),
                Some("0000"),
                1,
                "sql",
                None,
                None
            ),
        ]
    );
}
