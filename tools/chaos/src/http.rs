//! The smallest HTTP client that can ask the core simulator something: one GET per
//! connection (`Connection: close`), read to the end, status and body.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use anyhow::{Context, anyhow, bail};

const TIMEOUT: Duration = Duration::from_secs(10);
/// `/_stats` of a long run lists every GUID; far beyond that is not the simulator.
const MAX_RESPONSE: u64 = 256 * 1024 * 1024;

/// `GET path` at `addr` (`127.0.0.1:PORT`): (status, body).
pub fn get(addr: &str, path: &str) -> anyhow::Result<(u16, String)> {
    let sa: SocketAddr = addr
        .parse()
        .with_context(|| format!("bad address {addr}"))?;
    let mut s = TcpStream::connect_timeout(&sa, TIMEOUT)
        .with_context(|| format!("cannot connect to {addr}"))?;
    s.set_read_timeout(Some(TIMEOUT))?;
    s.set_write_timeout(Some(TIMEOUT))?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .with_context(|| format!("cannot send GET {path}"))?;
    let mut raw = Vec::new();
    s.take(MAX_RESPONSE)
        .read_to_end(&mut raw)
        .with_context(|| format!("cannot read the answer to GET {path}"))?;
    let text = String::from_utf8(raw).map_err(|_| anyhow!("GET {path}: answer is not UTF-8"))?;
    let Some((head, body)) = text.split_once("\r\n\r\n") else {
        bail!("GET {path}: no end of headers in {text:?}");
    };
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| anyhow!("GET {path}: bad status line in {head:?}"))?;
    let chunked = head.lines().any(|l| {
        let l = l.to_ascii_lowercase();
        l.starts_with("transfer-encoding:") && l.contains("chunked")
    });
    let body = if chunked {
        dechunk(body)?
    } else {
        body.to_string()
    };
    Ok((status, body))
}

/// `GET path`, expecting 200 and a JSON body.
pub fn get_json(addr: &str, path: &str) -> anyhow::Result<serde_json::Value> {
    match get(addr, path)? {
        (200, body) => {
            serde_json::from_str(&body).with_context(|| format!("GET {path}: bad JSON {body:?}"))
        }
        (status, body) => bail!("GET {path}: HTTP {status} {body:?}"),
    }
}

/// Undoes `Transfer-Encoding: chunked` (tiny_http uses it for large bodies).
fn dechunk(mut rest: &str) -> anyhow::Result<String> {
    let mut out = String::new();
    loop {
        let (size_line, after) = rest
            .split_once("\r\n")
            .ok_or_else(|| anyhow!("chunked body: no size line"))?;
        let size_hex = size_line.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_hex, 16)
            .with_context(|| format!("chunked body: bad size {size_line:?}"))?;
        if size == 0 {
            return Ok(out);
        }
        let chunk = after
            .get(..size)
            .ok_or_else(|| anyhow!("chunked body: chunk shorter than {size}"))?;
        out.push_str(chunk);
        rest = after
            .get(size..)
            .and_then(|r| r.strip_prefix("\r\n"))
            .ok_or_else(|| anyhow!("chunked body: no CRLF after a chunk"))?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dechunks() {
        assert_eq!(
            dechunk("4\r\nWiki\r\n5\r\npedia\r\n0\r\n\r\n").unwrap(),
            "Wikipedia"
        );
        assert!(dechunk("4\r\nWi").is_err());
    }
}
