//! No client can write a line of its own into the relay's log (issue 39, item 4). An HTTP
//! body whose unknown member's name holds a newline and a forged `WARN` line is refused
//! (`E900`), and on stderr it is one line, the newline shown as `\n`, in the text format
//! and in the JSON one (where every line still parses, and a decoded value holds no control
//! character either: a viewer that prints it would start a line too). The problem's
//! `detail` shows the name cut and escaped. A frame with control bytes where its GUID
//! should be is one line as well.

use std::time::Duration;

use testkit::Chan;

use crate::util::*;

/// The start of the line a client would like the relay to have written.
const FORGED: &str = "WARN engine::double_booking";

/// A body with every field right and one unknown member, `name` (given as JSON escapes).
fn body_with_member(name: &str) -> String {
    format!(
        r#"{{"from_account":"00000000000001","to_account":"00000000000002","amount":5,"{name}":1}}"#
    )
}

/// The names tried: a newline, a carriage return that rewinds the line, a terminal
/// sequence that erases it, a C1 next line, a Unicode line separator.
const NAMES: [&str; 5] = [
    r"x\nWARN engine::double_booking fake",
    r"x\rWARN engine::double_booking fake",
    r"x\u001b[2K\rWARN engine::double_booking fake",
    r"x\u0085WARN engine::double_booking fake",
    r"x\u2028WARN engine::double_booking fake",
];

/// A relay serving HTTP too, its log in `format`; its HTTP address.
fn relay_logging(s: &Scene, format: &str) -> (Server, String) {
    let (flag, h) = http_listen();
    let mut cmd = relay_command(&s.db, &s.core().url(), &[&flag, &h]);
    cmd.env("RUST_LOG", "info").env("RELAY_LOG_FORMAT", format);
    (Server::start(cmd), h)
}

/// Posts each of `NAMES` under GUIDs `{prefix}-0`…: each is `E900`; their details.
fn post_forged(h: &str, prefix: &str) -> Vec<String> {
    let mut c = Http::connect(h);
    let mut details = Vec::new();
    for (i, name) in NAMES.iter().enumerate() {
        let a = c.post(Some(&format!("\"{prefix}-{i}\"")), &body_with_member(name));
        assert_eq!(a.status, 400, "{name}: {a:?}");
        let p = a.json();
        assert_eq!(p["code"], "E900", "{p}");
        details.push(p["detail"].as_str().expect("a detail").to_string());
    }
    details
}

/// The problems' details show the name cut (before `fake`) and escaped, quoted.
fn assert_cut_and_escaped(details: &[String]) {
    for detail in details {
        assert!(detail.starts_with("body: unknown member \"x\\"), "{detail}");
        assert!(!detail.contains(is_control), "{detail:?}");
        assert!(!detail.contains("fake"), "the name is cut: {detail}");
    }
}

/// What must never reach the log raw (the relay escapes more; these are what the test sends).
fn is_control(c: char) -> bool {
    c.is_control() || c == '\u{2028}'
}

/// A frame whose GUID field holds a newline and the forged line: `E900` on the TCP door.
fn send_forged_frame(relay: &Server) {
    let mut m = msg("X", 5, "");
    let guid = format!("G\n{FORGED} tcp");
    m[5..5 + guid.len()].copy_from_slice(guid.as_bytes());
    let mut c = Chan::connect(&relay.addr, Duration::from_secs(10)).expect("a connection");
    let reply = c.call(&m).expect("a reply");
    assert_code(&reply, "E900");
}

/// Waits until `relay` has logged `n` lines containing each of `parts`; its stderr then.
fn wait_for_lines(relay: &Server, n: usize, parts: &[&str]) -> String {
    let count = |text: &str| {
        text.lines()
            .filter(|l| parts.iter().all(|p| l.contains(p)))
            .count()
    };
    assert!(
        eventually(WAIT, || count(&relay.stderr()) >= n),
        "{n} lines with {parts:?} in:\n{}",
        relay.stderr()
    );
    relay.stderr()
}

#[test]
fn a_forged_line_in_a_member_name_stays_inside_the_text_line() {
    skip_if_unavailable!();
    let s = Scene::new().core(&[]).build();
    let (relay, h) = relay_logging(&s, "text");
    let details = post_forged(&h, "G-INJ-T");
    send_forged_frame(&relay);
    // By GUID: on a line of its own, the fields after the name would not be on it.
    wait_for_lines(&relay, NAMES.len(), &["guid=G-INJ-T-", "code=E900"]);
    let err = wait_for_lines(&relay, 1, &["code=E900", "door=tcp"]);
    for line in err.lines() {
        assert!(
            !line.trim_start().starts_with(FORGED),
            "a line of the client's:\n{err}"
        );
        assert!(!line.contains(is_control), "a control character: {line:?}");
        if line.contains(FORGED) {
            // Only inside the E900 line, the newline shown, the name cut before `fake`.
            assert!(line.contains("code=E900"), "{line}");
            assert!(!line.contains("fake"), "{line}");
        }
    }
    assert!(
        err.lines()
            .any(|l| l.contains("guid=G-INJ-T-0") && l.contains(r#"member "x\nWARN engine::"#)),
        "{err}"
    );
    assert_cut_and_escaped(&details);
    assert!(rows_by_guid(&s.db).is_empty(), "nothing recorded");
    assert_eq!(s.core().total_bookings(), 0);
}

#[test]
fn a_forged_line_in_a_member_name_stays_inside_its_json_value() {
    skip_if_unavailable!();
    let s = Scene::new().core(&[]).build();
    let (relay, h) = relay_logging(&s, "json");
    let details = post_forged(&h, "G-INJ-J");
    send_forged_frame(&relay);
    wait_for_lines(
        &relay,
        NAMES.len(),
        &["\"code\":\"E900\"", "\"door\":\"http\""],
    );
    let err = wait_for_lines(&relay, 1, &["\"code\":\"E900\"", "\"door\":\"tcp\""]);
    let mut e900 = 0;
    for line in err.lines() {
        assert!(!line.trim_start().starts_with(FORGED), "{err}");
        let v: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("not one JSON object: {line:?}: {e}"));
        let object = v.as_object().expect("an object");
        // Decoded, no value holds a control character: printed as it is (`jq -r`), it
        // would start a line of its own.
        for (key, value) in object {
            if let Some(text) = value.as_str() {
                assert!(!text.contains(is_control), "{key}: {text:?} in {line}");
                assert!(!text.starts_with(FORGED), "{key}: {text:?}");
            }
        }
        if v["code"] == "E900" && v["door"] == "http" {
            e900 += 1;
            let detail = v["detail"].as_str().expect("a detail");
            assert!(!detail.contains("fake"), "{detail}");
        }
    }
    assert_eq!(e900, NAMES.len(), "{err}");
    assert_cut_and_escaped(&details);
    assert!(rows_by_guid(&s.db).is_empty(), "nothing recorded");
}
