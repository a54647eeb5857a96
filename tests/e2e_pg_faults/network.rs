//! The network between the relay and the server fails, through a proxy (`testkit::proxy`):
//! a cut (every connection closed, new ones refused) and a black hole (connections stay
//! open, nothing goes through, nothing is closed: a partition without RST). Either way
//! requests get `E905` within the deadline, and service comes back once the network heals.

use std::thread;
use std::time::{Duration, Instant};

use testkit::proxy::Proxy;

use crate::util::*;

#[test]
fn a_cut_and_a_black_hole_cost_e905_within_the_deadline() {
    let Some(server) = own_server(None) else {
        return;
    };
    let cluster = server.cluster().expect("our own cluster");
    let db = server.fresh_db();
    let rows = Rows::new(&db);
    let proxy = Proxy::start(([127, 0, 0, 1], cluster.port).into()).expect("a proxy");
    let via_proxy = with_password(&db).replacen(
        &format!(":{}/", cluster.port),
        &format!(":{}/", proxy.addr().port()),
        1,
    );
    assert_ne!(via_proxy, db, "the ledger URL names the server's port");
    let (core_proc, core) = coresim();
    let mut relay = relay(&via_proxy, &core_proc.url());
    assert_eq!(call(&relay.addr, &guid("before")).code, "0000");
    thread::sleep(Duration::from_millis(150)); // the channel thread of that call ends
    let base_threads = relay.threads();
    let mut calls = Vec::new();

    // The cut: connections closed (FIN), the port refuses.
    proxy.cut();
    let bookings_before = bookings(&core).len();
    let cut: Vec<Call> = (0..3).map(|_| call(&relay.addr, &guid("cut"))).collect();
    for c in &cut {
        assert_e905_in_time(c, "network cut");
    }
    assert_eq!(
        bookings(&core).len(),
        bookings_before,
        "the core was called"
    );
    proxy.heal();
    let healed = Instant::now();
    let after_cut = until_booked(&relay.addr, "healed-cut", RECOVERY_LIMIT + CALL_LIMIT);
    let cut_recovery = after_cut.last().expect("a call").ended() - healed;

    // The black hole: nothing goes through, nothing is closed.
    thread::sleep(Duration::from_millis(100));
    proxy.blackhole();
    let bookings_before = bookings(&core).len();
    let mut holed = vec![call(&relay.addr, &guid("blackhole"))];
    holed.extend(thread::scope(|s| {
        let hs: Vec<_> = (0..2)
            .map(|_| s.spawn(|| call(&relay.addr, &guid("blackhole-together"))))
            .collect();
        hs.into_iter()
            .map(|h| h.join().unwrap())
            .collect::<Vec<_>>()
    }));
    for c in &holed {
        assert_e905_in_time(c, "network black hole");
    }
    assert_eq!(
        bookings(&core).len(),
        bookings_before,
        "the core was called"
    );
    let held = proxy.connections();
    proxy.heal();
    let healed = Instant::now();
    let after_hole = until_booked(&relay.addr, "healed-hole", RECOVERY_LIMIT + CALL_LIMIT);
    let hole_recovery = after_hole.last().expect("a call").ended() - healed;
    // The statements held in the black hole are answered now; their threads end.
    let threads_after = relay.threads_back_to(base_threads);

    eprintln!(
        "network: cut: E905 in {:?} ms, first 0000 {} ms after the heal; black hole: E905 in \
         {:?} ms ({held} connections held open), first 0000 {} ms after the heal; relay \
         threads {base_threads} before, {threads_after} after",
        cut.iter().map(|c| ms(c.elapsed)).collect::<Vec<_>>(),
        ms(cut_recovery),
        holed.iter().map(|c| ms(c.elapsed)).collect::<Vec<_>>(),
        ms(hole_recovery)
    );
    for (what, after, recovery) in [
        ("cut", &after_cut, cut_recovery),
        ("black hole", &after_hole, hole_recovery),
    ] {
        let last = after.last().expect("a call");
        assert_eq!(
            last.code, "0000",
            "no service after the {what} healed: {after:?}"
        );
        assert!(
            recovery <= RECOVERY_LIMIT,
            "service came back {recovery:?} after the {what} healed"
        );
        for c in after {
            assert!(c.elapsed <= CALL_LIMIT, "{} took {:?}", c.guid, c.elapsed);
        }
    }
    assert!(relay.alive(), "the relay exited");
    assert!(
        threads_after <= base_threads + 1,
        "relay threads {threads_after} after the heal (baseline {base_threads}): leaked"
    );

    calls.extend(cut);
    calls.extend(after_cut);
    calls.extend(holed);
    calls.extend(after_hole);
    let a = check_aftermath(
        &calls,
        &relay.addr,
        &via_proxy,
        &rows,
        &core,
        &core_proc.url(),
    );
    eprintln!("network: {a}");
    assert!(
        !relay.stderr().contains(PASSWORD),
        "the relay logged the password:\n{}",
        relay.stderr()
    );
}

/// A claim whose COMMIT reached the server but whose answer never came back, the connection
/// then closed while new ones go through (a one-way partition, then a reset): the relay
/// cannot know it won, so it must count the claim as not won — contract §7: `E905`, core not
/// called (and `resolve --stale-sent` settles the row).
#[test]
fn a_claim_whose_commit_answer_is_lost_is_answered_e905() {
    let Some(server) = own_server(None) else {
        return;
    };
    let cluster = server.cluster().expect("our own cluster");
    let db = server.fresh_db();
    let rows = Rows::new(&db);
    let proxy = Proxy::start(([127, 0, 0, 1], cluster.port).into()).expect("a proxy");
    let via_proxy = with_password(&db).replacen(
        &format!(":{}/", cluster.port),
        &format!(":{}/", proxy.addr().port()),
        1,
    );
    let (core_proc, core) = coresim();
    let relay = relay(&via_proxy, &core_proc.url());
    assert_eq!(call(&relay.addr, &guid("before")).code, "0000");

    proxy.hold_replies();
    let g = guid("lost-commit");
    let pending = {
        let (addr, g) = (relay.addr.clone(), g.clone());
        thread::spawn(move || call(&addr, &g))
    };
    let committed = Instant::now() + Duration::from_secs(3);
    while rows.row(&g).is_none() && Instant::now() < committed {
        thread::sleep(Duration::from_millis(10));
    }
    let row = rows.row(&g);
    // The claim is on the server; its answer is held. Now the connection breaks (new ones
    // go through).
    proxy.reset();
    let c = pending.join().expect("the pending call");
    eprintln!(
        "network: claim committed, answer lost, connection reset: {} after {} ms; row {:?}",
        c.code,
        ms(c.elapsed),
        rows.row(&g)
    );
    assert_eq!(
        row.map(|r| r.state),
        Some("SENT".to_string()),
        "the claim did not reach the server"
    );
    assert!(c.elapsed <= CALL_LIMIT, "took {:?}", c.elapsed);
    assert_eq!(
        core.bookings(&g).expect("bookings"),
        0,
        "the core was called"
    );
    assert_eq!(c.code, "E905", "a claim whose COMMIT outcome was unknown");
    // The row the lost answer left is in flight, never sent, until resolve settles it.
    let row = rows.row(&g);
    assert!(row.as_ref().is_some_and(|r| r.state == "SENT"), "{row:?}");
    let a = check_aftermath(
        &[c],
        &relay.addr,
        &via_proxy,
        &rows,
        &core,
        &core_proc.url(),
    );
    eprintln!("network: lost commit answer: {a}");
}
