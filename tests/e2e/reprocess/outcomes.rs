//! What reprocess records: each answer as the relay would.

use std::collections::BTreeMap;

use wire::E_UNKNOWN;

use crate::util::*;

#[test]
fn reprocess_records_every_outcome_as_the_relay_does() {
    skip_if_unavailable!();
    let drop_m = msg("G-RO-DROP", 10, "DROP");
    let f500_m = msg("G-RO-500", 20, "FAIL500");
    let rej_m = msg("G-RO-REJ", 30, "REJECT");
    let ok_m = msg("G-RO-OK", 40, "");
    let s = Scene::new()
        .core(&[])
        .rows(
            [&drop_m, &f500_m, &rej_m, &ok_m]
                .into_iter()
                .enumerate()
                .map(|(i, m)| RowSpec::failed(m).age(OLD + i as u64)),
        )
        .build();
    let r = s.reprocess(&["--max-attempts", "3", "--json"]);
    r.expect_code(EXIT_LEFT);
    assert_counts(
        &r.json(),
        &[("sent", 4), ("done", 2), ("unknown", 2), ("failed", 0)],
    );

    for (m, booked) in [(&drop_m, 1), (&f500_m, 0)] {
        assert_settled_short(&s.db, m, State::Unknown, &E_UNKNOWN, 2);
        assert_eq!(s.core().bookings(&guid_of(m)), booked, "{}", guid_of(m));
    }
    let row = s.db.row("G-RO-REJ").unwrap();
    assert_eq!(
        (row.state, row.rsp_code.as_deref()),
        (State::Done, Some("B001"))
    );
    assert_eq!(row.response.as_deref(), Some(&short(&rej_m, b"B001")[..]));
    let ok_reply = assert_done_as_booked(&s.db, s.core(), &ok_m);

    // Through a relay: UNKNOWN answers E901 without a POST, DONE replays.
    let relay = s.start_relay(&[]);
    assert_eq!(call(&relay.addr, &drop_m), short(&drop_m, &E_UNKNOWN));
    assert_eq!(call(&relay.addr, &rej_m), short(&rej_m, b"B001"));
    assert_eq!(call(&relay.addr, &ok_m), ok_reply);
    assert_eq!(
        s.core().by_guid(),
        BTreeMap::from([("G-RO-DROP".into(), 1), ("G-RO-OK".into(), 1)])
    );

    // And a later run never touches them again.
    let r = s.reprocess(&["--max-attempts", "9"]);
    r.expect_code(EXIT_SETTLED);
    assert!(
        r.stdout().starts_with("reprocess: 0 examined"),
        "{}",
        r.stdout()
    );
}
