//! Recovery mode (contract §11) against the scripted core: while the ledger is recovering, a
//! GUID without a row, or a FAILED one, is asked about before it is claimed; a booking of it
//! is written DONE without a POST and replayed after; another amount, or an inquiry that
//! proves nothing, writes and sends nothing. And the rows `restore --journal` writes, which
//! hold a booking but no request.

use engine::core::{InquiryDetail, Outcome};
use engine::events::NoEvents;
use engine::recovery::BOOKED_BEFORE;
use engine::transfer::{Handled, Mode, handle, handle_in};
use ledger::recovery::Booked;
use ledger::sqlite::Ledger;
use ledger::state::State;
use ledger::store::prelude::*;
use wire::Transfer;

use crate::scripted::{C1, Call, Scripted, booking, ledger, reply, request, state};

const ATM: Option<&str> = Some("atm-1");

/// Handles `msg` from `channel` with the ledger recovering.
fn recovering(
    store: &std::sync::Mutex<Ledger>,
    core: &Scripted,
    channel: Option<&str>,
    msg: &[u8],
) -> Handled {
    handle_in(store, core, &NoEvents, Mode::Recovering, channel, msg)
}

/// `guid`'s request for `amount` (otherwise as `request`).
fn request_for(guid: &str, amount: u64) -> Vec<u8> {
    wire::encode_request(&Transfer {
        guid: guid.into(),
        from_account: "00000000000001".into(),
        to_account: "00000000000002".into(),
        amount,
        memo: "rent".into(),
    })
    .unwrap()
}

/// The reason the last change of `guid` gave, and the state it left.
fn last_change(store: &impl Store, guid: &str) -> (Option<String>, Option<String>, Option<String>) {
    let h = store.history(guid).unwrap().pop().expect("a history row");
    (h.from_state, h.to_state, h.reason)
}

fn other_amount() -> InquiryDetail {
    InquiryDetail::BookedOther {
        amount: 7,
        why: "inquiry answered 200 but the booking is for amount 7".into(),
    }
}

#[test]
fn a_booking_the_ledger_forgot_is_written_done_without_a_post_and_replayed() {
    let (_d, store) = ledger();
    let core = Scripted::new([]).inquiries([InquiryDetail::Booked(booking("C1"))]);
    let msg = request("G-FORGOT");
    let h = recovering(&store, &core, ATM, &msg);
    assert_eq!(h.reply, reply("G-FORGOT", "0000", C1));
    assert_eq!(
        (h.code, h.state, h.replayed),
        (*b"0000", Some(State::Done), false)
    );
    let row = store.read("G-FORGOT").unwrap().unwrap();
    assert_eq!((row.state, row.attempts), (State::Done, Some(0)));
    assert_eq!(row.rsp_code.as_deref(), Some("0000"));
    assert_eq!(row.request.as_deref(), Some(&msg[..]));
    assert_eq!(row.response.as_deref(), Some(&h.reply[..]));
    assert_eq!(row.channel.as_deref(), ATM);
    assert_eq!(
        last_change(&*store, "G-FORGOT"),
        (None, Some("DONE".into()), Some(BOOKED_BEFORE.into()))
    );

    // The resend is answered from the row: the same bytes, no inquiry, no POST.
    let again = recovering(&store, &core, ATM, &msg);
    assert_eq!(
        again,
        Handled {
            replayed: true,
            ..h
        }
    );
    assert_eq!(core.asked(), ["G-FORGOT"]);
    assert!(core.posted().is_empty());
}

#[test]
fn a_booking_for_another_amount_is_e904_and_nothing_is_written() {
    let (_d, store) = ledger();
    let core = Scripted::new([]).inquiries([other_amount()]);
    let h = recovering(&store, &core, None, &request("G-OTHER"));
    assert_eq!(h.reply, reply("G-OTHER", "E904", ""));
    assert_eq!((h.code, h.state), (*b"E904", None));
    assert_eq!(store.read("G-OTHER").unwrap(), None);
    assert!(core.posted().is_empty());
}

#[test]
fn the_cores_404_lets_the_claim_and_the_send_go_on() {
    let (_d, store) = ledger();
    let core = Scripted::new([Call::answers(Outcome::Booked(booking("C1")))])
        .inquiries([InquiryDetail::NotFound]);
    let h = recovering(&store, &core, None, &request("G-NEW"));
    assert_eq!(h.reply, reply("G-NEW", "0000", C1));
    assert_eq!(state(&*store, "G-NEW"), (State::Done, Some(1)));
    assert_eq!(core.asked(), ["G-NEW"]);
    assert_eq!(core.posted(), ["G-NEW"]);
}

