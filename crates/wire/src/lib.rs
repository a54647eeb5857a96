//! The channel wire format (contract §2): 4-digit length prefix, then a fixed-width message.
//!
//! Parsing never trusts the input: every rule failure is a typed `Malformed`, which knows how
//! to answer itself with `E900` while echoing what the request had at the tx_code and guid
//! offsets, so that the channel can match the answer to its request.

use std::io::{self, Read};

pub const PREFIX_LEN: usize = 4;
pub const HEADER_LEN: usize = 45;
pub const TRNF_BODY_LEN: usize = 81;
pub const TRNF_LEN: usize = HEADER_LEN + TRNF_BODY_LEN;
pub const BOOKING_BODY_LEN: usize = 45;
pub const GUID_LEN: usize = 36;
pub const TX_TRNF: &str = "TRNF";
pub const MAX_AMOUNT: u64 = 9_999_999_999_999;
/// The longest message `read_frame` waits for. A request is 126 bytes; a prefix above this
/// is no request of any kind, and the connection is closed at once instead of being held
/// open for up to 9999 bytes that would only earn an `E900` (a channel that wrote a short
/// body would otherwise hold its connection until the frame timeout).
pub const MAX_FRAME: usize = 1024;

const KIND: usize = 0;
const TX_CODE: std::ops::Range<usize> = 1..5;
const GUID: std::ops::Range<usize> = 5..41;
const RSP_CODE: std::ops::Range<usize> = 41..45;
const FROM: std::ops::Range<usize> = 45..59;
const TO: std::ops::Range<usize> = 59..73;
const AMOUNT: std::ops::Range<usize> = 73..86;
const MEMO: std::ops::Range<usize> = 86..126;
const CORE_REF_LEN: usize = 18;

/// A result code: four ASCII characters (`0000`, `B001`, `E901`, ...).
pub type Code = [u8; 4];

pub const OK: Code = *b"0000";
pub const E_MALFORMED: Code = *b"E900";
pub const E_UNKNOWN: Code = *b"E901";
pub const E_NOT_SENT: Code = *b"E902";
pub const E_IN_FLIGHT: Code = *b"E903";
pub const E_GUID_REUSED: Code = *b"E904";
pub const E_LEDGER: Code = *b"E905";

/// Reads a length prefix: exactly four ASCII digits.
pub fn parse_len(prefix: &[u8; PREFIX_LEN]) -> Option<usize> {
    prefix.iter().try_fold(0usize, |n, &b| {
        b.is_ascii_digit().then(|| n * 10 + usize::from(b - b'0'))
    })
}

/// Prefixes `msg` with its length. Messages are at most 9999 bytes by construction; a longer
/// one is a bug, and is stopped here in every build rather than sent with a wrong prefix.
pub fn frame(msg: &[u8]) -> Vec<u8> {
    assert!(
        msg.len() <= 9999,
        "a message of {} bytes cannot be framed",
        msg.len()
    );
    let mut out = Vec::with_capacity(PREFIX_LEN + msg.len());
    out.extend_from_slice(format!("{:04}", msg.len()).as_bytes());
    out.extend_from_slice(msg);
    out
}

/// Reads one frame from `r` and returns its message. A prefix that is not four digits, or
/// that announces more than [`MAX_FRAME`] bytes, is `InvalidData` (read no further); a
/// stream that ends inside the frame is `UnexpectedEof`.
pub fn read_frame(r: &mut impl Read) -> io::Result<Vec<u8>> {
    let mut prefix = [0u8; PREFIX_LEN];
    r.read_exact(&mut prefix)?;
    let len = parse_len(&prefix).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "length prefix {:?} is not 4 digits",
                String::from_utf8_lossy(&prefix)
            ),
        )
    })?;
    if len > MAX_FRAME {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("length prefix {len:04} is over {MAX_FRAME} bytes: no request is that long"),
        ));
    }
    let mut msg = vec![0u8; len];
    r.read_exact(&mut msg)?;
    Ok(msg)
}

