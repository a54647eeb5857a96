//! The evidence printed with a finding: what the channels sent and were told about the
//! GUID, and the lines of the run's files that name it.

use std::fmt::Write as _;
use std::path::PathBuf;

use crate::channel::{Answer, Sent};

/// Lines that mention `guid` as a whole word, from the run's files: the evidence. With
/// `relays` above 1, each send says which relay it went to (`relay1` …).
pub fn evidence(
    guid: &str,
    files: &[PathBuf],
    sents: &[Sent],
    relays: usize,
    max: usize,
) -> String {
    let mut out = String::new();
    let mut n = 0;
    for s in sents.iter().filter(|s| s.req.guid == guid) {
        let answer = match &s.answer {
            Answer::Reply(r) => format!("reply {:?}", String::from_utf8_lossy(r)),
            Answer::NoReply(why) => format!("no reply ({why})"),
            Answer::Timeout => "no reply (timeout)".to_string(),
            Answer::Garbage(what) => format!("bad frame ({what})"),
        };
        let relay = if relays > 1 {
            format!(" relay{}", s.relay + 1)
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "      chan {} {:?}{relay} t={:.3}s amount-msg {:?}: {answer}",
            s.channel,
            s.kind,
            s.at,
            String::from_utf8_lossy(&s.req.msg[73..86])
        );
    }
    for f in files {
        let Ok(text) = std::fs::read_to_string(f) else {
            continue;
        };
        let name = f
            .file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default();
        for line in text.lines().filter(|l| mentions(l, guid)) {
            if n >= max {
                let _ = writeln!(out, "      … (more in {})", f.display());
                return out;
            }
            n += 1;
            let _ = writeln!(out, "      {name}: {line}");
        }
    }
    out
}

pub(super) fn mentions(line: &str, guid: &str) -> bool {
    let is_guid = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    line.match_indices(guid).any(|(i, _)| {
        let before = line[..i].chars().next_back();
        let after = line[i + guid.len()..].chars().next();
        !before.is_some_and(is_guid) && !after.is_some_and(is_guid)
    })
}
