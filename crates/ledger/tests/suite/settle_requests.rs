//! Contract §12: a settlement by hand is a request one person makes and another carries out.
//! The ledger refuses a decision by the maker (a trigger: on PostgreSQL the session's role, on
//! SQLite the tools' `txrelay_identity()`), whoever writes the statement; an approval is one
//! guarded change from the state and attempts the request saw, made with the decision or not
//! at all; a request is decided once, and an expired one not at all.

use ledger::settle_request::{Decided, Listed, NewRequest, Status};
use ledger::{Db, State};

use crate::backend::{Backend, Hand};

pub fn new_request(guid: &str, attempts: i64, expires_in_secs: u64) -> NewRequest {
    NewRequest {
        guid: guid.into(),
        seen_state: State::Unknown,
        seen_attempts: attempts,
        outcome: "booked",
        to: State::Done,
        rsp_code: "0000".into(),
        response: format!("reply of {guid}").into_bytes(),
        evidence: "core_ref C1, amount 100, booked_at 2026-12-06T10:00:00Z".into(),
        forced: false,
        min_age_secs: None,
        reason: "the core's operators confirm the booking".into(),
        expires_in_secs,
    }
}

/// Makes `n` as another person than this process's: on PostgreSQL a role of its own; on
/// SQLite a session that tells the ledger's trigger another name (a program of its own, the
/// documented limit of what a file can enforce). That person's name.
fn make_as_someone_else(b: &Backend, n: &NewRequest) -> (i64, String) {
    match &b.db {
        Db::Sqlite(path) => {
            let c = rusqlite::Connection::open(path).unwrap();
            c.create_scalar_function(
                "txrelay_identity",
                0,
                rusqlite::functions::FunctionFlags::SQLITE_UTF8,
                |_| Ok("someone-else".to_string()),
            )
            .unwrap();
            let id = c
                .query_row(
                    "INSERT INTO settle_request (guid, seen_state, seen_attempts, outcome, \
                     to_state, rsp_code, response, evidence, reason, maker, expires_at, \
                     forced, min_age_secs) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, txrelay_identity(), \
                     strftime('%Y-%m-%dT%H:%M:%SZ', 'now', ?10), ?11, ?12) RETURNING id",
                    rusqlite::params![
                        n.guid,
                        n.seen_state.as_str(),
                        n.seen_attempts,
                        n.outcome,
                        n.to.as_str(),
                        n.rsp_code,
                        n.response,
                        n.evidence,
                        n.reason,
                        format!("+{} seconds", n.expires_in_secs),
                        n.forced,
                        n.min_age_secs.map(|s| s as i64),
                    ],
                    |r| r.get(0),
                )
                .unwrap();
            (id, "someone-else".into())
        }
        Db::Postgres(_) => {
            let (store, role) = b.as_other_role();
            (store.make_settle_request(n).unwrap(), role)
        }
    }
}