#[test]
fn an_inquiry_that_proves_nothing_is_e902_and_nothing_is_written() {
    let (_d, store) = ledger();
    let core = Scripted::new([]).inquiries([InquiryDetail::Error(
        "inquiry answered 404 without the core's JSON body (a proxy's page?)".into(),
    )]);
    let h = recovering(&store, &core, None, &request("G-DOWN"));
    assert_eq!(h.reply, reply("G-DOWN", "E902", ""));
    assert_eq!((h.code, h.state), (*b"E902", None));
    assert_eq!(store.read("G-DOWN").unwrap(), None);
    assert!(core.posted().is_empty());
}

/// A FAILED row (attempt 1 never left) of `guid`, made the ordinary way.
fn failed_row(store: &std::sync::Mutex<Ledger>, guid: &str) -> Vec<u8> {
    let msg = request(guid);
    let core = Scripted::new([Call::answers(Outcome::NotSent("refused".into()))]);
    assert_eq!(handle(store, &core, &NoEvents, None, &msg).code, *b"E902");
    assert_eq!(state(store, guid), (State::Failed, Some(1)));
    msg
}

#[test]
fn a_failed_row_the_core_booked_is_settled_done_on_its_attempt_without_a_post() {
    let (_d, store) = ledger();
    let msg = failed_row(&store, "G-FAILED");
    let core = Scripted::new([]).inquiries([InquiryDetail::Booked(booking("C1"))]);
    let h = recovering(&store, &core, None, &msg);
    assert_eq!(h.reply, reply("G-FAILED", "0000", C1));
    assert_eq!((h.code, h.state), (*b"0000", Some(State::Done)));
    assert_eq!(state(&*store, "G-FAILED"), (State::Done, Some(1)));
    assert_eq!(
        last_change(&*store, "G-FAILED"),
        (
            Some("FAILED".into()),
            Some("DONE".into()),
            Some(BOOKED_BEFORE.into())
        )
    );
    assert!(core.posted().is_empty());
    let again = recovering(&store, &core, None, &msg);
    assert_eq!(
        again,
        Handled {
            replayed: true,
            ..h
        }
    );
    assert_eq!(core.asked(), ["G-FAILED"]);
}

#[test]
fn a_failed_row_is_re_claimed_only_after_the_cores_404() {
    let (_d, store) = ledger();
    let msg = failed_row(&store, "G-FAILED");
    let core = Scripted::new([Call::answers(Outcome::Booked(booking("C1")))]).inquiries([
        InquiryDetail::Error("inquiry failed: connection refused".into()),
        other_amount(),
        InquiryDetail::NotFound,
    ]);
    let h = recovering(&store, &core, None, &msg);
    assert_eq!(h.reply, reply("G-FAILED", "E902", ""));
    assert_eq!(h.state, Some(State::Failed));
    let h = recovering(&store, &core, None, &msg);
    assert_eq!(h.reply, reply("G-FAILED", "E904", ""));
    assert_eq!(state(&*store, "G-FAILED"), (State::Failed, Some(1)));
    assert!(core.posted().is_empty());

    let h = recovering(&store, &core, None, &msg);
    assert_eq!(h.reply, reply("G-FAILED", "0000", C1));
    assert_eq!(state(&*store, "G-FAILED"), (State::Done, Some(2)));
    assert_eq!(core.posted(), ["G-FAILED"]);
    assert_eq!(core.asked().len(), 3);
}

/// While the inquiry was in flight another relay claimed the GUID: the booking is not
/// written over its row, and the channel is answered from the row as it is now.
#[test]
fn a_row_that_appeared_during_the_inquiry_is_not_written_over() {
    let (_d, store) = ledger();
    let msg = request("G-RACE");
    let (writer, claim) = (store.clone(), msg.clone());
    let core = Scripted::new([]).inquiry_during(InquiryDetail::Booked(booking("C1")), move || {
        assert!(writer.claim_new("G-RACE", "TRNF", &claim, None).unwrap());
    });
    let h = recovering(&store, &core, None, &msg);
    assert_eq!(h.reply, reply("G-RACE", "E903", ""));
    assert_eq!(state(&*store, "G-RACE"), (State::Sent, Some(1)));
    assert!(core.posted().is_empty());
}

