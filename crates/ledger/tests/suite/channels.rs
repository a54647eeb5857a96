//! Contract §8: a GUID belongs to the channel that claimed it. The claim writes the channel
//! in its own statement; a FAILED row is re-claimed only by its own channel, or, when it has
//! none, by anyone (a named channel then writes its name); every other change keeps it; the
//! history records it.

use ledger::{Access, Change, State, Store};

use crate::backend::{Backend, hand};

fn failed(s: &dyn Store, guid: &str, attempt: i64) {
    let c = Change::new(
        guid,
        State::Sent,
        Some(attempt),
        State::Failed,
        *b"E902",
        vec![],
    );
    assert!(s.transition(&c).unwrap(), "{guid} SENT -> FAILED");
}

/// Through the tools' store and the relay's (SQLite: the group commit).
pub fn the_claim_names_its_channel_and_only_that_channel_reclaims(b: &Backend) {
    for (access, g) in [(Access::Tool, "CH-T"), (Access::Relay, "CH-R")] {
        let s = b.open(access);
        assert!(s.claim_new(g, "TRNF", b"req", Some("branch-a")).unwrap());
        assert_eq!(
            s.read(g).unwrap().unwrap().channel.as_deref(),
            Some("branch-a")
        );
        failed(s.as_ref(), g, 1);
        assert_eq!(
            s.reclaim_failed(g, b"req", Some("branch-b")).unwrap(),
            None,
            "B"
        );
        assert_eq!(
            s.reclaim_failed(g, b"req", None).unwrap(),
            None,
            "anonymous"
        );
        let row = s.read(g).unwrap().unwrap();
        assert_eq!(
            (row.state, row.attempts),
            (State::Failed, Some(1)),
            "unchanged"
        );
        assert_eq!(row.channel.as_deref(), Some("branch-a"));
        assert_eq!(
            s.reclaim_failed(g, b"req", Some("branch-a")).unwrap(),
            Some(2)
        );
        assert_eq!(
            s.read(g).unwrap().unwrap().channel.as_deref(),
            Some("branch-a")
        );
    }
}

pub fn an_anonymous_claim_has_no_channel_and_a_named_reclaim_takes_it(b: &Backend) {
    let s = b.tool();
    assert!(s.claim_new("CH-N", "TRNF", b"req", None).unwrap());
    assert_eq!(s.read("CH-N").unwrap().unwrap().channel, None);
    failed(s.as_ref(), "CH-N", 1);
    assert_eq!(
        s.reclaim_failed("CH-N", b"req", Some("branch-b")).unwrap(),
        Some(2)
    );
    assert_eq!(
        s.read("CH-N").unwrap().unwrap().channel.as_deref(),
        Some("branch-b")
    );
    failed(s.as_ref(), "CH-N", 2);
    assert_eq!(
        s.reclaim_failed("CH-N", b"req", None).unwrap(),
        None,
        "now B's"
    );

    // A row inserted by hand has no channel: anyone may re-claim it.
    let mut row = hand("CH-H", "FAILED", Some("E902"), 1, 0);
    row.request = Some(b"req");
    b.put(&[row]);
    assert_eq!(s.reclaim_failed("CH-H", b"req", None).unwrap(), Some(2));
    assert_eq!(s.read("CH-H").unwrap().unwrap().channel, None);
}

/// resolve's and reprocess's changes (transition, the resend re-claim) keep the channel;
/// the history names it at every change.
pub fn every_other_change_keeps_the_channel_and_history_records_it(b: &Backend) {
    let s = b.tool();
    assert!(s.claim_new("CH-K", "TRNF", b"req", Some("atm-7")).unwrap());
    failed(s.as_ref(), "CH-K", 1);
    assert_eq!(s.reclaim_for_resend("CH-K", 5).unwrap(), Some(2));
    let unknown = Change::new(
        "CH-K",
        State::Sent,
        Some(2),
        State::Unknown,
        *b"E901",
        vec![],
    );
    assert!(s.transition(&unknown).unwrap());
    let done = Change::new("CH-K", State::Unknown, None, State::Done, *b"0000", vec![]);
    assert!(s.transition(&done).unwrap());
    assert_eq!(
        s.read("CH-K").unwrap().unwrap().channel.as_deref(),
        Some("atm-7")
    );
    let h = s.history("CH-K").unwrap();
    assert_eq!(h.len(), 5, "{h:?}");
    assert!(
        h.iter().all(|r| r.channel.as_deref() == Some("atm-7")),
        "{h:?}"
    );
}
