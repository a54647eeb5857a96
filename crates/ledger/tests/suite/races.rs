//! Races that the guarded statements must arbitrate, whatever the backend: many threads (and
//! several stores, as several processes would have) on one GUID, two reprocess runs at once,
//! resolve against the relay.

use std::sync::Barrier;
use std::time::Duration;

use core_client::CoreClient;
use engine::batch;
use engine::clock::SystemClock;
use ledger::{Access, Change, State};
use testkit::{CoreHttp, bin, spawn_listening};

use crate::backend::Backend;

const THREADS: usize = 50;

pub fn fifty_threads_claiming_one_guid_one_wins(b: &Backend) {
    // Two stores, as two relays sharing one ledger would have.
    let stores = [b.open(Access::Relay), b.open(Access::Relay)];
    let barrier = Barrier::new(THREADS);
    let wins: usize = std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|i| {
                let (store, barrier) = (&stores[i % 2], &barrier);
                s.spawn(move || {
                    barrier.wait();
                    usize::from(store.claim_new("G-RACE", "TRNF", b"req", None).unwrap())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    assert_eq!(wins, 1);
    let row = stores[0].read("G-RACE").unwrap().unwrap();
    assert_eq!((row.state, row.attempts), (State::Sent, Some(1)));
}

pub fn fifty_threads_reclaiming_one_failed_guid_one_wins(b: &Backend) {
    let stores = [b.open(Access::Relay), b.open(Access::Tool)];
    assert!(stores[0].claim_new("G-RE", "TRNF", b"req", None).unwrap());
    let failed = Change::new(
        "G-RE",
        State::Sent,
        Some(1),
        State::Failed,
        *b"E902",
        b"r".to_vec(),
    );
    assert!(stores[0].transition(&failed).unwrap());
    let barrier = Barrier::new(THREADS);
    let won: Vec<i64> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|i| {
                let (store, barrier) = (&stores[i % 2], &barrier);
                s.spawn(move || {
                    barrier.wait();
                    if i % 3 == 0 {
                        store.reclaim_for_resend("G-RE", 10).unwrap()
                    } else {
                        store.reclaim_failed("G-RE", b"req", None).unwrap()
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .filter_map(|h| h.join().unwrap())
            .collect()
    });
    assert_eq!(won, [2]);
}

/// A core simulator of our own for the races that send.
pub fn coresim() -> (std::process::Child, String) {
    coresim_slow(300)
}

/// The same, whose `SLOW` memos sleep `slow_ms`.
pub fn coresim_slow(slow_ms: u64) -> (std::process::Child, String) {
    let mut cmd = std::process::Command::new(bin("coresim"));
    cmd.args(["--listen", "127.0.0.1:0", "--slow-ms", &slow_ms.to_string()])
        .stderr(std::process::Stdio::null());
    let (child, addr) = spawn_listening(&mut cmd, Duration::from_secs(20)).unwrap();
    (child, format!("http://{addr}"))
}

pub struct Killed(pub std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn two_reprocess_runs_at_once_send_each_row_once(b: &Backend) {
    const N: usize = 20;
    let (child, url) = coresim();
    let _core = Killed(child);
    let setup = b.tool();
    let msgs: Vec<Vec<u8>> = (0..N)
        .map(|i| {
            let t = wire::Transfer {
                guid: format!("G-RP-{i}"),
                from_account: "00000000000001".into(),
                to_account: "00000000000002".into(),
                amount: 10 + i as u64,
                memo: if i % 4 == 0 {
                    "SLOW".into()
                } else {
                    String::new()
                },
            };
            wire::encode_request(&t).unwrap()
        })
        .collect();
    for (i, m) in msgs.iter().enumerate() {
        let g = format!("G-RP-{i}");
        assert!(setup.claim_new(&g, "TRNF", m, None).unwrap());
        let failed = Change::new(
            &g,
            State::Sent,
            Some(1),
            State::Failed,
            *b"E902",
            wire::reply_to(m, b"E902", None),
        );
        assert!(setup.transition(&failed).unwrap());
    }
    let runs: Vec<batch::ReprocessSummary> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..2)
            .map(|_| {
                let (store, url) = (b.tool(), url.clone());
                s.spawn(move || {
                    let core = CoreClient::new(
                        &url,
                        Duration::from_millis(1000),
                        Duration::from_millis(5000),
                    )
                    .unwrap();
                    batch::reprocess(store.as_ref(), &core, 5, None, 1, &SystemClock).unwrap()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(
        runs[0].sent + runs[1].sent,
        N,
        "each row sent by exactly one run"
    );
    assert_eq!(runs[0].done + runs[1].done, N);
    let core = CoreHttp::new(&url, Duration::from_secs(10));
    for i in 0..N {
        assert_eq!(core.bookings(&format!("G-RP-{i}")).unwrap(), 1, "G-RP-{i}");
    }
    for row in setup.all_rows().unwrap() {
        assert_eq!(
            (row.state, row.attempts),
            (State::Done, Some(2)),
            "{}",
            row.guid
        );
    }
}

pub fn resolve_racing_the_relay_never_books_twice(b: &Backend) {
    // The relay's result (SENT -> DONE after a slow booking) and resolve --stale-sent's
    // settlement (SENT -> DONE or FAILED by inquiry) race for the same rows: whichever wins,
    // each GUID is booked once and its row ends DONE.
    const N: usize = 10;
    // The core sleeps long enough on each request for resolve to select every row while
    // it is still SENT (a shorter sleep let some relays settle first on a slow machine).
    let (child, url) = coresim_slow(2000);
    let _core = Killed(child);
    let relay_store = b.open(Access::Relay);
    let core = CoreClient::new(
        &url,
        Duration::from_millis(1000),
        Duration::from_millis(5000),
    )
    .unwrap();
    let msgs: Vec<Vec<u8>> = (0..N)
        .map(|i| {
            wire::encode_request(&wire::Transfer {
                guid: format!("G-RR-{i}"),
                from_account: "00000000000001".into(),
                to_account: "00000000000002".into(),
                amount: 5,
                memo: "SLOW".into(),
            })
            .unwrap()
        })
        .collect();
    let http = CoreHttp::new(&url, Duration::from_secs(10));
    std::thread::scope(|s| {
        let relays: Vec<_> = msgs
            .iter()
            .map(|m| {
                let (store, core) = (&relay_store, &core);
                s.spawn(move || {
                    engine::transfer::handle(
                        store.as_ref(),
                        core,
                        &engine::events::NoEvents,
                        None,
                        m,
                    )
                })
            })
            .collect();
        // Once every row is SENT, resolve settles them as if they were stale (the rows are
        // aged by hand: the floor is about time, and this test is about the race).
        let tool = b.tool();
        while tool.count_aged(State::Sent, None).unwrap() < N as i64 {
            std::thread::yield_now();
        }
        age_all(b, "G-RR-");
        let settings = batch::ResolveSettings::new(60)
            .stale_sent(Some(60))
            .parallel(1);
        let sum = batch::resolve(tool.as_ref(), &core, &settings).unwrap();
        assert_eq!(sum.examined, N);
        for h in relays {
            let handled = h.join().unwrap();
            assert!(matches!(&handled.code, b"0000" | b"E901"), "{handled:?}");
        }
    });
    // Anything left FAILED (an inquiry answered 404 before the booking, then the late
    // booking moved it back) or UNKNOWN is settled by a later resolve, never by a resend.
    let tool = b.tool();
    batch::resolve(
        tool.as_ref(),
        &core,
        &batch::ResolveSettings::new(0).parallel(1),
    )
    .unwrap();
    for i in 0..N {
        let g = format!("G-RR-{i}");
        assert_eq!(http.bookings(&g).unwrap(), 1, "{g}");
        let row = tool.read(&g).unwrap().unwrap();
        assert_eq!(row.state, State::Done, "{g}: {row:?}");
    }
}

/// Moves the `updated_at` of every row whose GUID starts with `prefix` two minutes back, in
/// one statement.
fn age_all(b: &Backend, prefix: &str) {
    let pattern = format!("{prefix}%");
    match &b.db {
        ledger::Db::Sqlite(path) => {
            rusqlite::Connection::open(path)
                .unwrap()
                .execute(
                    "UPDATE tx SET updated_at = datetime('now', '-120 seconds') \
                     WHERE guid LIKE ?1",
                    [&pattern],
                )
                .unwrap();
        }
        ledger::Db::Postgres(_) => {
            postgres::Client::connect(&b.arg, postgres::NoTls)
                .unwrap()
                .execute(
                    "UPDATE tx SET updated_at = now() - interval '120 seconds' \
                     WHERE guid LIKE $1",
                    &[&pattern],
                )
                .unwrap();
        }
    }
}
