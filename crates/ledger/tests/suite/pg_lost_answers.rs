//! A decision on a settlement request whose commit reached the server but whose answer never
//! came back (a one-way partition, then a reset): the pool runs it once more on a new
//! connection, and that second run finds the request already decided, by the first. The
//! person is told it was done, as it was, not "not pending" (which would send them looking
//! for someone else's decision, or to decide it again by other means).

use std::net::SocketAddr;
use std::thread;
use std::time::{Duration, Instant};

use ledger::settle_request::{Decided, Status};
use ledger::{Access, Db};
use testkit::proxy::Proxy;

use crate::backend::{Backend, Hand};
use crate::settle_requests::new_request;

#[test]
fn an_approval_whose_answer_was_lost_is_reported_as_made() {
    decision_whose_answer_was_lost(Status::Approved);
}

#[test]
fn a_rejection_whose_answer_was_lost_is_reported_as_made() {
    decision_whose_answer_was_lost(Status::Rejected);
}

fn decision_whose_answer_was_lost(decision: Status) {
    let Some(b) = Backend::postgres() else {
        return testkit::pg::did_not_run();
    };
    b.put(&[Hand {
        guid: "LOST-1",
        state: "UNKNOWN",
        rsp_code: Some("E901"),
        request: None,
        attempts: Some(1),
        age_secs: 0,
    }]);
    let id = b
        .tool()
        .make_settle_request(&new_request("LOST-1", 1, 3600))
        .unwrap();

    // The checker is another role, connected through a proxy.
    let (role, url) = testkit::second_person::postgres_role(&b.arg);
    let port: u16 = url
        .split("@127.0.0.1:")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("a port on 127.0.0.1 in {url}"));
    let proxy = Proxy::start(SocketAddr::from(([127, 0, 0, 1], port))).expect("a proxy");
    let via_proxy = url.replacen(
        &format!("@127.0.0.1:{port}/"),
        &format!("@127.0.0.1:{}/", proxy.addr().port()),
        1,
    );
    let checker = via_proxy
        .parse::<Db>()
        .unwrap()
        .open(Access::Tool, "suite")
        .unwrap();

    // The request's row is locked by another session, so that the decision waits on the
    // server; then the replies are held, and the lock let go: the decision commits, and its
    // answer does not come back.
    let mut locker = postgres::Client::connect(&b.arg, postgres::NoTls).unwrap();
    let mut lock = locker.transaction().unwrap();
    lock.execute(
        "SELECT 1 FROM settle_request WHERE id = $1 FOR UPDATE",
        &[&id],
    )
    .unwrap();
    let deciding = thread::spawn(move || match decision {
        Status::Approved => checker.approve_settle_request(id, Some("checked")),
        _ => checker.reject_settle_request(id, "not ours"),
    });
    let mut watch = postgres::Client::connect(&b.arg, postgres::NoTls).unwrap();
    until(&mut watch, "the decision waits for the lock", |c| {
        c.query_one(
            "SELECT count(*) FROM pg_stat_activity WHERE usename = $1 AND wait_event_type = 'Lock'",
            &[&role],
        )
        .unwrap()
        .get::<_, i64>(0)
            == 1
    });
    proxy.hold_replies();
    lock.commit().unwrap();
    until(&mut watch, "the decision commits", |c| {
        c.query_one("SELECT status FROM settle_request WHERE id = $1", &[&id])
            .unwrap()
            .get::<_, String>(0)
            == decision.as_str()
    });
    proxy.reset();

    let decided = deciding.join().expect("the decision's thread").unwrap();
    let Decided::Done(r) = decided else {
        panic!("a decision made, its answer lost, reported as {decided:?}");
    };
    assert_eq!(
        (r.status, r.checker.as_deref()),
        (decision, Some(role.as_str()))
    );
    // Asked again by the same person (no answer lost): not pending, as it is.
    let again = url
        .parse::<Db>()
        .unwrap()
        .open(Access::Tool, "suite")
        .unwrap();
    let twice = match decision {
        Status::Approved => again.approve_settle_request(id, Some("checked")),
        _ => again.reject_settle_request(id, "not ours"),
    };
    assert!(
        matches!(twice, Ok(Decided::NotPending(_))),
        "decided a second time: {twice:?}"
    );
    // Made once: an approval changed the row once, and its history says so once.
    let changes: i64 = watch
        .query_one(
            "SELECT count(*) FROM tx_history WHERE guid = 'LOST-1' AND who LIKE 'operator:%'",
            &[],
        )
        .unwrap()
        .get(0);
    let want = i64::from(decision == Status::Approved);
    assert_eq!(changes, want, "the row's changes by an operator");
}

/// Waits, looking every 10 ms, until `done` says so (5 s at most: then fails, naming `what`).
fn until(
    c: &mut postgres::Client,
    what: &str,
    mut done: impl FnMut(&mut postgres::Client) -> bool,
) {
    let limit = Instant::now() + Duration::from_secs(5);
    while !done(c) {
        assert!(Instant::now() < limit, "not in 5 s: {what}");
        thread::sleep(Duration::from_millis(10));
    }
}
