//! Properties of the wire codec over generated input: it never panics, valid requests
//! round-trip, any single broken field is E900, and every booking reply parses back.

use proptest::prelude::*;
use wire::{self, MAX_AMOUNT, Transfer};

/// A valid GUID: 1–36 of the allowed characters, not only dots (contract v1.1).
fn guid() -> impl Strategy<Value = String> {
    "[0-9A-Za-z._-]{1,36}".prop_filter("not only dots", |g| !g.bytes().all(|b| b == b'.'))
}

fn account() -> impl Strategy<Value = String> {
    "[0-9]{14}"
}

/// A memo of at most 40 bytes of UTF-8 without trailing spaces (padding is not content).
fn memo() -> impl Strategy<Value = String> {
    "\\PC{0,40}".prop_map(|s| {
        let mut m = String::new();
        for c in s.chars() {
            if m.len() + c.len_utf8() > 40 {
                break;
            }
            m.push(c);
        }
        m.trim_end_matches(' ').to_string()
    })
}

fn transfer() -> impl Strategy<Value = Transfer> {
    (guid(), account(), account(), 1..=MAX_AMOUNT, memo()).prop_map(
        |(guid, from_account, to_account, amount, memo)| Transfer {
            guid,
            from_account,
            to_account,
            amount,
            memo,
        },
    )
}

/// A field of the request and a way to break it.
#[derive(Debug, Clone)]
enum Break {
    Kind(u8),
    TxCode([u8; 4]),
    GuidChar(usize, u8),
    GuidBlank,
    RspCode([u8; 4]),
    Digit(usize, u8),
    AmountZero,
    Memo(usize),
    Length(usize),
}

fn breakage() -> impl Strategy<Value = Break> {
    let not_guid = any::<u8>().prop_filter("not a GUID char", |b| {
        !(b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b' '))
    });
    prop_oneof![
        any::<u8>()
            .prop_filter("not Q", |b| *b != b'Q')
            .prop_map(Break::Kind),
        any::<[u8; 4]>()
            .prop_filter("not TRNF", |c| c != b"TRNF")
            .prop_map(Break::TxCode),
        (0..36usize, not_guid).prop_map(|(i, b)| Break::GuidChar(i, b)),
        Just(Break::GuidBlank),
        any::<[u8; 4]>()
            .prop_filter("not blank", |c| c != b"    ")
            .prop_map(Break::RspCode),
        (
            45..86usize,
            any::<u8>().prop_filter("not a digit", |b| !b.is_ascii_digit())
        )
            .prop_map(|(i, b)| Break::Digit(i, b)),
        Just(Break::AmountZero),
        (86..126usize).prop_map(Break::Memo),
        (0..300usize)
            .prop_filter("not 126", |n| *n != 126)
            .prop_map(Break::Length),
    ]
}

fn apply(mut m: Vec<u8>, b: &Break) -> Vec<u8> {
    match *b {
        Break::Kind(k) => m[0] = k,
        Break::TxCode(c) => m[1..5].copy_from_slice(&c),
        // Inside the GUID or anywhere in its padding: both are broken.
        Break::GuidChar(i, c) => m[5 + i] = c,
        Break::GuidBlank => m[5..41].fill(b' '),
        Break::RspCode(c) => m[41..45].copy_from_slice(&c),
        Break::Digit(i, c) => m[i] = c,
        Break::AmountZero => m[73..86].fill(b'0'),
        Break::Memo(i) => m[i] = 0xff, // never valid in UTF-8
        Break::Length(n) => m.resize(n, b' '),
    }
    m
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn parsing_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        match wire::parse_request(&bytes) {
            Ok(t) => prop_assert_eq!(wire::encode_request(&t).unwrap().len(), 126),
            Err(m) => {
                let r = m.reply();
                prop_assert_eq!(r.len(), 45);
                prop_assert_eq!(&r[41..45], b"E900");
                prop_assert!(r.iter().all(|b| (0x20..=0x7e).contains(b)));
            }
        }
    }

    #[test]
    fn valid_requests_round_trip(t in transfer()) {
        let m = wire::encode_request(&t).unwrap();
        prop_assert_eq!(m.len(), 126);
        prop_assert_eq!(wire::parse_request(&m).unwrap(), t);
        let framed = wire::frame(&m);
        prop_assert_eq!(wire::parse_len(framed[..4].try_into().unwrap()), Some(126));
    }

    #[test]
    fn any_broken_field_is_e900(t in transfer(), b in breakage()) {
        let m = apply(wire::encode_request(&t).unwrap(), &b);
        let err = wire::parse_request(&m);
        prop_assert!(err.is_err(), "{:?} accepted", b);
        let reply = err.unwrap_err().reply();
        prop_assert_eq!(&reply[41..45], b"E900");
    }

    #[test]
    fn booking_replies_parse_back(
        t in transfer(),
        core_ref in "[!-~]{1,18}",
        amount in 0..=MAX_AMOUNT,
        secs in 0i64..253_402_300_799, // through 9999-12-31
    ) {
        let at = time::OffsetDateTime::from_unix_timestamp(secs).unwrap();
        let rfc = at.format(&time::format_description::well_known::Rfc3339).unwrap();
        let body = wire::booking_body(&core_ref, amount, &rfc).unwrap();
        let req = wire::encode_request(&t).unwrap();
        let reply = wire::reply_to(&req, &wire::OK, Some(&body));
        let p = wire::parse_reply(&reply).unwrap();
        prop_assert_eq!(&p.guid, &t.guid);
        prop_assert_eq!(p.code.as_str(), "0000");
        let b = p.booking.unwrap();
        prop_assert_eq!(b.core_ref, core_ref);
        prop_assert_eq!(b.amount, amount);
        let expect = format!(
            "{:04}{:02}{:02}{:02}{:02}{:02}",
            at.year(), u8::from(at.month()), at.day(), at.hour(), at.minute(), at.second()
        );
        prop_assert_eq!(b.booked_at, expect);
    }
}
