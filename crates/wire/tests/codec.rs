//! The codec by example: the contract's layout, each field rule, frames, replies.

use std::io;

use wire::*;

fn sample() -> Transfer {
    Transfer {
        guid: "G-1.a_b".into(),
        from_account: "00000000000001".into(),
        to_account: "00000000000002".into(),
        amount: 1500,
        memo: "rent".into(),
    }
}

fn valid() -> Vec<u8> {
    encode_request(&sample()).unwrap()
}

fn rule_of(msg: &[u8]) -> Rule {
    parse_request(msg).unwrap_err().rule
}

#[test]
fn encodes_the_contract_layout() {
    let m = valid();
    assert_eq!(m.len(), 126);
    assert_eq!(&frame(&m)[..4], b"0126");
    let expect = format!(
        "QTRNF{:<36}    0000000000000100000000000002{:013}{:<40}",
        "G-1.a_b", 1500, "rent"
    );
    assert_eq!(m, expect.as_bytes());
    assert_eq!(parse_request(&m).unwrap(), sample());
}

#[test]
fn length_prefix_is_four_digits() {
    assert_eq!(parse_len(b"0126"), Some(126));
    assert_eq!(parse_len(b"9999"), Some(9999));
    assert_eq!(parse_len(b"0000"), Some(0));
    assert_eq!(parse_len(b"012a"), None);
    assert_eq!(parse_len(b" 126"), None);
    assert_eq!(parse_len(b"+126"), None);
}

#[test]
fn every_field_rule_gives_its_error() {
    let set = |range: std::ops::Range<usize>, v: &[u8]| {
        let mut m = valid();
        m[range].copy_from_slice(v);
        m
    };
    assert_eq!(rule_of(&set(0..1, b"R")), Rule::Kind);
    assert_eq!(rule_of(&set(1..5, b"TRNX")), Rule::TxCode);
    assert_eq!(rule_of(&valid()[..125]), Rule::Length);
    assert_eq!(rule_of(&[valid(), b" ".to_vec()].concat()), Rule::Length);
    assert_eq!(rule_of(&set(5..41, &[b' '; 36])), Rule::Guid);
    assert_eq!(rule_of(&set(5..8, b" AB")), Rule::Guid, "leading space");
    assert_eq!(rule_of(&set(5..8, b"A B")), Rule::Guid, "inner space");
    assert_eq!(rule_of(&set(5..8, b"A/B")), Rule::Guid);
    assert_eq!(rule_of(&set(41..45, b"0000")), Rule::RspCode);
    assert_eq!(rule_of(&set(45..46, b"x")), Rule::FromAccount);
    assert_eq!(rule_of(&set(72..73, b" ")), Rule::ToAccount);
    assert_eq!(rule_of(&set(73..86, b"0000000000000")), Rule::Amount);
    assert_eq!(rule_of(&set(73..74, b"-")), Rule::Amount);
    assert_eq!(rule_of(&set(86..88, &[0xc3, 0x28])), Rule::Memo);
    // A 36-character GUID using every allowed class is fine.
    let g = set(5..41, b"abcdefghijklmnopqrstuvwxyz0123456._-");
    assert_eq!(parse_request(&g).unwrap().guid.len(), 36);
    // A UTF-8 memo filling all 40 bytes is fine.
    let memo = "é".repeat(20);
    let m = set(86..126, memo.as_bytes());
    assert_eq!(parse_request(&m).unwrap().memo, memo);
}

