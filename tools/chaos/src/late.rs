//! Late replies as the relays log them (`engine::late`, `server::late`): after its read timeout a relay
//! answers E901 and records UNKNOWN, but goes on listening for the core's answer; a booking
//! or a rejection then settles the row UNKNOWN → DONE. Each waiter ends in one log line,
//! which is what is counted here, in every relay's log, across all its restarts (a relay
//! SIGKILLed while a waiter listened leaves no line for it):
//!
//! - `guid=G late reply CODE: settled DONE (attempt N)`: the row was settled;
//! - `guid=G late reply CODE came after the row moved on; left to it`: an answer that
//!   settled nothing (resolve or reprocess had moved the row on, or the ledger failed);
//! - `guid=G late reply settles nothing: WHY`: an answer that is neither a booking nor a
//!   rejection;
//! - `guid=G late reply not awaited: …`: dropped, `--max-late-replies` were already waiting;
//! - `guid=G no late reply within MS ms`: nothing usable came (the core closed the connection,
//!   went away, or stayed silent).

use std::collections::BTreeMap;

/// One waiter's end, as its log line says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    Settled(Settled),
    /// A booking or a rejection that came after the row had moved on.
    MovedOn {
        guid: String,
        code: String,
    },
    /// An answer that is neither a booking nor a rejection.
    NotFinal {
        guid: String,
    },
    /// Not awaited: the waiters were full.
    Dropped {
        guid: String,
    },
    /// Nothing usable came within the window.
    NoReply {
        guid: String,
    },
}

/// A row a late reply settled: UNKNOWN → DONE with `code` on `attempt`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settled {
    pub guid: String,
    pub code: String,
    pub attempt: i64,
}

/// What one relay's late replies came to (or several relays', merged).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LateLog {
    pub settled: Vec<Settled>,
    /// Arrived, but the row had moved on.
    pub moved_on: usize,
    /// Arrived, but neither a booking nor a rejection.
    pub not_final: usize,
    /// Calls not awaited because the waiters were full.
    pub dropped: usize,
    /// Waiters that heard nothing usable.
    pub no_reply: usize,
}

impl LateLog {
    /// Counts every late-reply line of a relay's log.
    pub fn scan(text: &str) -> LateLog {
        let mut log = LateLog::default();
        for event in text.lines().filter_map(parse_line) {
            match event {
                Event::Settled(s) => log.settled.push(s),
                Event::MovedOn { .. } => log.moved_on += 1,
                Event::NotFinal { .. } => log.not_final += 1,
                Event::Dropped { .. } => log.dropped += 1,
                Event::NoReply { .. } => log.no_reply += 1,
            }
        }
        log
    }

    /// Answers that came, whatever they settled.
    pub fn arrived(&self) -> usize {
        self.settled.len() + self.settled_nothing()
    }

    /// Answers that came and settled nothing.
    pub fn settled_nothing(&self) -> usize {
        self.moved_on + self.not_final
    }

    /// Settled rows by code: `0000 n, B001 m`.
    pub fn settled_by_code(&self) -> BTreeMap<&str, usize> {
        let mut by_code = BTreeMap::new();
        for s in &self.settled {
            *by_code.entry(s.code.as_str()).or_default() += 1;
        }
        by_code
    }

    pub fn merge(&mut self, other: &LateLog) {
        self.settled.extend(other.settled.iter().cloned());
        self.moved_on += other.moved_on;
        self.not_final += other.not_final;
        self.dropped += other.dropped;
        self.no_reply += other.no_reply;
    }
}

/// The late-reply event a log line tells of, text or JSON (the message is the same; the
/// GUID is the line's `guid` field: ` guid=G` in text, `"guid":"G"` in JSON).
pub fn parse_line(line: &str) -> Option<Event> {
    let guid = guid_field(line)?;
    let at = ["no late reply within ", "late reply "]
        .iter()
        .filter_map(|p| line.find(p))
        .min()?;
    parse_message(guid, &line[at..])
}

/// The value of the line's `guid` field.
fn guid_field(line: &str) -> Option<&str> {
    if let Some(i) = line.find("\"guid\":\"") {
        let rest = &line[i + "\"guid\":\"".len()..];
        return rest.split('"').next().filter(|g| !g.is_empty());
    }
    let i = line.rfind(" guid=")?;
    line[i + " guid=".len()..]
        .split(' ')
        .next()
        .filter(|g| !g.is_empty())
}