/// A valid transfer request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transfer {
    pub guid: String,
    pub from_account: String,
    pub to_account: String,
    pub amount: u64,
    /// The memo without its padding (trailing spaces removed).
    pub memo: String,
}

/// Which rule a request broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    Length,
    Kind,
    TxCode,
    Guid,
    RspCode,
    FromAccount,
    ToAccount,
    Amount,
    Memo,
}

/// A complete frame whose content breaks a rule: answered with `E900`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed request: {}", .rule.describe())]
pub struct Malformed {
    pub rule: Rule,
    tx_code: [u8; 4],
    guid: [u8; GUID_LEN],
}

impl Rule {
    /// The field that broke, and the rule it broke (contract §2), for logs.
    pub fn describe(self) -> &'static str {
        match self {
            Rule::Length => "length: a TRNF request is exactly 126 bytes",
            Rule::Kind => "kind (offset 0): must be Q",
            Rule::TxCode => "tx_code (offset 1): must be TRNF",
            Rule::Guid => {
                "guid (offset 5): 1-36 characters of [0-9A-Za-z._-], space-padded, not all dots"
            }
            Rule::RspCode => "rsp_code (offset 41): must be 4 spaces",
            Rule::FromAccount => "from_account (offset 45): must be 14 ASCII digits",
            Rule::ToAccount => "to_account (offset 59): must be 14 ASCII digits",
            Rule::Amount => "amount (offset 73): must be 13 ASCII digits, at least 1",
            Rule::Memo => "memo (offset 86): must be UTF-8",
        }
    }
}

impl Malformed {
    fn new(rule: Rule, msg: &[u8]) -> Malformed {
        Malformed {
            rule,
            tx_code: echo(msg, TX_CODE),
            guid: echo(msg, GUID),
        }
    }

    /// The echoed guid field, trimmed, for logs.
    pub fn guid_lossy(&self) -> String {
        String::from_utf8_lossy(&self.guid).trim_end().to_string()
    }

    /// The `E900` reply message (without length prefix).
    pub fn reply(&self) -> Vec<u8> {
        header(b'R', &self.tx_code, &self.guid, &E_MALFORMED).to_vec()
    }
}

/// The bytes of `msg` in `range`, printable ASCII kept, anything else (or missing) a space.
fn echo<const N: usize>(msg: &[u8], range: std::ops::Range<usize>) -> [u8; N] {
    let mut out = [b' '; N];
    for (o, i) in out.iter_mut().zip(range) {
        if let Some(&b) = msg.get(i)
            && (0x20..=0x7e).contains(&b)
        {
            *o = b;
        }
    }
    out
}

fn header(kind: u8, tx_code: &[u8; 4], guid: &[u8; GUID_LEN], code: &Code) -> [u8; HEADER_LEN] {
    let mut h = [b' '; HEADER_LEN];
    h[KIND] = kind;
    h[TX_CODE].copy_from_slice(tx_code);
    h[GUID].copy_from_slice(guid);
    h[RSP_CODE].copy_from_slice(code);
    h
}

fn is_guid_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-')
}

/// A GUID as the contract allows it: 1–36 of `[0-9A-Za-z._-]`, and not only dots (`.` and
/// `..` in an inquiry's URL path would be normalised away by servers and proxies).
pub fn valid_guid(guid: &[u8]) -> bool {
    (1..=GUID_LEN).contains(&guid.len())
        && guid.iter().copied().all(is_guid_char)
        && !guid.iter().all(|&b| b == b'.')
}

/// The GUID in a 36-byte field: left-aligned, space-padded.
fn parse_guid(field: &[u8]) -> Option<&str> {
    let len = field.iter().rposition(|&b| b != b' ').map_or(0, |i| i + 1);
    let guid = &field[..len];
    if !valid_guid(guid) {
        return None;
    }
    std::str::from_utf8(guid).ok()
}

