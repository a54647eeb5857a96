//! Group commit, on either ledger: claims (and results) that arrive together share commits,
//! each still its own guarded statement, each GUID booked once.

use std::sync::Barrier;

use crate::util::*;

use super::metrics::{relay_with_admin, scrape};

/// Channels at once, and transfers each sends.
const CHANNELS: usize = 48;
const EACH: usize = 4;

#[test]
fn transfers_arriving_together_share_commits_and_each_is_booked_once() {
    skip_if_unavailable!();
    let db = TempLedger::new();
    let core = Core::start(&[]);
    let (relay, admin) = relay_with_admin(&db, &core.url(), &[]);
    let start = Barrier::new(CHANNELS);
    std::thread::scope(|s| {
        for c in 0..CHANNELS {
            let (start, addr) = (&start, &relay.addr);
            s.spawn(move || {
                start.wait();
                for i in 0..EACH {
                    assert_code(&call(addr, &msg(&format!("G-GC-{c}-{i}"), 5, "")), "0000");
                }
            });
        }
    });
    for c in 0..CHANNELS {
        for i in 0..EACH {
            assert_eq!(core.bookings(&format!("G-GC-{c}-{i}")), 1);
        }
    }
    let text = scrape(&admin);
    // The start's write check, then a claim and a result per transfer.
    let statements = sample(&text, "txrelay_ledger_commit_batch_size_sum");
    assert_eq!(statements, (1 + 2 * CHANNELS * EACH) as f64, "{text}");
    let commits = sample(&text, "txrelay_ledger_commit_batch_size_count");
    assert!(
        commits < statements,
        "{commits} commits for {statements} statements: none was shared"
    );
}