#[test]
fn read_frame_takes_exactly_one_frame() {
    let mut bytes: &[u8] = b"0003abc0002de";
    assert_eq!(read_frame(&mut bytes).unwrap(), b"abc");
    assert_eq!(read_frame(&mut bytes).unwrap(), b"de");
    let err = |mut b: &[u8]| read_frame(&mut b).unwrap_err().kind();
    assert_eq!(err(b""), io::ErrorKind::UnexpectedEof);
    assert_eq!(err(b"0005ab"), io::ErrorKind::UnexpectedEof);
    assert_eq!(err(b"12x4abcd"), io::ErrorKind::InvalidData);
    // A prefix over MAX_FRAME is refused before its body is waited for.
    assert_eq!(err(b"9999ab"), io::ErrorKind::InvalidData);
    assert_eq!(err(b"1025ab"), io::ErrorKind::InvalidData);
    let full = [b"1024".to_vec(), vec![b'x'; 1024]].concat();
    assert_eq!(read_frame(&mut &full[..]).unwrap().len(), wire::MAX_FRAME);
}

#[test]
fn a_guid_made_only_of_dots_is_malformed() {
    for dots in [&b"."[..], b"..", b"...", &[b'.'; 36]] {
        let mut m = valid();
        m[5..41].fill(b' ');
        m[5..5 + dots.len()].copy_from_slice(dots);
        assert_eq!(
            rule_of(&m),
            Rule::Guid,
            "{:?}",
            String::from_utf8_lossy(dots)
        );
    }
    for ok in ["a.", ".a", "..-", "_..", "0"] {
        assert!(valid_guid(ok.as_bytes()), "{ok}");
    }
}

#[test]
#[should_panic(expected = "cannot be framed")]
fn frame_refuses_a_message_longer_than_its_prefix_can_say() {
    frame(&[b'x'; 10_000]);
}

#[test]
fn e900_echoes_printable_tx_code_and_guid() {
    let mut m = valid();
    m[3] = 0x07;
    m[6] = 0xff;
    m[0] = b'X';
    let reply = parse_request(&m).unwrap_err().reply();
    let expect = format!("RTR F{:<36}E900", "G 1.a_b");
    assert_eq!(reply, expect.as_bytes());
    // A short message: spaces where it had nothing.
    let reply = parse_request(b"QTR").unwrap_err().reply();
    assert_eq!(reply, format!("RTR  {:36}E900", "").as_bytes());
    assert_eq!(parse_request(b"").unwrap_err().reply().len(), HEADER_LEN);
}

#[test]
fn booking_body_formats_and_converts_to_utc() {
    let b = booking_body("C00000000000000001", 1500, "2026-12-02T09:30:12Z").unwrap();
    assert_eq!(&b, b"C00000000000000001000000000150020261202093012");
    let b = booking_body("C1", 7, "2026-12-02T01:30:12.5+02:00").unwrap();
    assert_eq!(&b, b"C1                000000000000720261201233012");
    assert!(booking_body("C1234567890123456789", 1, "2026-12-02T09:30:12Z").is_err());
    assert!(booking_body("", 1, "2026-12-02T09:30:12Z").is_err());
    assert!(booking_body("C 1", 1, "2026-12-02T09:30:12Z").is_err());
    assert!(booking_body("C1", MAX_AMOUNT + 1, "2026-12-02T09:30:12Z").is_err());
    assert!(booking_body("C1", 1, "2026-12-02 09:30:12").is_err());
}

#[test]
fn replies_round_trip() {
    let req = valid();
    let body = booking_body("C7", 1500, "2026-12-02T09:30:12Z").unwrap();
    let ok = reply_to(&req, &OK, Some(&body));
    assert_eq!(ok.len(), 90);
    let r = parse_reply(&ok).unwrap();
    assert_eq!((r.guid.as_str(), r.code.as_str()), ("G-1.a_b", "0000"));
    let b = r.booking.unwrap();
    assert_eq!((b.core_ref.as_str(), b.amount), ("C7", 1500));
    assert_eq!(b.booked_at, "20261202093012");
    let rej = reply_to(&req, b"B001", None);
    assert_eq!(rej.len(), 45);
    assert_eq!(parse_reply(&rej).unwrap().booking, None);
    assert!(parse_reply(&ok[..60]).is_err());
}