fn digits(field: &[u8]) -> Option<&str> {
    field
        .iter()
        .all(u8::is_ascii_digit)
        .then(|| std::str::from_utf8(field).expect("ASCII digits"))
}

/// Parses a request message (the frame's content, without the length prefix).
pub fn parse_request(msg: &[u8]) -> Result<Transfer, Malformed> {
    let bad = |rule| Err(Malformed::new(rule, msg));
    if msg.first() != Some(&b'Q') {
        return bad(Rule::Kind);
    }
    if msg.get(TX_CODE) != Some(TX_TRNF.as_bytes()) {
        return bad(Rule::TxCode);
    }
    if msg.len() != TRNF_LEN {
        return bad(Rule::Length);
    }
    let Some(guid) = parse_guid(&msg[GUID]) else {
        return bad(Rule::Guid);
    };
    if &msg[RSP_CODE] != b"    " {
        return bad(Rule::RspCode);
    }
    let Some(from_account) = digits(&msg[FROM]) else {
        return bad(Rule::FromAccount);
    };
    let Some(to_account) = digits(&msg[TO]) else {
        return bad(Rule::ToAccount);
    };
    let amount = match digits(&msg[AMOUNT]).map(str::parse::<u64>) {
        Some(Ok(a)) if a >= 1 => a,
        _ => return bad(Rule::Amount),
    };
    let Ok(memo) = std::str::from_utf8(&msg[MEMO]) else {
        return bad(Rule::Memo);
    };
    Ok(Transfer {
        guid: guid.to_string(),
        from_account: from_account.to_string(),
        to_account: to_account.to_string(),
        amount,
        memo: memo.trim_end_matches(' ').to_string(),
    })
}

/// Why a request could not be encoded (for the channel client).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct EncodeError(pub String);

/// Builds a request message from its fields, refusing what the relay would answer E900.
pub fn encode_request(t: &Transfer) -> Result<Vec<u8>, EncodeError> {
    let err = |s: &str| Err(EncodeError(s.to_string()));
    if !valid_guid(t.guid.as_bytes()) {
        return err("guid must be 1-36 characters of [0-9A-Za-z._-], not only dots");
    }
    for (name, acct) in [
        ("from account", &t.from_account),
        ("to account", &t.to_account),
    ] {
        if acct.len() > 14 || acct.is_empty() || !acct.bytes().all(|b| b.is_ascii_digit()) {
            return Err(EncodeError(format!("{name} must be 1-14 digits")));
        }
    }
    if t.amount == 0 || t.amount > MAX_AMOUNT {
        return err("amount must be 1..=9999999999999 minor units");
    }
    if t.memo.len() > 40 {
        return err("memo must be at most 40 bytes of UTF-8");
    }
    let mut m = Vec::with_capacity(TRNF_LEN);
    m.push(b'Q');
    m.extend_from_slice(TX_TRNF.as_bytes());
    m.extend_from_slice(format!("{:<36}", t.guid).as_bytes());
    m.extend_from_slice(b"    ");
    m.extend_from_slice(format!("{:0>14}", t.from_account).as_bytes());
    m.extend_from_slice(format!("{:0>14}", t.to_account).as_bytes());
    m.extend_from_slice(format!("{:013}", t.amount).as_bytes());
    m.extend_from_slice(t.memo.as_bytes());
    m.resize(TRNF_LEN, b' ');
    Ok(m)
}

/// The reply to a request message, copying its tx_code and guid fields. `body` is the
/// 45-byte booking body, given only with `0000`.
pub fn reply_to(request: &[u8], code: &Code, body: Option<&[u8; BOOKING_BODY_LEN]>) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + BOOKING_BODY_LEN);
    out.extend_from_slice(&header(
        b'R',
        &echo(request, TX_CODE),
        &echo(request, GUID),
        code,
    ));
    if let Some(b) = body {
        out.extend_from_slice(b);
    }
    out
}

