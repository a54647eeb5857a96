//! A claim is acknowledged only once it is as durable as the server promises: with a
//! synchronous standby named, on that standby too, whatever `synchronous_commit` the role,
//! the database or the server default says (issue 16.1). Here the named standby is never
//! connected, so a claim's COMMIT never comes back: the request costs `E905` after the
//! pool's deadline and the core is never called; `local` (which would not wait for the
//! standby) would have answered `0000` in milliseconds.

use std::time::Duration;

use ledger::db::PG_OP_DEADLINE;

use crate::util::*;

#[test]
fn a_claim_waits_for_the_synchronous_standby_even_where_the_database_says_local() {
    let Some(stage) = Stage::start_with(|server| {
        server
            .exec("ALTER DATABASE postgres SET synchronous_commit = local")
            .expect("the database's default")
    }) else {
        return;
    };
    let (server, relay) = (&stage.server, &stage.relay);
    require_missing_standby(server);
    let c = call(&relay.addr, &guid("no-standby"));
    eprintln!(
        "durability: a claim with the standby missing: {} after {} ms",
        c.code,
        ms(c.elapsed)
    );
    assert_e905_in_time(&c, "synchronous standby missing");
    assert!(
        c.elapsed >= PG_OP_DEADLINE - Duration::from_millis(100),
        "answered before the deadline: the claim did not wait for the standby ({:?})",
        c.elapsed
    );
    assert_eq!(
        stage.core.bookings(&c.guid).expect("bookings"),
        0,
        "the core was called"
    );

    // The standby named no more, the claim's COMMIT returns: its row is SENT, never sent.
    release_standby(server);
    let row = wait_for_row(&stage.rows, &c.guid);
    assert_eq!(row.state, "SENT", "{row:?}");
    let a = stage.aftermath(&[c]);
    eprintln!("durability: {a}");
}