pub fn the_maker_cannot_approve_and_another_person_carries_it_out(b: &Backend) {
    let me = b.tool();
    b.put(&[
        Hand {
            guid: "SR-1",
            state: "UNKNOWN",
            rsp_code: Some("E901"),
            request: None,
            attempts: Some(1),
            age_secs: 0,
        },
        Hand {
            guid: "SR-2",
            state: "UNKNOWN",
            rsp_code: Some("E901"),
            request: None,
            attempts: Some(1),
            age_secs: 0,
        },
    ]);
    // Made by this process: listed, named after its maker, and not approvable by it.
    let mine = me
        .make_settle_request(&new_request("SR-1", 1, 3600))
        .unwrap();
    let pending = me.settle_requests(Listed::Pending, 10).unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(me.identity().unwrap(), b.me());
    let u = me.undecided_settle_requests().unwrap();
    assert_eq!((u.pending, u.expired), (1, 0));
    assert!(u.oldest_pending_secs.is_some_and(|s| s < 60.0), "{u:?}");
    let r = &pending[0];
    assert_eq!(
        (r.id, r.guid.as_str(), r.status),
        (mine, "SR-1", Status::Pending)
    );
    assert_eq!(r.maker, b.me());
    assert_eq!((r.seen_state, r.seen_attempts), (State::Unknown, 1));
    let e = me
        .approve_settle_request(mine, None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("maker of a settlement request cannot"), "{e}");
    let e = me
        .reject_settle_request(mine, "no")
        .unwrap_err()
        .to_string();
    assert!(e.contains("maker of a settlement request cannot"), "{e}");
    assert_eq!(me.read("SR-1").unwrap().unwrap().state, State::Unknown);
    assert_eq!(
        me.settle_request(mine).unwrap().unwrap().status,
        Status::Pending
    );

    // Made by someone else: this process approves it, and the row changes with it.
    let (theirs, maker) = make_as_someone_else(b, &new_request("SR-2", 1, 3600));
    let Decided::Done(done) = me.approve_settle_request(theirs, Some("checked")).unwrap() else {
        panic!("not approved")
    };
    assert_eq!(done.status, Status::Approved);
    assert_eq!(done.checker.as_deref(), Some(b.me().as_str()));
    assert_eq!(done.maker, maker);
    assert!(done.decided_at.is_some());
    let row = me.read("SR-2").unwrap().unwrap();
    assert_eq!(row.state, State::Done);
    assert_eq!(row.rsp_code.as_deref(), Some("0000"));
    assert_eq!(row.response.as_deref(), Some(&b"reply of SR-2"[..]));
    let h = me.history("SR-2").unwrap();
    let last = h.last().unwrap();
    assert_eq!(last.who, format!("operator:{}", b.me()));
    let why = last.reason.as_deref().unwrap();
    assert!(
        why.contains(&format!("made by {maker}"))
            && why.contains(&format!("approved by {}", b.me())),
        "{why}"
    );
    // Decided once.
    assert!(matches!(
        me.approve_settle_request(theirs, None).unwrap(),
        Decided::NotPending(r) if r.status == Status::Approved
    ));
    assert_eq!(me.settle_requests(Listed::Pending, 10).unwrap().len(), 1);
    assert_eq!(me.settle_requests(Listed::All, 10).unwrap().len(), 2);
    let of: Vec<i64> = me
        .settle_requests(Listed::Of("SR-2"), 10)
        .unwrap()
        .iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(of, [theirs]);
    assert_eq!(me.undecided_settle_requests().unwrap().pending, 1);
    assert!(matches!(
        me.approve_settle_request(999_999, None).unwrap(),
        Decided::NoSuchRequest
    ));
}

/// A not-booked request's age guard is in the approval's own statement, not only in the tool:
/// a row younger than the request's `min_age_secs` is left alone, the request still pending;
/// once old enough, the same approval carries it out.
pub fn the_approval_holds_a_row_younger_than_its_age_guard(b: &Backend) {
    let me = b.tool();
    b.put(&[Hand {
        guid: "SR-Y",
        state: "UNKNOWN",
        rsp_code: Some("E901"),
        request: None,
        attempts: Some(1),
        age_secs: 10,
    }]);
    let mut n = new_request("SR-Y", 1, 3600);
    (n.outcome, n.to, n.rsp_code, n.min_age_secs) =
        ("not-booked", State::Failed, "E902".into(), Some(300));
    let (id, _) = make_as_someone_else(b, &n);
    assert!(matches!(
        me.approve_settle_request(id, None).unwrap(),
        Decided::RowChanged(_)
    ));
    assert_eq!(me.read("SR-Y").unwrap().unwrap().state, State::Unknown);
    assert_eq!(
        me.settle_request(id).unwrap().unwrap().status,
        Status::Pending
    );
    // Years old now (a statement by hand, as time passing).
    b.by_hand("UPDATE tx SET updated_at = '2000-01-01 00:00:00' WHERE guid = 'SR-Y'")
        .unwrap();
    let Decided::Done(done) = me.approve_settle_request(id, None).unwrap() else {
        panic!("not approved once old enough")
    };
    assert_eq!(done.status, Status::Approved);
    assert_eq!(me.read("SR-Y").unwrap().unwrap().state, State::Failed);
}

