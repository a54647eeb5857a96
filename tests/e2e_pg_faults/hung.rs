//! The server stops answering without closing anything (every server process SIGSTOPped: a
//! hung host, a storage freeze — the kernel still accepts and acknowledges, nothing
//! replies): requests get `E905` within the relay's deadline, the core is never called for
//! them, the relay's threads stay bounded, and once the server thaws service comes back. A
//! relay started meanwhile gives up by itself (one line, exit 1) instead of hanging.

use std::thread;
use std::time::{Duration, Instant};

use ledger::db::PG_RELAY_CONNECTIONS;

use crate::util::*;

/// Requests sent at once in each round of the flood (more than the pool's connections).
const FLOOD: usize = PG_RELAY_CONNECTIONS + 8;

/// `n` new transfers sent at the same moment, each on its own connection.
fn at_once(n: usize, relay: &str, prefix: &str) -> Vec<Call> {
    let barrier = std::sync::Barrier::new(n);
    thread::scope(|s| {
        let hs: Vec<_> = (0..n)
            .map(|_| {
                s.spawn(|| {
                    let g = guid(prefix);
                    barrier.wait();
                    call(relay, &g)
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

#[test]
fn a_frozen_server_costs_e905_within_the_deadline_never_a_hang() {
    let Some(server) = own_server(None) else {
        return;
    };
    let cluster = server.cluster().expect("our own cluster");
    let db = server.fresh_db();
    let rows = Rows::new(&db);
    let db = with_password(&db);
    let (core_proc, core) = coresim();
    let mut relay = relay(&db, &core_proc.url());
    for _ in 0..3 {
        assert_eq!(call(&relay.addr, &guid("before")).code, "0000");
    }
    thread::sleep(Duration::from_millis(200)); // the channel threads of those calls end
    let base_threads = relay.threads();
    let bookings_before = core.stats().expect("stats")["bookings"].as_u64();

    cluster.freeze().expect("freeze the server");
    // A second relay, started now, cannot apply the schema: it must give up by itself.
    let starting = {
        let (db, core_url) = (db.clone(), core_proc.url());
        thread::spawn(move || relay_refusing(&db, &core_url, Duration::from_secs(45)))
    };
    let mut calls = Vec::new();
    let mut threads = vec![base_threads];
    // Threads of the relay once the channel threads of finished calls have ended.
    let settled_threads = |relay: &Proc| {
        thread::sleep(Duration::from_millis(150));
        relay.threads()
    };
    // One after another: each on whatever connection the pool has (an idle one first, then
    // a new one, which connects to a postmaster that never answers).
    for _ in 0..2 {
        let c = call(&relay.addr, &guid("frozen-seq"));
        assert_e905_in_time(&c, "frozen server");
        calls.push(c);
        threads.push(settled_threads(&relay));
    }
    // Many at once, twice: each round leaves up to the pool's size of connection threads
    // waiting on the server; the pool lets at most twice its size wait, then answers at
    // once.
    for round in 0..2 {
        let batch = at_once(FLOOD, &relay.addr, &format!("frozen-flood{round}"));
        for c in &batch {
            assert_e905_in_time(c, "frozen server, requests at once");
        }
        calls.extend(batch);
        threads.push(settled_threads(&relay));
    }
    let capped = call(&relay.addr, &guid("frozen-capped"));
    assert_e905_in_time(&capped, "frozen server, connection threads capped");
    calls.push(capped.clone());
    threads.push(settled_threads(&relay));
    // The core was never called while the ledger could not be written.
    assert_eq!(
        core.stats().expect("stats")["bookings"].as_u64(),
        bookings_before,
        "the core was called while the server was frozen"
    );
    assert!(
        relay.alive(),
        "the relay exited while the server was frozen"
    );
    let refused = starting.join().expect("the starting relay's thread");
    eprintln!(
        "hung: a relay started while the server was frozen: {:?} after {} ms: {}",
        refused.code,
        ms(refused.took()),
        refused.stderr().trim()
    );
    assert_refused(&refused, "relay started on a frozen server", PASSWORD);
    // Connecting waits as long as applying the schema may (30 s), not one operation's 5 s.
    assert!(
        refused.took() <= Duration::from_secs(35),
        "refusing took {:?}",
        refused.took()
    );

    cluster.thaw().expect("thaw the server");
    let thawed = Instant::now();
    let after = until_booked(&relay.addr, "thawed", RECOVERY_LIMIT + CALL_LIMIT);
    let back = after.last().expect("a call after the thaw");
    let recovery = back.ended() - thawed;
    // Connection threads left waiting on the frozen server end once it answers.
    let threads_after = relay.threads_back_to(base_threads);

    let latencies = |prefix: &str| -> Vec<u128> {
        calls
            .iter()
            .filter(|c| c.guid.starts_with(prefix))
            .map(|c| ms(c.elapsed))
            .collect()
    };
    let flood = latencies("frozen-flood");
    eprintln!(
        "hung: E905 in {:?} ms one after another; {FLOOD} at once, twice: {:?}..{:?} ms; \
         then {} ms; relay threads {threads:?} (baseline {base_threads}), {threads_after} \
         after the thaw; first 0000 {} ms after the thaw ({} calls)",
        latencies("frozen-seq"),
        flood.iter().min().unwrap_or(&0),
        flood.iter().max().unwrap_or(&0),
        ms(capped.elapsed),
        ms(recovery),
        after.len()
    );
    assert_eq!(back.code, "0000", "no service after the thaw: {after:?}");
    assert!(
        recovery <= RECOVERY_LIMIT,
        "service came back {recovery:?} after the thaw"
    );
    for c in &after {
        assert!(c.elapsed <= CALL_LIMIT, "{} took {:?}", c.guid, c.elapsed);
    }
    // Each connection left waiting costs a thread, and the pool caps them (twice its size).
    let peak = threads.iter().copied().max().unwrap_or_default();
    assert!(
        peak <= base_threads + 2 * PG_RELAY_CONNECTIONS,
        "relay threads grew from {base_threads} to {peak} while the server was frozen"
    );
    assert!(
        threads_after <= base_threads + 1,
        "relay threads {threads_after} after the thaw (baseline {base_threads}): leaked"
    );
    assert!(relay.alive(), "the relay exited");

    calls.extend(after);
    let a = check_aftermath(&calls, &relay.addr, &db, &rows, &core, &core_proc.url());
    eprintln!("hung: {a}");
    assert!(
        !relay.stderr().contains(PASSWORD),
        "the relay logged the password:\n{}",
        relay.stderr()
    );
}
