//! The relay's admin port and the Prometheus text format as the tests read them: a plain
//! HTTP GET, the samples of an exposition, and `promtool check metrics` (Debian's
//! `prometheus` package) as the real parser. Without promtool a check prints one line and
//! is skipped, unless `REQUIRE_PROMTOOL=1` (CI) makes that a failure.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

use super::process::Server;

/// `GET path` on `addr`: the status and the body.
pub fn http_get(addr: &str, path: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).expect("an answer");
    let (head, body) = out.split_once("\r\n\r\n").expect("a head and a body");
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("a status line: {head:?}"));
    (status, body.to_string())
}

/// The admin address a relay logged (`admin listening on ADDR`); needs `RUST_LOG=info`.
pub fn admin_addr(relay: &Server) -> String {
    let mut found = None;
    assert!(
        super::eventually(super::WAIT, || {
            found = relay
                .stderr()
                .lines()
                .find_map(|l| l.split("admin listening on ").nth(1))
                .and_then(|rest| rest.split(' ').next())
                .map(str::to_string);
            found.is_some()
        }),
        "the relay did not log its admin address:\n{}",
        relay.stderr()
    );
    found.unwrap()
}

/// The samples of an exposition: `name{labels}` (as written) → value.
pub fn samples(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let (name, value) = l
                .rsplit_once(' ')
                .unwrap_or_else(|| panic!("a sample: {l}"));
            let value = value.parse().unwrap_or_else(|e| panic!("{l}: {e}"));
            (name.to_string(), value)
        })
        .collect()
}

/// The value of sample `key` (`name{labels}` as written), failing if it is missing.
pub fn sample(text: &str, key: &str) -> f64 {
    *samples(text)
        .get(key)
        .unwrap_or_else(|| panic!("no sample {key} in:\n{text}"))
}

/// Runs `promtool check metrics` on `text`; fails on any problem it reports. Without
/// promtool: one line and `false` (skipped), or a failure under `REQUIRE_PROMTOOL=1`.
pub fn promtool_check(what: &str, text: &str) -> bool {
    let child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => {
            assert!(
                std::env::var("REQUIRE_PROMTOOL").as_deref() != Ok("1"),
                "REQUIRE_PROMTOOL=1 but promtool cannot be run: {e}"
            );
            eprintln!("skipped: promtool check of {what}: promtool not found ({e})");
            return false;
        }
    };
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
        "promtool check metrics on {what}: {:?}\nstdout: {}\nstderr: {}\ninput:\n{text}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    true
}
