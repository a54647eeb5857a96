//! The slots and the descriptor budget, with the private parts in reach.

use std::net::{IpAddr, Ipv4Addr, TcpStream};
use std::sync::atomic::Ordering;
use std::thread;
use std::time::Duration;

use super::*;
use crate::slot::Slot;

fn relay(max_per_peer: usize) -> (tempfile::TempDir, Relay) {
    let dir = tempfile::tempdir().unwrap();
    let config = Config {
        listen: "127.0.0.1:0".into(),
        http_listen: None,
        core_url: "http://127.0.0.1:9".into(),
        core_tls: TlsFiles::default(),
        connect_timeout: Duration::from_millis(100),
        read_timeout: Duration::from_millis(100),
        frame_timeout: Duration::from_secs(1),
        idle_timeout: Duration::from_secs(1),
        max_connections: 8,
        max_connections_per_peer: max_per_peer,
        late_reply: Duration::ZERO,
        max_late_replies: 0,
        tls: None,
        max_connections_per_channel: None,
        admin: None,
        admin_limits: Default::default(),
        commit: "test",
    };
    let db = Db::Sqlite(dir.path().join("l.db"));
    let relay = Relay::start(&db, config).unwrap();
    (dir, relay)
}

fn stream(relay: &Relay) -> TcpStream {
    TcpStream::connect(relay.local_addr().unwrap()).unwrap()
}

#[test]
fn a_panic_in_a_connection_thread_still_frees_its_slot() {
    let (_d, relay) = relay(8);
    let ip: IpAddr = Ipv4Addr::LOCALHOST.into();
    let slot = Slot::take(&relay.shared, ip, stream(&relay)).unwrap();
    assert_eq!(relay.shared.conns().open.len(), 1);
    let died = thread::spawn(move || {
        let _slot = slot;
        panic!("a bug in a connection thread");
    })
    .join();
    assert!(died.is_err());
    let conns = relay.shared.conns();
    assert!(conns.open.is_empty() && conns.per_peer.is_empty());
}

#[test]
fn slots_are_counted_per_peer() {
    let (_d, relay) = relay(2);
    let a: IpAddr = Ipv4Addr::LOCALHOST.into();
    let b: IpAddr = Ipv4Addr::new(127, 0, 0, 2).into();
    let s1 = Slot::take(&relay.shared, a, stream(&relay)).unwrap();
    let _s2 = Slot::take(&relay.shared, a, stream(&relay)).unwrap();
    assert!(Slot::take(&relay.shared, a, stream(&relay)).is_none());
    assert!(Slot::take(&relay.shared, b, stream(&relay)).is_some());
    assert_eq!(relay.shared.refused_peer.load(Ordering::Relaxed), 1);
    drop(s1);
    assert!(Slot::take(&relay.shared, a, stream(&relay)).is_some());
}

#[test]
fn the_descriptor_budget_grows_with_the_connections() {
    let sqlite = ledger_descriptors(&Db::Sqlite("l.db".into()));
    assert!(
        descriptors_needed(1024, sqlite) < 4096,
        "fits a common hard limit of 4096"
    );
    assert!(descriptors_needed(1024, sqlite) > 2 * 1024);
    assert!(descriptors_needed(2048, sqlite) > descriptors_needed(1024, sqlite));
}
