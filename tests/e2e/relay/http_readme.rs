//! The README's curl examples of the HTTP API, run as printed (only the relay's address
//! changed) against a relay started as the README starts it, each answer's status checked.

use std::process::Command;

use super::http::http_scene;
use crate::util::*;

const README: &str = include_str!("../../../README.md");
const PRINTED: &str = "http://127.0.0.1:9202";

/// The README's block of curl requests: the `sh` block under `## HTTP API` that starts with
/// `# a transfer`.
fn curl_block() -> &'static str {
    let section = &README[README.find("## HTTP API").expect("the HTTP API section")..];
    let start = section.find("```sh\n# a transfer").expect("the curl block") + "```sh\n".len();
    let len = section[start..].find("```").expect("the block's end");
    &section[start..start + len]
}

/// The answers in curl's `-i` output: status line and header lines of each.
fn answers(out: &str) -> Vec<(u16, Vec<String>)> {
    let mut all = Vec::new();
    for part in out.split("HTTP/1.1 ").skip(1) {
        let status = part[..3].parse().expect("a status");
        let head = part.split("\r\n\r\n").next().unwrap_or_default();
        let headers = head
            .lines()
            .skip(1)
            .map(|l| l.trim().to_ascii_lowercase())
            .collect();
        all.push((status, headers));
    }
    all
}

#[test]
fn the_readme_curl_examples_answer_as_their_comments_say() {
    skip_if_unavailable!();
    if Command::new("curl").arg("--version").output().is_err() {
        assert!(
            std::env::var_os("REQUIRE_CURL").is_none(),
            "curl is not installed"
        );
        eprintln!("curl is not installed: the README's curl examples were not run");
        return;
    }
    // The README's relay: `--read-timeout-ms 1000` against the simulator's 3-second SLOW.
    let (s, h) = http_scene(&[], &["--read-timeout-ms", "1000"]);
    let block = curl_block();
    assert!(block.contains(PRINTED));
    let script = format!("set -e\n{}", block.replace(PRINTED, &format!("http://{h}")));
    let out = Command::new("bash")
        .arg("-c")
        .arg(&script)
        .output()
        .expect("bash");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = String::from_utf8(out.stdout).expect("UTF-8");
    let got = answers(&out);
    let statuses: Vec<u16> = got.iter().map(|(s, _)| *s).collect();
    assert_eq!(
        statuses,
        [200, 200, 422, 200, 202, 200, 400, 415, 405, 404],
        "{out}"
    );
    let has = |i: usize, line: &str| got[i].1.iter().any(|h| h == line);
    assert!(!has(0, "idempotent-replayed: true"), "{out}");
    assert!(has(1, "idempotent-replayed: true"), "{out}");
    assert!(has(4, "location: /v1/transfers/g3"), "{out}");
    assert!(has(8, "allow: get"), "{out}");
    assert!(out.contains(r#""code":"E904""#) && out.contains(r#""code":"E900""#));
    assert!(out.contains(r#"{"guid":"G2","rsp_code":"B001"}"#), "{out}");
    assert!(
        out.contains(r#"{"guid":"G3","state":"UNKNOWN","rsp_code":"E901"}"#),
        "{out}"
    );
    assert_eq!(s.core().bookings("G1"), 1);
    assert_eq!(s.core().bookings("G2"), 0);
}
