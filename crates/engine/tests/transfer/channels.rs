//! Contract §8: a GUID belongs to the channel that claimed it. Another channel, or an
//! anonymous one, gets `E904` for it: never the stored reply, no change, no call.

use engine::core::Outcome;
use engine::events::NoEvents;
use engine::transfer::{Handled, handle};
use ledger::state::State;
use ledger::store::prelude::*;

use crate::scripted::{C1, Call, Scripted, booking, ledger, reply, request, state};

const A: Option<&str> = Some("branch-a");
const B: Option<&str> = Some("branch-b");

#[test]
fn another_channel_and_an_anonymous_one_get_e904_for_an_owned_guid() {
    let (_d, store) = ledger();
    let core = Scripted::new([Call::answers(Outcome::Booked(booking("C1")))]);
    let msg = request("G-OWNED");
    let h = handle(store.as_ref(), &core, &NoEvents, A, &msg);
    assert_eq!(h.reply, reply("G-OWNED", "0000", C1));

    for other in [B, None] {
        let h = handle(store.as_ref(), &core, &NoEvents, other, &msg);
        assert_eq!(h.reply, reply("G-OWNED", "E904", ""), "{other:?}");
        assert_eq!(h.code, *b"E904");
    }
    assert_eq!(
        handle(store.as_ref(), &core, &NoEvents, A, &msg).reply,
        h.reply
    );
    assert_eq!(core.posted(), ["G-OWNED"], "the core called once");
    assert_eq!(state(&*store, "G-OWNED"), (State::Done, Some(1)));
}

#[test]
fn a_named_channel_uses_a_guid_without_a_channel_and_reclaims_it_as_its_own() {
    let (_d, store) = ledger();
    let core = Scripted::new([
        Call::answers(Outcome::Booked(booking("C1"))),
        Call::answers(Outcome::NotSent("connection refused".into())),
        Call::answers(Outcome::Booked(booking("C1"))),
    ]);
    // Booked anonymously: a named channel gets the stored reply.
    let done = request("G-ANON");
    let h = handle(store.as_ref(), &core, &NoEvents, None, &done);
    let replay = Handled {
        replayed: true,
        ..h
    };
    assert_eq!(handle(store.as_ref(), &core, &NoEvents, B, &done), replay);

    // FAILED anonymously: a named channel re-claims it, and then owns it.
    let msg = request("G-ANON-FAILED");
    let h = handle(store.as_ref(), &core, &NoEvents, None, &msg);
    assert_eq!(h.code, *b"E902");
    let h = handle(store.as_ref(), &core, &NoEvents, B, &msg);
    assert_eq!(h.reply, reply("G-ANON-FAILED", "0000", C1));
    let row = store.read("G-ANON-FAILED").unwrap().unwrap();
    assert_eq!(row.channel.as_deref(), Some("branch-b"));
    let h = handle(store.as_ref(), &core, &NoEvents, None, &msg);
    assert_eq!(h.reply, reply("G-ANON-FAILED", "E904", ""));
    assert_eq!(core.posted().len(), 3);
}

#[test]
fn an_owned_failed_guid_is_not_resent_for_another_channel() {
    let (_d, store) = ledger();
    let core = Scripted::new([Call::answers(Outcome::NotSent("connection refused".into()))]);
    let msg = request("G-A-FAILED");
    assert_eq!(
        handle(store.as_ref(), &core, &NoEvents, A, &msg).code,
        *b"E902"
    );
    for other in [B, None] {
        let h = handle(store.as_ref(), &core, &NoEvents, other, &msg);
        assert_eq!(h.reply, reply("G-A-FAILED", "E904", ""), "{other:?}");
    }
    assert_eq!(
        state(&*store, "G-A-FAILED"),
        (State::Failed, Some(1)),
        "unchanged"
    );
    assert_eq!(core.posted().len(), 1);
}
