//! From an HTTP request to the request message of §2 (CONTRACT §9): the GUID from the
//! `Idempotency-Key` structured-field string, the fields from the JSON body. Whatever breaks
//! a rule is an `E900` whose detail names the field.

use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
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
/// is refused naming its member).
#[derive(Default)]
struct Body {
    tx_code: Option<Value>,
    from_account: Option<Value>,
    to_account: Option<Value>,
    amount: Option<Value>,
    memo: Option<Value>,
}

/// The longest part of an unknown member's name that a detail shows.
const MAX_NAME_SHOWN: usize = 32;

impl Body {
    /// The body of `members`, or the detail of the first unknown or repeated member. An
    /// unknown name is the client's text: the detail shows at most its first 32 characters,
    /// quoted and escaped (`"x\nWARN…"`), since it goes back in the answer and into the log.
    fn of(members: Vec<(String, Value)>) -> Result<Body, String> {
        let mut b = Body::default();
        for (name, value) in members {
            let slot = match name.as_str() {
                "tx_code" => &mut b.tx_code,
                "from_account" => &mut b.from_account,
                "to_account" => &mut b.to_account,
                "amount" => &mut b.amount,
                "memo" => &mut b.memo,
                _ => return Err(format!("body: unknown member {}", shown(&name))),
            };
            if slot.replace(value).is_some() {
                return Err(format!("{name}: repeated member"));
            }
        }
        Ok(b)
    }
}

/// An unknown member's name as a detail shows it: quoted, cut to `MAX_NAME_SHOWN`
/// characters (then `…`), controls and quotes escaped as Rust's `escape_debug` does.
fn shown(name: &str) -> String {
    let cut: String = name.chars().take(MAX_NAME_SHOWN).collect();
    let more = if cut.len() < name.len() { "…" } else { "" };
    format!("\"{}\"{more}", cut.escape_debug())
}

/// A JSON object's members in their order, repeated ones included: serde's derived structs
/// would name an unknown member in full in their error, and a map would keep one of two
/// repeated members silently.
struct Members(Vec<(String, Value)>);

impl<'de> Deserialize<'de> for Members {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Members, D::Error> {
        d.deserialize_map(MembersVisitor)
    }
}

struct MembersVisitor;

impl<'de> Visitor<'de> for MembersVisitor {
    type Value = Members;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Members, A::Error> {
        let mut members = Vec::new();
        while let Some(member) = map.next_entry::<String, Value>()? {
            members.push(member);
        }
        Ok(Members(members))
    }
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
    // serde_json's own errors (syntax, depth, trailing characters) say where, never what.
    let members: Members = serde_json::from_slice(body).map_err(|e| bad(format!("body: {e}")))?;
    let b = Body::of(members.0).map_err(bad)?;
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
                "amount: repeated member",
            ),
            (
                r#"{"from_account":"00000000000001","to_account":"00000000000002","amount":1500,"x":1}"#,
                "body: unknown member \"x\"",
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

    #[test]
    fn an_unknown_member_is_shown_cut_and_escaped() {
        let acct = r#""from_account":"00000000000001","to_account":"00000000000002","amount":1"#;
        let forged = format!(r#"{{{acct},"x\nWARN engine::double_booking fake\u001b[2K":1}}"#);
        let detail = message("G1", forged.as_bytes()).unwrap_err().detail;
        assert!(
            detail.starts_with(r#"body: unknown member "x\nWARN engine::double_booking fa"…"#),
            "{detail}"
        );
        assert!(!detail.contains(|c: char| c.is_control()), "{detail:?}");
        assert!(!detail.contains("fake"), "{detail}");
        // Quotes, C1 controls and line separators are escaped too; a short name is whole.
        let odd = format!(r#"{{"a\"\u0085\u2028b":1,{acct}}}"#);
        let detail = message("G1", odd.as_bytes()).unwrap_err().detail;
        assert_eq!(detail, r#"body: unknown member "a\"\u{85}\u{2028}b""#);
        // 1000 characters of name: the detail stays short.
        let long = format!(r#"{{"{}":1}}"#, "é".repeat(1000));
        let detail = message("G1", long.as_bytes()).unwrap_err().detail;
        assert!(detail.chars().count() < 80, "{detail}");
    }
}
