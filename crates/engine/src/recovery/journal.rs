//! A row without a stored request (contract §5: inserted by hand, E904 to every request),
//! with one exception (§11): `restore --journal` writes the core's bookings made after the
//! backup as DONE/`0000` rows holding the booking's 90-byte reply and no request, since the
//! journal has none. A resend of such a GUID whose amount is the booking's is the request
//! that was booked, and gets `0000` with the reply built from its own header and the stored
//! booking; any other amount gets `E904`. The core is not called and nothing is written.

use ledger::state::{Row, State};
use wire::{self, BOOKING_BODY_LEN, GUID_LEN, HEADER_LEN, TX_TRNF};

use crate::record::Handled;

/// Where the amount is in a request message and in a booking body (13 digits in both).
const REQUEST_AMOUNT: std::ops::Range<usize> = 73..86;
const BODY_AMOUNT: std::ops::Range<usize> = 18..31;

/// The answer a row without a stored request gives to request `msg` (valid, for the row's
/// GUID; the caller has checked that its channel may use the row).
pub(crate) fn answer_without_request(row: &Row, msg: &[u8]) -> Handled {
    let booking =
        journal_booking(row).filter(|body| msg.get(REQUEST_AMOUNT) == Some(&body[BODY_AMOUNT]));
    match booking {
        Some(body) => Handled {
            guid: row.guid.clone(),
            reply: wire::reply_to(msg, &wire::OK, Some(&body)),
            code: wire::OK,
            state: Some(State::Done),
            detail: None,
            // Answered from a row that was already DONE, as any replay.
            replayed: true,
        },
        None => Handled::short(&row.guid, msg, wire::E_GUID_REUSED, Some(row.state)),
    }
}

/// The booking body of a row `restore --journal` wrote: DONE/`0000`, and a stored reply that
/// is a well-formed 90-byte `0000` reply to this GUID (`R`, `TRNF`, the GUID space-padded,
/// `0000`, then core_ref, 13 digits of amount and 14 of booked_at). `None` for anything
/// else: a hand-made row must never lend its bytes to a reply.
fn journal_booking(row: &Row) -> Option<[u8; BOOKING_BODY_LEN]> {
    if row.state != State::Done || row.rsp_code.as_deref() != Some("0000") {
        return None;
    }
    let reply = row.response.as_deref()?;
    if reply.len() != HEADER_LEN + BOOKING_BODY_LEN {
        return None;
    }
    let (header, body) = reply.split_at(HEADER_LEN);
    let guid = format!("{:<GUID_LEN$}", row.guid);
    let header_ok = header[0] == b'R'
        && &header[1..5] == TX_TRNF.as_bytes()
        && &header[5..41] == guid.as_bytes()
        && header[41..45] == wire::OK;
    let core_ref = &body[..18];
    let body_ok = core_ref[0] != b' '
        && core_ref.iter().all(|b| (0x20..=0x7e).contains(b))
        && body[18..].iter().all(u8::is_ascii_digit);
    (header_ok && body_ok).then(|| body.try_into().expect("45 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const BODY: &str = "C1                000000000150020261202093012";

    fn row(response: &str) -> Row {
        Row {
            guid: "G-J".into(),
            tx_code: Some("TRNF".into()),
            state: State::Done,
            rsp_code: Some("0000".into()),
            request: None,
            response: Some(response.as_bytes().to_vec()),
            attempts: Some(0),
            updated_at: "2026-12-02 09:30:13".into(),
            channel: None,
        }
    }

    fn reply(guid: &str, body: &str) -> String {
        format!("RTRNF{guid:<36}0000{body}")
    }

    #[test]
    fn only_a_well_formed_booking_reply_for_this_guid_counts() {
        assert!(journal_booking(&row(&reply("G-J", BODY))).is_some());
        for bad in [
            reply("G-OTHER", BODY),
            reply("G-J", &BODY[..44]),
            reply("G-J", &format!("{BODY} ")),
            reply("G-J", &BODY.replace("0000000001500", "00000000015x0")),
            reply("G-J", &format!("{:18}{}", "", &BODY[18..])),
            reply("G-J", &format!(" {}", &BODY[1..])),
            reply("G-J", BODY).replacen("0000C1", "B001C1", 1),
            reply("G-J", BODY).replacen('R', "Q", 1),
        ] {
            assert_eq!(journal_booking(&row(&bad)), None, "{bad:?}");
        }
        let mut failed = row(&reply("G-J", BODY));
        failed.state = State::Failed;
        assert_eq!(journal_booking(&failed), None);
        let mut rejected = row(&reply("G-J", BODY));
        rejected.rsp_code = Some("B001".into());
        assert_eq!(journal_booking(&rejected), None);
    }
}
