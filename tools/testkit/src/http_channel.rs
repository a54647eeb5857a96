//! A channel's side of the relay's HTTP door (contract §9), for the tools that speak it
//! (`loadgen --http`, `chaos --http`): the POST a §2 request message stands for, and one
//! answer read back from a kept-alive connection.

use std::io::{self, BufRead};

use serde_json::json;

/// The `POST /v1/transfers` request (head and body, to be written at once) that the §2
/// request message `msg` stands for, and its GUID (the Idempotency-Key); `Err` names the
/// rule `msg` breaks.
pub fn post_transfer(msg: &[u8], host: &str) -> Result<(String, String), wire::Rule> {
    let t = wire::parse_request(msg).map_err(|m| m.rule)?;
    let body = json!({
        "tx_code": "TRNF",
        "from_account": t.from_account,
        "to_account": t.to_account,
        "amount": t.amount,
        "memo": t.memo,
    })
    .to_string();
    let request = format!(
        "POST /v1/transfers HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
         Idempotency-Key: \"{}\"\r\nContent-Length: {}\r\n\r\n{body}",
        t.guid,
        body.len()
    );
    Ok((t.guid, request))
}

/// One answer: its status, whether the relay closes the connection after it, and its body
/// (by `Content-Length`). A head that is not HTTP is `InvalidData`.
pub fn read_answer(r: &mut impl BufRead) -> io::Result<(u16, bool, Vec<u8>)> {
    let bad = |what: &str| io::Error::new(io::ErrorKind::InvalidData, what.to_string());
    let mut line = String::new();
    if r.read_line(&mut line)? == 0 {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    let status: u16 = line
        .get(9..12)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad("not an HTTP status line"))?;
    let (mut len, mut close) = (0usize, false);
    loop {
        line.clear();
        if r.read_line(&mut line)? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((n, v)) = l.split_once(':') {
            let v = v.trim();
            if n.eq_ignore_ascii_case("content-length") {
                len = v.parse().map_err(|_| bad("a bad Content-Length"))?;
            } else if n.eq_ignore_ascii_case("connection") && v.eq_ignore_ascii_case("close") {
                close = true;
            }
        }
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body)?;
    Ok((status, close, body))
}
