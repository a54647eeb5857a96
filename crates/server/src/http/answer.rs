//! The answers of the HTTP channel API (CONTRACT §9): a transfer's outcome, what the ledger
//! knows of a GUID, and RFC 9457 problems; every body JSON built by serde, its members in the
//! contract's order (structs, not maps: a map would sort them).

use std::io::{self, Write};

use ledger::state::{Row, State};
use serde::Serialize;
use wire::Code;

use engine::transfer::Handled;

/// The seconds a `Retry-After` asks for: in flight (E903), and not sent / ledger down.
const RETRY_IN_FLIGHT: &str = "1";
const RETRY_LATER: &str = "5";

/// One HTTP answer.
#[derive(Debug)]
pub(super) struct Answer {
    pub status: u16,
    /// The §4 code it carries, for the metrics (`None`: a problem without one).
    pub code: Option<Code>,
    pub headers: Vec<(&'static str, String)>,
    pub content_type: &'static str,
    pub body: Vec<u8>,
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        202 => "Accepted",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        411 => "Length Required",
        413 => "Content Too Large",
        415 => "Unsupported Media Type",
        422 => "Unprocessable Content",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        _ => "Error",
    }
}

fn json_answer(status: u16, code: Option<Code>, body: &impl Serialize) -> Answer {
    Answer {
        status,
        code,
        headers: Vec::new(),
        content_type: "application/json",
        body: serde_json::to_vec(body).expect("strings and integers serialise"),
    }
}

/// An RFC 9457 problem's body, in §9's order.
#[derive(Serialize)]
struct Problem<'a> {
    #[serde(rename = "type")]
    ty: String,
    title: &'a str,
    status: u16,
    detail: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    code: Option<String>,
}

/// An RFC 9457 problem: `type`, `title`, `status`, `detail`, and `code` when one of §4 applies.
pub(super) fn problem(status: u16, code: Option<Code>, detail: &str) -> Answer {
    let body = Problem {
        ty: code.map_or_else(
            || "about:blank".to_string(),
            |c| format!("urn:txrelay:problem:{}", code_str(&c)),
        ),
        title: title(status, code),
        status,
        detail,
        code: code.map(|c| code_str(&c)),
    };
    Answer {
        content_type: "application/problem+json",
        ..json_answer(status, code, &body)
    }
}

fn title(status: u16, code: Option<Code>) -> &'static str {
    match code.as_ref() {
        Some(c) if c == &wire::E_MALFORMED => "Malformed request",
        Some(c) if c == &wire::E_NOT_SENT => "Not sent to the core",
        Some(c) if c == &wire::E_IN_FLIGHT => "This key is being processed",
        Some(c) if c == &wire::E_GUID_REUSED => "Key used for a different request",
        Some(c) if c == &wire::E_LEDGER => "Ledger cannot be written",
        _ => reason(status),
    }
}

fn code_str(c: &Code) -> String {
    String::from_utf8_lossy(c).into_owned()
}

impl Answer {
    fn with(mut self, name: &'static str, value: impl Into<String>) -> Answer {
        self.headers.push((name, value.into()));
        self
    }

    /// Writes the answer, head and body in one write (one segment on a kept-alive
    /// connection, not two); `Connection: close` when the framing says so, and no body
    /// (the head still saying its length) for a HEAD.
    pub fn write_to(&self, out: &mut impl Write, framing: super::Framing) -> io::Result<()> {
        let mut all = Vec::with_capacity(160 + self.body.len());
        write!(
            all,
            "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n",
            self.status,
            reason(self.status),
            self.content_type,
            self.body.len()
        )?;
        for (name, value) in &self.headers {
            write!(all, "{name}: {value}\r\n")?;
        }
        if framing.close {
            all.extend_from_slice(b"Connection: close\r\n");
        }
        all.extend_from_slice(b"\r\n");
        if framing.body {
            all.extend_from_slice(&self.body);
        }
        out.write_all(&all)?;
        out.flush()
    }
}

