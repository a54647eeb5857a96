//! A tool starting on a PostgreSQL ledger that is in use: applying the schema must neither
//! wait for another session's open transaction nor hold back the relays' claims meanwhile.

use std::thread;
use std::time::{Duration, Instant};

use crate::util::*;

/// An operator settling a row by hand in `psql` (`BEGIN; UPDATE tx …;` and thinking) holds
/// that row until COMMIT. A resolve run started meanwhile must start, and a relay's claim
/// of another GUID must not wait for either of them.
#[test]
fn a_tool_starting_beside_an_open_transaction_starts_and_holds_no_claim_back() {
    skip_if_unavailable!();
    let held = msg("G-OP-HELD", 5, "");
    let s = Scene::new()
        .core(&[])
        .relay(&[])
        .row(RowSpec::unknown(&held).age(OLD))
        .build();
    let mut operator = s.db.pg_client();
    operator
        .batch_execute("BEGIN; UPDATE tx SET rsp_code = rsp_code WHERE guid = 'G-OP-HELD'")
        .expect("the operator's transaction");

    let (run, claim_took) = thread::scope(|scope| {
        let run = scope.spawn(|| s.resolve(&["--min-age", "60", "--dry-run"]));
        thread::sleep(Duration::from_millis(500)); // resolve is applying the schema
        let asked = Instant::now();
        let reply = s.call(&msg("G-OP-OTHER", 7, ""));
        let took = asked.elapsed();
        assert_code(&reply, "0000");
        (run.join().unwrap(), took)
    });
    operator.batch_execute("ROLLBACK").expect("rollback");
    assert!(
        claim_took < Duration::from_secs(1),
        "a claim of another GUID waited {claim_took:?} for a tool's start-up"
    );
    run.expect_code(EXIT_SETTLED);
}