/// Why a core booking cannot be written into the fixed-width reply body.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BodyError(pub String);

/// The 45-byte reply body for a booking: core_ref (18, space-padded), amount (13,
/// zero-padded), booked_at as `YYYYMMDDhhmmss` in UTC. `booked_at` is RFC 3339.
pub fn booking_body(
    core_ref: &str,
    amount: u64,
    booked_at: &str,
) -> Result<[u8; BOOKING_BODY_LEN], BodyError> {
    use time::format_description::well_known::Rfc3339;
    if core_ref.is_empty()
        || core_ref.len() > CORE_REF_LEN
        || !core_ref.bytes().all(|b| (0x21..=0x7e).contains(&b))
    {
        return Err(BodyError(format!(
            "core_ref {core_ref:?} is not 1-18 printable ASCII characters"
        )));
    }
    if amount > MAX_AMOUNT {
        return Err(BodyError(format!("amount {amount} exceeds 13 digits")));
    }
    let t = time::OffsetDateTime::parse(booked_at, &Rfc3339)
        .map_err(|e| BodyError(format!("booked_at {booked_at:?} is not RFC 3339: {e}")))?
        .to_offset(time::UtcOffset::UTC);
    if !(0..=9999).contains(&t.year()) {
        return Err(BodyError(format!(
            "booked_at {booked_at:?} is out of range"
        )));
    }
    let text = format!(
        "{core_ref:<18}{amount:013}{:04}{:02}{:02}{:02}{:02}{:02}",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    );
    let mut body = [b' '; BOOKING_BODY_LEN];
    body.copy_from_slice(text.as_bytes());
    Ok(body)
}

/// A reply as a channel sees it (for the channel client, tests and the load generator).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub tx_code: String,
    pub guid: String,
    pub code: String,
    pub booking: Option<Booking>,
}

/// The decoded `0000` reply body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Booking {
    pub core_ref: String,
    pub amount: u64,
    pub booked_at: String,
}

/// A reply's `booked_at` (`YYYYMMDDhhmmss`, UTC) as RFC 3339, `YYYY-MM-DDThh:mm:ssZ`; `None`
/// if it is not 14 digits.
pub fn booked_at_rfc3339(t: &str) -> Option<String> {
    if t.len() != 14 || !t.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(format!(
        "{}-{}-{}T{}:{}:{}Z",
        &t[0..4],
        &t[4..6],
        &t[6..8],
        &t[8..10],
        &t[10..12],
        &t[12..14]
    ))
}

/// Parses a reply message, checking the body length against the code.
pub fn parse_reply(msg: &[u8]) -> Result<Reply, String> {
    if msg.len() < HEADER_LEN || msg[KIND] != b'R' {
        return Err(format!("not a reply: {:?}", String::from_utf8_lossy(msg)));
    }
    let text = |r: std::ops::Range<usize>| String::from_utf8_lossy(&msg[r]).to_string();
    let code = text(RSP_CODE);
    let body = &msg[HEADER_LEN..];
    let booking = match (code.as_str(), body.len()) {
        ("0000", BOOKING_BODY_LEN) => {
            let b = |r: std::ops::Range<usize>| String::from_utf8_lossy(&body[r]).to_string();
            Some(Booking {
                core_ref: b(0..18).trim_end().to_string(),
                amount: b(18..31)
                    .parse()
                    .map_err(|_| format!("bad amount in reply body {:?}", b(18..31)))?,
                booked_at: b(31..45),
            })
        }
        ("0000", n) => return Err(format!("0000 reply with a {n}-byte body")),
        (_, 0) => None,
        (c, n) => return Err(format!("{c} reply with a {n}-byte body")),
    };
    Ok(Reply {
        tx_code: text(TX_CODE),
        guid: text(GUID).trim_end().to_string(),
        code,
        booking,
    })
}
