//! From an HTTP request to the request message of §2 (CONTRACT §9): the GUID from the
//! `Idempotency-Key` structured-field string, the fields from the JSON body. Whatever breaks
//! a rule is an `E900` whose detail names the field.

use serde::Deserialize;
use serde_json::Value;

use super::head::Head;
use wire::{MAX_AMOUNT, TX_TRNF, Transfer};

/// A request the relay refuses as malformed (`E900`), with the GUID it could read (for the
/// log and the answer) and the field and rule it broke.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Malformed {
    pub guid: Option<String>,
    pub detail: String,
}

/// The GUID of the request's single `Idempotency-Key` field line.
pub(super) fn idempotency_key(head: &Head) -> Result<String, String> {
    let mut lines = head.all("idempotency-key");
    let (Some(line), None) = (lines.next(), lines.next()) else {
        return Err("Idempotency-Key: exactly one field line is required".into());
    };
    let key = sf_string(line).ok_or_else(|| {
        "Idempotency-Key: must be a structured-field string (\"...\") without parameters"
            .to_string()
    })?;
    if !wire::valid_guid(key.as_bytes()) {
        return Err(
            "Idempotency-Key: its content must be 1-36 characters of [0-9A-Za-z._-], \
             not only dots"
                .into(),
        );
    }
    Ok(key)
}

/// An RFC 8941 sf-string and nothing else (no parameters): printable ASCII between double
/// quotes, with `\"` and `\\` as the only escapes.
fn sf_string(value: &[u8]) -> Option<String> {
    let v = value.trim_ascii();
    let inner = v.strip_prefix(b"\"")?;
    let mut out = String::new();
    let mut bytes = inner.iter();
    loop {
        match *bytes.next()? {
            b'\\' => match *bytes.next()? {
                c @ (b'"' | b'\\') => out.push(char::from(c)),
                _ => return None,
            },
            b'"' => break,
            c @ 0x20..=0x7e => out.push(char::from(c)),
            _ => return None,
        }
    }
    bytes.next().is_none().then_some(out)
}

/// The body's members, each kept as the JSON value it was (so that a wrong type or a `null`
/// is refused naming its member); unknown and repeated members are refused by serde.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Body {
    #[serde(default, deserialize_with = "present")]
    tx_code: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    from_account: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    to_account: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    amount: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    memo: Option<Value>,
}

/// A member that is there, whatever its value (`null` included).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// The request message for `guid` and the JSON `body`.
pub(super) fn message(guid: &str, body: &[u8]) -> Result<Vec<u8>, Malformed> {
    let bad = |detail: String| Malformed {
        guid: Some(guid.to_string()),
        detail,
    };
    // serde would also take an array, as the members in order.
    if body.trim_ascii_start().first() != Some(&b'{') {
        return Err(bad("body: must be a JSON object".into()));
    }
    let b: Body = serde_json::from_slice(body).map_err(|e| bad(format!("body: {e}")))?;
    match &b.tx_code {
        None => {}
        Some(Value::String(c)) if c == TX_TRNF => {}
        Some(_) => return Err(bad("tx_code: must be the string \"TRNF\"".into())),
    }
    let account = |name: &str, v: &Option<Value>| match v {
        Some(Value::String(s)) if s.len() == 14 && s.bytes().all(|c| c.is_ascii_digit()) => {
            Ok(s.clone())
        }
        Some(_) => Err(bad(format!("{name}: must be a string of 14 digits"))),
        None => Err(bad(format!("{name}: missing"))),
    };
    let from_account = account("from_account", &b.from_account)?;
    let to_account = account("to_account", &b.to_account)?;
    let amount = match &b.amount {
        Some(Value::Number(n)) => match n.as_u64() {
            Some(a) if (1..=MAX_AMOUNT).contains(&a) => a,
            _ => return Err(bad(amount_rule())),
        },
        Some(_) => return Err(bad(amount_rule())),
        None => return Err(bad("amount: missing".into())),
    };
    let memo = match &b.memo {
        None => String::new(),
        Some(Value::String(m)) if m.len() <= 40 => m.clone(),
        Some(_) => {
            return Err(bad(
                "memo: must be a string of at most 40 bytes of UTF-8".into()
            ));
        }
    };
    let t = Transfer {
        guid: guid.to_string(),
        from_account,
        to_account,
        amount,
        memo,
    };
    wire::encode_request(&t).map_err(|e| bad(e.0))
}

