//! Contract §11: the recovery mark (begun, kept at its earliest `since`, ended, each an
//! event of the ledger with who did it) and a booking the core reports written as a DONE/0000
//! row only where the GUID has none, with the history saying why.

use ledger::recovery::Booked;
use ledger::{Access, Change, State};

use crate::backend::Backend;

pub fn the_recovery_mark_is_begun_kept_at_its_earliest_and_ended(b: &Backend) {
    let s = b.open(Access::Tool);
    assert_eq!(s.recovery().unwrap(), None);
    let m = s
        .begin_recovery("2026-12-06T10:00:00Z", "restore", "restored from b.db")
        .unwrap();
    assert_eq!(m.since, "2026-12-06T10:00:00Z");
    assert_eq!(m.who, "restore");
    // A later begin keeps the earlier instant; an earlier one moves it back.
    let m = s
        .begin_recovery("2026-12-06T11:00:00Z", "operator:alice", "again")
        .unwrap();
    assert_eq!(m.since, "2026-12-06T10:00:00Z");
    let m = s
        .begin_recovery("2026-12-06T09:00:00+01:00", "operator:alice", "earlier")
        .unwrap();
    assert_eq!(m.since, "2026-12-06T08:00:00Z");
    // Every store sees it, the relay's too.
    let relay = b.open(Access::Relay);
    assert_eq!(
        relay.recovery().unwrap().unwrap().since,
        "2026-12-06T08:00:00Z"
    );
    let ended = s.end_recovery("operator:bob", "reconcile clean").unwrap();
    assert_eq!(ended.unwrap().since, "2026-12-06T08:00:00Z");
    assert_eq!(s.end_recovery("operator:bob", "twice").unwrap(), None);
    assert_eq!(relay.recovery().unwrap(), None);
    let events = s.ledger_events(10).unwrap();
    let said: Vec<(&str, &str)> = events
        .iter()
        .map(|e| (e.event.as_str(), e.who.as_str()))
        .collect();
    assert_eq!(said.len(), 4, "{events:?}");
    assert_eq!(said[0].0, "recovery begun");
    assert!(said[0].1.starts_with("restore"), "{said:?}");
    assert_eq!(said[3].0, "recovery ended");
    assert!(said[3].1.starts_with("operator:bob"), "{said:?}");
    assert!(
        events[3]
            .detail
            .as_deref()
            .unwrap()
            .contains("2026-12-06T08:00:00Z"),
        "{events:?}"
    );
    // The newest first when limited, still in order.
    let last = s.ledger_events(1).unwrap();
    assert_eq!(last.len(), 1);
    assert_eq!(last[0].event, "recovery ended");
}

pub fn a_reported_booking_is_written_only_where_the_guid_has_no_row(b: &Backend) {
    for (access, g) in [(Access::Tool, "RB-T"), (Access::Relay, "RB-R")] {
        let s = b.open(access);
        let booked = Booked {
            guid: g.into(),
            tx_code: "TRNF".into(),
            request: Some(b"the request".to_vec()),
            response: b"the reply".to_vec(),
            channel: Some("branch-a".into()),
            who: None,
            reason: "recovery: the core booked it".into(),
        };
        assert!(s.record_booked(&booked).unwrap(), "{g}");
        let row = s.read(g).unwrap().unwrap();
        assert_eq!(row.state, State::Done);
        assert_eq!(row.rsp_code.as_deref(), Some("0000"));
        assert_eq!(row.attempts, Some(0));
        assert_eq!(row.request.as_deref(), Some(&b"the request"[..]));
        assert_eq!(row.response.as_deref(), Some(&b"the reply"[..]));
        assert_eq!(row.channel.as_deref(), Some("branch-a"));
        assert!(
            !s.record_booked(&booked).unwrap(),
            "a row is never replaced"
        );
        let h = s.history(g).unwrap();
        assert_eq!(h.len(), 1, "{h:?}");
        assert_eq!(h[0].reason.as_deref(), Some("recovery: the core booked it"));

        // No row is replaced, whatever its state.
        let claimed = format!("{g}-claimed");
        assert!(s.claim_new(&claimed, "TRNF", b"req", None).unwrap());
        let other = Booked {
            guid: claimed.clone(),
            request: None,
            ..booked.clone()
        };
        assert!(!s.record_booked(&other).unwrap());
        assert_eq!(s.read(&claimed).unwrap().unwrap().state, State::Sent);
        let c = Change::new(
            &claimed,
            State::Sent,
            Some(1),
            State::Failed,
            *b"E902",
            vec![],
        );
        assert!(s.transition(&c).unwrap());
        assert!(!s.record_booked(&other).unwrap());
        assert_eq!(s.read(&claimed).unwrap().unwrap().state, State::Failed);
    }
}
