//! resolve and reprocess working on many rows at once (`--parallel`): every row settled
//! exactly once, by the outcome one at a time would have given, on each backend.

use std::time::Duration;

use core_client::CoreClient;
use engine::batch::{self, ResolveSettings};
use engine::clock::SystemClock;
use ledger::{Access, Change, State};
use testkit::CoreHttp;
use wire::{self, Transfer};

use crate::backend::{Backend, Hand};
use crate::races::{Killed, coresim};

const N: usize = 40;

fn transfer(guid: &str, amount: u64, memo: &str) -> Transfer {
    Transfer {
        guid: guid.into(),
        from_account: "00000000000001".into(),
        to_account: "00000000000002".into(),
        amount,
        memo: memo.into(),
    }
}

fn client(url: &str) -> CoreClient {
    CoreClient::new(
        url,
        Duration::from_millis(1000),
        Duration::from_millis(5000),
    )
    .unwrap()
}

pub fn parallel_resolve_settles_every_row_once(b: &Backend) {
    let (child, url) = coresim();
    let _core = Killed(child);
    let http = CoreHttp::new(&url, Duration::from_secs(10));
    let transfers: Vec<Transfer> = (0..N)
        .map(|i| transfer(&format!("G-PR-{i:02}"), 100 + i as u64, ""))
        .collect();
    let msgs: Vec<Vec<u8>> = transfers
        .iter()
        .map(|t| wire::encode_request(t).unwrap())
        .collect();
    let rows: Vec<Hand<'_>> = transfers
        .iter()
        .zip(&msgs)
        .map(|(t, m)| Hand {
            guid: &t.guid,
            state: "UNKNOWN",
            rsp_code: Some("E901"),
            request: Some(m),
            attempts: Some(1),
            age_secs: 120,
        })
        .collect();
    b.put(&rows);
    // Even rows reached the core before their sends were given up; odd ones never did.
    for t in transfers.iter().step_by(2) {
        http.book(t).unwrap();
    }
    // Two of them failed an inquiry earlier; their backoff is over. The store is the one
    // resolve opens for --parallel above 1.
    let s = b.open(Access::Batch);
    for g in ["G-PR-00", "G-PR-01"] {
        s.record_inquiry_failure(g, "core silent", 60).unwrap();
    }
    b.make_inquiries_due();
    let before = http.stats().unwrap();

    let settings = ResolveSettings::new(60).parallel(8);
    let sum = batch::resolve(s.as_ref(), &client(&url), &settings).unwrap();
    assert_eq!(
        (sum.examined, sum.done, sum.failed, sum.left, sum.raced),
        (N, N / 2, N / 2, 0, 0),
        "{sum:?}"
    );
    assert!(sum.unsettled.is_empty() && sum.needs_operator.is_empty());

    let after = http.stats().unwrap();
    assert_eq!(after["bookings"], before["bookings"], "resolve never POSTs");
    assert_eq!(
        after["inquiries"].as_u64().unwrap(),
        before["inquiries"].as_u64().unwrap() + N as u64,
        "one inquiry per row"
    );
    for (i, t) in transfers.iter().enumerate() {
        let row = s.read(&t.guid).unwrap().unwrap();
        let want = if i % 2 == 0 {
            (State::Done, Some("0000"))
        } else {
            (State::Failed, Some("E902"))
        };
        assert_eq!((row.state, row.rsp_code.as_deref()), want, "{}", t.guid);
        assert_eq!(row.attempts, Some(1));
        assert_eq!(http.bookings(&t.guid).unwrap(), u64::from(i % 2 == 0));
    }
    assert!(
        b.inquiry_records().is_empty(),
        "answered inquiries clear the records"
    );
}

/// `N` rows FAILED/E902 on attempt 1 (some with a SLOW memo), their requests stored.
fn failed_rows(b: &Backend, prefix: &str) -> Vec<String> {
    let s = b.tool();
    (0..N)
        .map(|i| {
            let g = format!("{prefix}-{i:02}");
            let memo = if i % 5 == 0 { "SLOW" } else { "" };
            let m = wire::encode_request(&transfer(&g, 10 + i as u64, memo)).unwrap();
            assert!(s.claim_new(&g, "TRNF", &m, None).unwrap());
            let failed = Change::new(
                &g,
                State::Sent,
                Some(1),
                State::Failed,
                *b"E902",
                wire::reply_to(&m, b"E902", None),
            );
            assert!(s.transition(&failed).unwrap());
            g
        })
        .collect()
}

pub fn parallel_reprocess_sends_every_row_once(b: &Backend) {
    let (child, url) = coresim();
    let _core = Killed(child);
    let guids = failed_rows(b, "G-PP");
    let s = b.open(Access::Batch);
    let sum = batch::reprocess(s.as_ref(), &client(&url), 5, None, 8, &SystemClock).unwrap();
    assert_eq!(
        (sum.examined, sum.sent, sum.done, sum.not_tried, sum.raced),
        (N, N, N, 0, 0),
        "{sum:?}"
    );
    let http = CoreHttp::new(&url, Duration::from_secs(10));
    for g in &guids {
        assert_eq!(http.bookings(g).unwrap(), 1, "{g}");
        let row = s.read(g).unwrap().unwrap();
        assert_eq!((row.state, row.attempts), (State::Done, Some(2)), "{g}");
    }
}

/// Two parallel runs on one ledger (two hosts' crons): each row is sent by exactly one.
pub fn two_parallel_reprocess_runs_at_once_send_each_row_once(b: &Backend) {
    let (child, url) = coresim();
    let _core = Killed(child);
    let guids = failed_rows(b, "G-PP2");
    let runs: Vec<batch::ReprocessSummary> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..2)
            .map(|_| {
                let (store, url) = (b.open(Access::Batch), url.clone());
                s.spawn(move || {
                    batch::reprocess(store.as_ref(), &client(&url), 5, None, 8, &SystemClock)
                        .unwrap()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(runs[0].sent + runs[1].sent, N, "{runs:?}");
    assert_eq!(runs[0].done + runs[1].done, N, "{runs:?}");
    let http = CoreHttp::new(&url, Duration::from_secs(10));
    for g in &guids {
        assert_eq!(http.bookings(g).unwrap(), 1, "{g}");
    }
}

/// The core is down: no row is claimed, no attempt spent (contract §5, v1.2).
pub fn parallel_reprocess_claims_nothing_while_the_core_is_unreachable(b: &Backend) {
    let guids = failed_rows(b, "G-PD");
    let s = b.open(Access::Batch);
    let sum = batch::reprocess(
        s.as_ref(),
        &client(&testkit::dead_url()),
        5,
        None,
        8,
        &SystemClock,
    )
    .unwrap();
    assert_eq!(
        (sum.examined, sum.sent, sum.not_tried, sum.unsettled.len()),
        (N, 0, N, N),
        "{sum:?}"
    );
    for g in &guids {
        let row = s.read(g).unwrap().unwrap();
        assert_eq!((row.state, row.attempts), (State::Failed, Some(1)), "{g}");
    }
}