/// `late reply …` or `no late reply within …`, the message of a line about `guid`.
fn parse_message(guid: &str, rest: &str) -> Option<Event> {
    let guid = guid.to_string();
    if rest.starts_with("no late reply within ") {
        return Some(Event::NoReply { guid });
    }
    let rest = rest.strip_prefix("late reply ")?;
    if rest.starts_with("not awaited:") {
        return Some(Event::Dropped { guid });
    }
    if rest.starts_with("settles nothing:") {
        return Some(Event::NotFinal { guid });
    }
    if let Some((code, after)) = rest.split_once(": settled DONE (attempt ") {
        let attempt = after.split_once(')')?.0.parse().ok()?;
        return Some(Event::Settled(Settled {
            guid,
            code: code.to_string(),
            attempt,
        }));
    }
    let (code, after) = rest.split_once(' ')?;
    after
        .starts_with("came after the row moved on")
        .then(|| Event::MovedOn {
            guid,
            code: code.to_string(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "\
=== chaos: starting relay on 127.0.0.1:0 at t=0.002s
[2026-12-02T21:11:52Z INFO  relay] listening on 127.0.0.1:42463
[2026-12-02T21:11:52Z INFO  engine::late] late reply 0000: settled DONE (attempt 1) guid=c017-000000p
[2026-12-02T21:11:52Z INFO  engine::server] guid=c017-000000p code=E901 state=UNKNOWN ms=301
[2026-12-02T21:11:53Z INFO  engine::late] late reply B001: settled DONE (attempt 2) guid=c021-000001c_.k
[2026-12-02T21:11:53Z INFO  engine::late] late reply 0000 came after the row moved on; left to it guid=c004-0000
[2026-12-02T21:11:53Z INFO  engine::late] late reply settles nothing: core answered HTTP 500 guid=c004-0001
[2026-12-02T21:11:53Z WARN  engine::late] late reply not awaited: 256 calls already waiting (1 dropped so far) guid=c004-0002
[2026-12-02T21:11:54Z INFO  engine::late] no late reply within 2000 ms guid=c004-0003
=== chaos: starting relay on 127.0.0.1:42463 at t=2.781s
[2026-12-02T21:11:55Z INFO  engine::late] late reply 0000: settled DONE (attempt 1) guid=c009-0007
[2026-12-02T21:11:55Z INFO  engine::late] waiting for 2 late repl(ies)
";

    #[test]
    fn counts_every_kind_of_line_across_restarts() {
        let log = LateLog::scan(LOG);
        assert_eq!(
            log.settled,
            vec![
                Settled {
                    guid: "c017-000000p".into(),
                    code: "0000".into(),
                    attempt: 1
                },
                Settled {
                    guid: "c021-000001c_.k".into(),
                    code: "B001".into(),
                    attempt: 2
                },
                Settled {
                    guid: "c009-0007".into(),
                    code: "0000".into(),
                    attempt: 1
                },
            ]
        );
        assert_eq!(
            (log.moved_on, log.not_final, log.dropped, log.no_reply),
            (1, 1, 1, 1)
        );
        assert_eq!((log.arrived(), log.settled_nothing()), (5, 2));
        assert_eq!(
            log.settled_by_code().into_iter().collect::<Vec<_>>(),
            vec![("0000", 2), ("B001", 1)]
        );
    }

    #[test]
    fn reads_json_lines_and_ignores_the_rest() {
        let json = r#"{"timestamp":"2026-12-02T21:11:52.123Z","level":"INFO","target":"engine::late","message":"late reply 0000: settled DONE (attempt 3)","guid":"c001-0001"}"#;
        assert_eq!(
            parse_line(json),
            Some(Event::Settled(Settled {
                guid: "c001-0001".into(),
                code: "0000".into(),
                attempt: 3
            }))
        );
        assert_eq!(
            parse_line(
                "[t INFO  engine::late] late reply 0000 came after the row moved on; left to it guid=g"
            ),
            Some(Event::MovedOn {
                guid: "g".into(),
                code: "0000".into()
            })
        );
        for other in [
            "[t INFO  engine::server] guid=c1 code=0000 state=DONE ms=3",
            "[t INFO  engine::late] waiting for 3 late repl(ies)",
            "[t WARN  engine::late] cannot start a late-reply thread: oops",
            "[t INFO  engine::late] late reply 0000: settled DONE (attempt x) guid=c1",
            "",
        ] {
            assert_eq!(parse_line(other), None, "{other}");
        }
        let mut all = LateLog::scan(LOG);
        all.merge(&LateLog::scan(LOG));
        assert_eq!((all.settled.len(), all.dropped, all.arrived()), (6, 2, 10));
    }
}
