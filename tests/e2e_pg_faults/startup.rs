//! The server is down when the relay starts. The relay applies the schema at start, so it
//! cannot start without the server: what is asked of it is to refuse at once, with one line
//! naming the ledger (its password masked), exit 1 — and to start normally once the server
//! is back. (A relay started while the server is frozen: see `hung`.)

use std::time::Duration;

use crate::util::*;

#[test]
fn a_relay_started_while_the_server_is_down_refuses_with_one_line_then_starts() {
    let Some(server) = own_server(None) else {
        return;
    };
    let cluster = server.cluster().expect("our own cluster");
    let db = with_password(&server.fresh_db());
    let (core_proc, core) = coresim();

    cluster.stop().expect("stop the server");
    let r = relay_refusing(&db, &core_proc.url(), Duration::from_secs(40));
    eprintln!(
        "startup, server down: {:?} after {} ms: {}",
        r.code,
        ms(r.took()),
        r.stderr().trim()
    );
    assert_refused(&r, "server down", PASSWORD);
    assert!(
        r.took() <= CALL_LIMIT,
        "refusing took {:?}: the server refuses connections",
        r.took()
    );
    assert!(
        r.stderr().contains("postgres://postgres:***@127.0.0.1:"),
        "{r:?}"
    );

    cluster.start_again().expect("start the server again");
    let relay = relay(&db, &core_proc.url());
    assert_eq!(call(&relay.addr, &guid("started")).code, "0000");
    assert_eq!(core.stats().expect("stats")["bookings"].as_u64(), Some(1));
    assert!(!relay.stderr().contains(PASSWORD), "{}", relay.stderr());
}