/// While the inquiry was in flight another relay re-claimed the FAILED row: the settlement
/// guarded by attempt 1 does not land on attempt 2.
#[test]
fn a_failed_row_re_claimed_during_the_inquiry_is_not_settled() {
    let (_d, store) = ledger();
    let msg = failed_row(&store, "G-RACE");
    let (writer, claim) = (store.clone(), msg.clone());
    let core = Scripted::new([]).inquiry_during(InquiryDetail::Booked(booking("C1")), move || {
        assert_eq!(
            writer.reclaim_failed("G-RACE", &claim, None).unwrap(),
            Some(2)
        );
    });
    let h = recovering(&store, &core, None, &msg);
    assert_eq!(h.reply, reply("G-RACE", "E903", ""));
    assert_eq!(state(&*store, "G-RACE"), (State::Sent, Some(2)));
    assert!(core.posted().is_empty());
}

/// Not recovering, nothing is asked (the scripted core panics at an unscripted inquiry): a
/// new GUID and a FAILED re-claim are sent at once.
#[test]
fn not_recovering_nothing_is_asked() {
    let (_d, store) = ledger();
    let msg = failed_row(&store, "G-FAILED");
    let core = Scripted::new([
        Call::answers(Outcome::Booked(booking("C1"))),
        Call::answers(Outcome::Booked(booking("C1"))),
    ]);
    let h = handle_in(&*store, &core, &NoEvents, Mode::Ordinary, None, &msg);
    assert_eq!(h.reply, reply("G-FAILED", "0000", C1));
    let h = handle_in(
        &*store,
        &core,
        &NoEvents,
        Mode::Ordinary,
        None,
        &request("G-NEW"),
    );
    assert_eq!(h.reply, reply("G-NEW", "0000", C1));
    assert!(core.asked().is_empty());
    assert_eq!(core.posted(), ["G-FAILED", "G-NEW"]);
}

/// Recovering, a GUID whose row is there is answered as always, without an inquiry.
#[test]
fn recovering_a_known_guid_is_answered_from_its_row() {
    let (_d, store) = ledger();
    let core = Scripted::new([Call::answers(Outcome::Booked(booking("C1")))]);
    let msg = request("G-KNOWN");
    let first = handle(&*store, &core, &NoEvents, None, &msg);
    let again = recovering(&store, &core, None, &msg);
    assert_eq!(
        again,
        Handled {
            replayed: true,
            ..first
        }
    );
    let other = recovering(&store, &core, None, &request_for("G-KNOWN", 1501));
    assert_eq!(other.reply, reply("G-KNOWN", "E904", ""));
    assert!(core.asked().is_empty());
}

/// A row as `restore --journal` writes it: DONE/0000, the booking's reply, no request.
fn journal_row(store: &impl Store, guid: &str, response: Vec<u8>) {
    let b = Booked {
        guid: guid.into(),
        tx_code: "TRNF".into(),
        request: None,
        response,
        channel: None,
        who: Some("restore".into()),
        reason: "restore: booked by the core after the backup (journal)".into(),
    };
    assert!(store.record_booked(&b).unwrap());
}

#[test]
fn a_journal_row_answers_a_resend_of_its_amount_and_e904_to_another() {
    let (_d, store) = ledger();
    journal_row(&*store, "G-JOURNAL", reply("G-JOURNAL", "0000", C1));
    let before = store.read("G-JOURNAL").unwrap();
    let core = Scripted::new([]);
    for mode in [Mode::Ordinary, Mode::Recovering] {
        for channel in [None, ATM] {
            let h = handle_in(
                &*store,
                &core,
                &NoEvents,
                mode,
                channel,
                &request("G-JOURNAL"),
            );
            assert_eq!(
                h.reply,
                reply("G-JOURNAL", "0000", C1),
                "{mode:?} {channel:?}"
            );
            assert_eq!((h.state, h.replayed), (Some(State::Done), true));
            let h = handle_in(
                &*store,
                &core,
                &NoEvents,
                mode,
                channel,
                &request_for("G-JOURNAL", 1501),
            );
            assert_eq!(
                h.reply,
                reply("G-JOURNAL", "E904", ""),
                "{mode:?} {channel:?}"
            );
        }
    }
    assert_eq!(store.read("G-JOURNAL").unwrap(), before, "nothing written");
    assert!(core.asked().is_empty());
    assert!(core.posted().is_empty());
}

/// A row without a request whose stored reply is not a booking reply of its GUID is what it
/// always was: E904 to every request.
#[test]
fn a_row_without_a_request_and_without_a_booking_reply_is_e904() {
    let (_d, store) = ledger();
    journal_row(&*store, "G-ODD", reply("G-OTHER", "0000", C1));
    journal_row(&*store, "G-SHORT", reply("G-SHORT", "0000", &C1[..44]));
    let core = Scripted::new([]);
    for guid in ["G-ODD", "G-SHORT"] {
        let h = handle(&*store, &core, &NoEvents, None, &request(guid));
        assert_eq!(h.reply, reply(guid, "E904", ""));
    }
}
