//! GUIDs that belong to the channel that claimed them (CONTRACT §8): another channel's resend
//! of a GUID is refused `E904` and books nothing; a named channel may re-claim a FAILED GUID
//! that no channel owned, and owns it from then on. Over mutual TLS (`tls_channel`'s scene).

use wire::E_GUID_REUSED;

use super::tls_scene::TlsScene;
use crate::util::*;

#[test]
fn a_guid_belongs_to_the_channel_that_claimed_it() {
    skip_if_unavailable!();
    let s = TlsScene::new(true, &[]);
    let (a, b) = (s.pki.client("chan-a"), s.pki.client("chan-b"));
    let m = msg("G-OWNED", 700, "");
    let first = s.chan(Some(&a)).unwrap().call(&m).unwrap();
    assert_code(&first, "0000");
    let theirs = s.chan(Some(&b)).unwrap().call(&m).unwrap();
    assert_eq!(theirs, short(&m, &E_GUID_REUSED), "B never sees A's reply");
    assert_eq!(s.core.by_guid().get("G-OWNED"), Some(&1));
    assert_eq!(s.chan(Some(&a)).unwrap().call(&m).unwrap(), first);
    assert_eq!(
        s.db.row("G-OWNED").unwrap().channel.as_deref(),
        Some("chan-a")
    );

    // An anonymous channel (a plain-TCP relay on the same ledger) gets E904 for it too.
    let anon = msg("G-NO-CHANNEL", 701, "");
    let mut s = s;
    let stored = s.meanwhile(|s| {
        let plain = start_relay(&s.db, &s.core.url(), &[]);
        assert_eq!(call(&plain.addr, &m), short(&m, &E_GUID_REUSED));
        call(&plain.addr, &anon)
    });

    // A GUID with no channel (claimed anonymously) is usable by a named channel: the stored
    // reply, byte for byte, and the row keeps no channel.
    assert_code(&stored, "0000");
    assert_eq!(s.chan(Some(&b)).unwrap().call(&anon).unwrap(), stored);
    assert_eq!(s.db.row("G-NO-CHANNEL").unwrap().channel, None);
    assert_eq!(s.core.bookings("G-OWNED"), 1);
    assert_eq!(s.core.bookings("G-NO-CHANNEL"), 1);
}

/// A FAILED row with no channel (the core was down for an anonymous channel) re-claimed by a
/// named channel becomes that channel's: sent once more, then E904 to the anonymous one.
#[test]
fn a_named_channel_reclaims_a_failed_guid_without_a_channel_and_owns_it() {
    skip_if_unavailable!();
    let s = TlsScene::new(true, &[]);
    let a = s.pki.client("chan-a");
    let m = msg("G-RECLAIM", 702, "");
    let mut s = s;
    s.meanwhile(|s| {
        let down = start_relay(&s.db, &testkit::dead_url(), &[]);
        assert_code(&call(&down.addr, &m), "E902");
    });
    assert_eq!(s.db.row("G-RECLAIM").unwrap().channel, None);
    let reply = s.chan(Some(&a)).unwrap().call(&m).unwrap();
    assert_code(&reply, "0000");
    let row = s.db.row("G-RECLAIM").unwrap();
    assert_eq!(
        (row.channel.as_deref(), row.attempts),
        (Some("chan-a"), Some(2))
    );
    s.meanwhile(|s| {
        let plain = start_relay(&s.db, &s.core.url(), &[]);
        assert_eq!(call(&plain.addr, &m), short(&m, &E_GUID_REUSED));
    });
    assert_eq!(s.core.bookings("G-RECLAIM"), 1);
}