/// A transfer as §9 shows it, members in its order: `guid`, `state` (the 202 and GET),
/// `rsp_code` (`null` where a row has none), then a booking's fields.
#[derive(Serialize)]
struct Shown<'a> {
    guid: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    state: Option<&'a str>,
    rsp_code: Option<&'a str>,
    #[serde(flatten)]
    booking: Option<BookingFields>,
}

/// The fields of a stored `0000` reply, as §9 shows them: core_ref unpadded, amount, booked_at
/// RFC 3339 in UTC.
#[derive(Serialize)]
struct BookingFields {
    core_ref: String,
    amount: u64,
    booked_at: String,
}

/// A stored reply's booking, `None` when the reply is not a booking that can be read.
fn booking_fields(reply: &[u8]) -> Option<BookingFields> {
    let b = wire::parse_reply(reply).ok()?.booking?;
    let booked_at = wire::booked_at_rfc3339(&b.booked_at)?;
    Some(BookingFields {
        core_ref: b.core_ref,
        amount: b.amount,
        booked_at,
    })
}

fn is_final(code: &Code) -> bool {
    code == &wire::OK || !code.starts_with(b"E9")
}

/// The answer to a transfer the relay handled.
pub(super) fn transfer(h: &Handled) -> Answer {
    let code = h.code;
    let guid = h.guid.as_str();
    if is_final(&code) {
        let rsp_code = code_str(&code);
        let body = Shown {
            guid,
            state: None,
            rsp_code: Some(&rsp_code),
            booking: (code == wire::OK)
                .then(|| booking_fields(&h.reply))
                .flatten(),
        };
        let a = json_answer(200, Some(code), &body);
        return if h.replayed {
            a.with("Idempotent-Replayed", "true")
        } else {
            a
        };
    }
    match &code {
        c if c == &wire::E_UNKNOWN => json_answer(
            202,
            Some(code),
            &Shown {
                guid,
                state: Some("UNKNOWN"),
                rsp_code: Some("E901"),
                booking: None,
            },
        )
        .with("Location", format!("/v1/transfers/{guid}")),
        c if c == &wire::E_MALFORMED => problem(400, Some(code), h.detail.unwrap_or("malformed")),
        c if c == &wire::E_NOT_SENT => problem(
            503,
            Some(code),
            "the core could not be reached: the transfer was not sent; resend with the same key",
        )
        .with("Retry-After", RETRY_LATER),
        c if c == &wire::E_IN_FLIGHT => problem(
            409,
            Some(code),
            "a request with this key is being processed; ask again later with the same key",
        )
        .with("Retry-After", RETRY_IN_FLIGHT),
        c if c == &wire::E_GUID_REUSED => problem(
            422,
            Some(code),
            "this key was already used for a different request",
        ),
        _ => problem(
            503,
            Some(code),
            "the relay cannot write its ledger: nothing was sent; resend with the same key",
        )
        .with("Retry-After", RETRY_LATER),
    }
}

/// What the ledger knows of a row (GET): its state and code, and a DONE row's booking fields.
pub(super) fn row(r: &Row) -> Answer {
    let body = Shown {
        guid: &r.guid,
        state: Some(r.state.as_str()),
        rsp_code: r.rsp_code.as_deref(),
        booking: match (&r.state, &r.response) {
            (State::Done, Some(reply)) => booking_fields(reply),
            _ => None,
        },
    };
    json_answer(200, None, &body)
}

/// A 404 problem for a GUID the ledger does not show to this channel.
pub(super) fn no_row() -> Answer {
    problem(404, None, "no transfer with this key")
}

/// A GET that could not read the ledger.
pub(super) fn ledger_unreadable() -> Answer {
    problem(
        503,
        Some(wire::E_LEDGER),
        "the relay cannot read its ledger",
    )
    .with("Retry-After", RETRY_LATER)
}

/// A 405 with the methods `path` allows.
pub(super) fn not_allowed(allow: &'static str) -> Answer {
    problem(405, None, &format!("this resource allows {allow}")).with("Allow", allow)
}