fn amount_rule() -> String {
    format!("amount: must be a JSON integer from 1 to {MAX_AMOUNT}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sf_strings() {
        assert_eq!(sf_string(br#""G1""#).as_deref(), Some("G1"));
        assert_eq!(sf_string(br#"  "a\"b\\c"  "#).as_deref(), Some("a\"b\\c"));
        assert_eq!(sf_string(b"G1"), None);
        assert_eq!(sf_string(br#""G1";a=1"#), None);
        assert_eq!(sf_string(br#""G1"#), None);
        assert_eq!(sf_string(br#""a\nb""#), None);
        assert_eq!(sf_string(b"\"a\tb\""), None);
    }

    const OK: &str = r#"{"from_account":"00000000000001","to_account":"00000000000002","amount":1500,"memo":"rent"}"#;

    #[test]
    fn the_body_becomes_the_frame_message() {
        let m = message("G1", OK.as_bytes()).unwrap();
        let want = wire::encode_request(&Transfer {
            guid: "G1".into(),
            from_account: "00000000000001".into(),
            to_account: "00000000000002".into(),
            amount: 1500,
            memo: "rent".into(),
        })
        .unwrap();
        assert_eq!(m, want);
        assert_eq!(&m[86..90], b"rent");
        assert_eq!(m.len(), 126);
    }

    #[test]
    fn each_rule_names_its_field() {
        let cases = [
            (
                r#"{"from_account":"00000000000001","to_account":"00000000000002","amount":1500,"amount":1500}"#,
                "duplicate field `amount`",
            ),
            (
                r#"{"from_account":"00000000000001","to_account":"00000000000002","amount":1500,"x":1}"#,
                "unknown field `x`",
            ),
            (
                r#"{"from_account":null,"to_account":"00000000000002","amount":1500}"#,
                "from_account:",
            ),
            (
                r#"{"from_account":"1","to_account":"00000000000002","amount":1500}"#,
                "from_account:",
            ),
            (
                r#"{"from_account":"00000000000001","to_account":"00000000000002","amount":0}"#,
                "amount:",
            ),
            (
                r#"{"from_account":"00000000000001","to_account":"00000000000002","amount":1.5}"#,
                "amount:",
            ),
            (
                r#"{"from_account":"00000000000001","to_account":"00000000000002","amount":"15"}"#,
                "amount:",
            ),
            (
                r#"{"from_account":"00000000000001","to_account":"00000000000002","amount":10000000000000}"#,
                "amount:",
            ),
            (
                r#"{"from_account":"00000000000001","to_account":"00000000000002","amount":1,"memo":null}"#,
                "memo:",
            ),
            (
                r#"{"from_account":"00000000000001","to_account":"00000000000002","amount":1,"tx_code":"XXXX"}"#,
                "tx_code:",
            ),
            (
                r#"{"from_account":"00000000000001","to_account":"00000000000002"}"#,
                "amount: missing",
            ),
            (r#"[1]"#, "body:"),
        ];
        for (body, want) in cases {
            let e = message("G1", body.as_bytes()).unwrap_err();
            assert!(e.detail.contains(want), "{body}: {}", e.detail);
        }
        let long = format!(
            r#"{{"from_account":"00000000000001","to_account":"00000000000002","amount":1,"memo":"{}"}}"#,
            "é".repeat(21)
        );
        assert!(
            message("G1", long.as_bytes())
                .unwrap_err()
                .detail
                .starts_with("memo:")
        );
    }
}