pub fn a_changed_row_an_expired_or_rejected_request_is_left_alone(b: &Backend) {
    let me = b.tool();
    for g in ["SR-C", "SR-E", "SR-R"] {
        b.put(&[Hand {
            guid: g,
            state: "UNKNOWN",
            rsp_code: Some("E901"),
            request: None,
            attempts: Some(2),
            age_secs: 0,
        }]);
    }
    // The row moved on after the request (resolve settled it): the approval changes nothing.
    let (changed, _) = make_as_someone_else(b, &new_request("SR-C", 2, 3600));
    let settled = ledger::Change::new(
        "SR-C",
        State::Unknown,
        Some(2),
        State::Failed,
        *b"E902",
        b"x".to_vec(),
    );
    assert!(me.transition(&settled).unwrap());
    assert!(matches!(
        me.approve_settle_request(changed, None).unwrap(),
        Decided::RowChanged(_)
    ));
    assert_eq!(me.read("SR-C").unwrap().unwrap().state, State::Failed);
    assert_eq!(
        me.settle_request(changed).unwrap().unwrap().status,
        Status::Pending,
        "the refused approval undid its decision too"
    );
    // Expired: neither pending nor approvable.
    let (expired, _) = make_as_someone_else(b, &new_request("SR-E", 2, 0));
    assert_eq!(
        me.settle_request(expired).unwrap().unwrap().status,
        Status::Expired
    );
    assert!(
        !me.settle_requests(Listed::Pending, 10)
            .unwrap()
            .iter()
            .any(|r| r.id == expired)
    );
    assert!(matches!(
        me.approve_settle_request(expired, None).unwrap(),
        Decided::NotPending(r) if r.status == Status::Expired
    ));
    assert_eq!(me.read("SR-E").unwrap().unwrap().state, State::Unknown);
    let u = me.undecided_settle_requests().unwrap();
    assert_eq!((u.pending, u.expired), (1, 1), "{u:?}");
    // … but it can be closed (rejected): that changes nothing, and ends its alert.
    let Decided::Done(r) = me.reject_settle_request(expired, "too late").unwrap() else {
        panic!("an expired request not closed")
    };
    assert_eq!(r.status, Status::Rejected);
    assert_eq!(me.read("SR-E").unwrap().unwrap().state, State::Unknown);
    // Rejected: closed without a change, then not approvable.
    let (rejected, _) = make_as_someone_else(b, &new_request("SR-R", 2, 3600));
    let Decided::Done(r) = me.reject_settle_request(rejected, "wrong GUID").unwrap() else {
        panic!("not rejected")
    };
    assert_eq!(r.status, Status::Rejected);
    assert_eq!(r.decision_reason.as_deref(), Some("wrong GUID"));
    assert!(matches!(
        me.approve_settle_request(rejected, None).unwrap(),
        Decided::NotPending(r) if r.status == Status::Rejected
    ));
    assert_eq!(me.read("SR-R").unwrap().unwrap().state, State::Unknown);
}

pub fn a_statement_by_hand_cannot_approve_its_makers_request(b: &Backend) {
    let me = b.tool();
    b.put(&[Hand {
        guid: "SR-H",
        state: "UNKNOWN",
        rsp_code: Some("E901"),
        request: None,
        attempts: Some(1),
        age_secs: 0,
    }]);
    let id = me
        .make_settle_request(&new_request("SR-H", 1, 3600))
        .unwrap();
    // psql as the maker's role, naming another checker; sqlite3 without our function.
    for sql in [
        format!(
            "UPDATE settle_request SET status = 'approved', checker = 'somebody' WHERE id = {id}"
        ),
        format!("UPDATE settle_request SET expires_at = '2999-01-01T00:00:00Z' WHERE id = {id}"),
        format!("DELETE FROM settle_request WHERE id = {id}"),
    ] {
        let e = b.by_hand(&sql).unwrap_err();
        assert!(
            e.contains("txrelay_identity")
                || e.contains("cannot approve or reject")
                || e.contains("nothing else of it changes")
                || e.contains("never deleted"),
            "{sql}: {e}"
        );
    }
    let r = me.settle_request(id).unwrap().unwrap();
    assert_eq!((r.status, r.checker), (Status::Pending, None));
    // A request cannot be made decided, or by someone it does not name.
    let e = b
        .by_hand(
            "INSERT INTO settle_request (guid, seen_state, seen_attempts, outcome, to_state, \
             rsp_code, response, evidence, reason, maker, expires_at, status) VALUES \
             ('SR-H', 'UNKNOWN', 1, 'booked', 'DONE', '0000', 'r', 'e', 'r', 'x', \
             '2999-01-01T00:00:00Z', 'approved')",
        )
        .unwrap_err();
    assert!(
        e.contains("txrelay_identity") || e.contains("made pending"),
        "{e}"
    );
}
