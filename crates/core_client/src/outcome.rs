//! What the core's answers mean (contract §3): the outcome of a POST, of an inquiry, and the
//! classification of a failed call: `NotSent` only where the request provably never left
//! (marked by `pre_send`), `Unknown` for everything else.

use serde::Deserialize;
use ureq::Error;

use crate::pre_send;
pub use core_api::{Inquiry, InquiryDetail, Outcome};
use wire::{BOOKING_BODY_LEN, Code, Transfer};

#[derive(Deserialize)]
struct BookingJson {
    guid: Option<String>,
    core_ref: String,
    amount: u64,
    booked_at: String,
}

#[derive(Deserialize)]
struct RejectionJson {
    code: String,
}

/// The transfer a booking must be for: our GUID and our amount. A booking that names
/// another GUID, none, or another amount is not ours to record (a core that mixed up its
/// answers, an environment's core booking something else under our GUID): the outcome stays
/// in doubt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ours {
    pub guid: String,
    pub amount: u64,
}

impl Ours {
    pub fn of(t: &Transfer) -> Ours {
        Ours {
            guid: t.guid.clone(),
            amount: t.amount,
        }
    }
}

/// What a complete answer to a POST of `ours` means (contract §3).
pub fn outcome_of(status: u16, body: &[u8], ours: Ours) -> Outcome {
    match status {
        200 => match booking(body, ours) {
            Ok(body) => Outcome::Booked(body),
            Err(why) => Outcome::Unknown(format!("HTTP 200 but {why}")),
        },
        400..=499 => match rejection(body) {
            Ok(code) => Outcome::Rejected(code),
            Err(why) => Outcome::Unknown(format!("HTTP {status} but {why}")),
        },
        _ => Outcome::Unknown(format!("HTTP {status}")),
    }
}

/// Only a failure before any request byte was written (marked by the resolver or the
/// connector) is `NotSent`; every other failure may have reached the core.
pub(crate) fn classify(e: &Error) -> Outcome {
    match pre_send::pre_send(e) {
        Some(why) => Outcome::NotSent(why.to_string()),
        None => Outcome::Unknown(format!("after connecting: {e}")),
    }
}

/// A 200 body that is a booking of `ours` (its GUID and amount) and fits the reply format.
/// The error says both sides, for the log.
pub(crate) fn booking(text: &[u8], ours: Ours) -> Result<[u8; BOOKING_BODY_LEN], String> {
    booking_or_other(text, ours).map_err(|(_, why)| why)
}

/// As [`booking`], the error also naming the amount of a booking of our GUID for another
/// amount (whether or not the reply format could carry it).
pub(crate) fn booking_or_other(
    text: &[u8],
    ours: Ours,
) -> Result<[u8; BOOKING_BODY_LEN], (Option<u64>, String)> {
    let b: BookingJson =
        serde_json::from_slice(text).map_err(|e| (None, format!("body is not a booking: {e}")))?;
    let theirs = || {
        format!(
            "(core_ref {:?}, amount {}, booked_at {:?})",
            b.core_ref, b.amount, b.booked_at
        )
    };
    match &b.guid {
        Some(g) if *g == ours.guid => {}
        Some(g) => {
            return Err((
                None,
                format!(
                    "the booking is for guid {g:?} {}, ours is {:?}",
                    theirs(),
                    ours.guid
                ),
            ));
        }
        None => {
            return Err((
                None,
                format!(
                    "the booking names no guid {}, ours is {:?}",
                    theirs(),
                    ours.guid
                ),
            ));
        }
    }
    // What the reply cannot carry first (its own message), then whether it is our amount;
    // either way a booking of our GUID for another amount is said to be one.
    let body = wire::booking_body(&b.core_ref, b.amount, &b.booked_at);
    let other = (b.amount != ours.amount).then_some(b.amount);
    let body = body.map_err(|e| (other, e.0))?;
    if let Some(amount) = other {
        return Err((
            other,
            format!(
                "the booking is for amount {amount} {}, ours is {}",
                theirs(),
                ours.amount
            ),
        ));
    }
    Ok(body)
}

/// A 4xx body with a business code: four of `[A-Z0-9]`, never `0000` nor `E9..`, which
/// are ours and would mislead a channel.
fn rejection(text: &[u8]) -> Result<Code, String> {
    let r: RejectionJson =
        serde_json::from_slice(text).map_err(|e| format!("body is not a rejection: {e}"))?;
    let code: Code = r
        .code
        .as_bytes()
        .try_into()
        .map_err(|_| format!("code {:?} is not 4 characters", r.code))?;
    let valid = code
        .iter()
        .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit());
    if !valid || &code == b"0000" || code.starts_with(b"E9") {
        return Err(format!("code {:?} is not a business rejection", r.code));
    }
    Ok(code)
}

#[cfg(test)]
mod tests {
    use std::io;

    use ureq::Timeout;

    use super::*;

    #[test]
    fn only_marked_errors_are_not_sent() {
        let not_sent = |e: Error| matches!(classify(&e), Outcome::NotSent(_));
        for e in [
            Error::Timeout(Timeout::Connect),
            Error::Timeout(Timeout::SendRequest),
            Error::Timeout(Timeout::RecvResponse),
            Error::Timeout(Timeout::RecvBody),
            Error::Timeout(Timeout::Global),
            Error::Io(io::ErrorKind::ConnectionRefused.into()),
            Error::Io(io::ErrorKind::ConnectionReset.into()),
            Error::Io(io::ErrorKind::UnexpectedEof.into()),
            Error::Io(io::Error::other("uncategorised")),
            Error::ConnectionFailed,
            Error::HostNotFound,
        ] {
            assert!(!not_sent(e), "an unmarked error may have left");
        }
    }

    #[test]
    fn a_booking_of_our_guid_for_another_amount_is_told_apart() {
        let ours = Ours {
            guid: "G1".into(),
            amount: 1500,
        };
        let other =
            br#"{"guid":"G1","core_ref":"C1","amount":7,"booked_at":"2026-12-02T09:30:12Z"}"#;
        let (amount, why) = booking_or_other(other, ours.clone()).unwrap_err();
        assert_eq!(amount, Some(7));
        assert_eq!(booking(other, ours.clone()).unwrap_err(), why);
        // Another amount the reply could not even carry is still another amount.
        let huge = br#"{"guid":"G1","core_ref":"C1","amount":10000000000000,"booked_at":"2026-12-02T09:30:12Z"}"#;
        assert_eq!(
            booking_or_other(huge, ours.clone()).unwrap_err().0,
            Some(10_000_000_000_000)
        );
        // Another GUID, or our amount in a body the reply cannot carry, is no answer at all.
        let theirs =
            br#"{"guid":"G2","core_ref":"C1","amount":7,"booked_at":"2026-12-02T09:30:12Z"}"#;
        assert_eq!(booking_or_other(theirs, ours.clone()).unwrap_err().0, None);
        let bad = br#"{"guid":"G1","core_ref":"C1","amount":1500,"booked_at":"yesterday"}"#;
        assert_eq!(booking_or_other(bad, ours).unwrap_err().0, None);
    }
}
