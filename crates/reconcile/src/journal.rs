//! The core's booking journal (CONTRACT §10), read as a stream: one JSON object a line,
//! `{"guid","core_ref","amount","booked_at"}` (other fields ignored, blank lines skipped).
//! Per GUID only its distinct bookings are kept (core_ref, amount, booked_at in seconds),
//! never the lines. Identical bookings are one; two lines with the same guid and core_ref
//! that differ otherwise, or any line that is not a booking, make the journal bad: the read
//! stops there, naming the line, and nothing is reported.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::time::{Secs, parse_rfc3339};

/// One booking of the core.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Booking {
    pub core_ref: Box<str>,
    pub amount: u64,
    pub booked_at: Secs,
}

/// A GUID's distinct bookings (nearly always one).
#[derive(Debug, Clone)]
pub struct Bookings {
    pub first: Booking,
    pub more: Vec<Booking>,
}

impl Bookings {
    pub fn iter(&self) -> impl Iterator<Item = &Booking> {
        std::iter::once(&self.first).chain(self.more.iter())
    }
    pub fn count(&self) -> usize {
        1 + self.more.len()
    }
}

/// The journal as read: bookings by GUID, and the earliest and latest `booked_at`.
#[derive(Debug, Default)]
pub struct Journal {
    pub by_guid: HashMap<Box<str>, Bookings>,
    /// The earliest and latest `booked_at`, if any line was a booking.
    pub span: Option<(Secs, Secs)>,
    /// Lines read (blank ones included).
    pub lines: u64,
}

/// Why the journal cannot be used: the file, and the line when it is one line's fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalError {
    pub file: PathBuf,
    pub line: Option<u64>,
    pub why: String,
}

impl fmt::Display for JournalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(n) => write!(f, "journal {} line {n}: {}", self.file.display(), self.why),
            None => write!(f, "journal {}: {}", self.file.display(), self.why),
        }
    }
}

impl std::error::Error for JournalError {}

#[derive(Deserialize)]
struct Line<'a> {
    #[serde(borrow)]
    guid: Cow<'a, str>,
    #[serde(borrow)]
    core_ref: Cow<'a, str>,
    amount: u64,
    #[serde(borrow)]
    booked_at: Cow<'a, str>,
}

/// Reads the journal at `path`.
pub fn read(path: &Path) -> Result<Journal, JournalError> {
    let fail = |line, why: String| JournalError {
        file: path.to_path_buf(),
        line,
        why,
    };
    let file = File::open(path).map_err(|e| fail(None, format!("cannot open: {e}")))?;
    let mut r = BufReader::with_capacity(1 << 16, file);
    let mut j = Journal::default();
    let mut buf = Vec::with_capacity(256);
    loop {
        buf.clear();
        let n = r
            .read_until(b'\n', &mut buf)
            .map_err(|e| fail(Some(j.lines + 1), format!("cannot read: {e}")))?;
        if n == 0 {
            return Ok(j);
        }
        j.lines += 1;
        let torn = buf.last() != Some(&b'\n');
        j.add(&buf).map_err(|why| {
            fail(
                Some(j.lines),
                if torn {
                    format!("{why} (torn last line)")
                } else {
                    why
                },
            )
        })?;
    }
}

impl Journal {
    /// Adds one line (its bytes, newline included or not).
    pub fn add(&mut self, raw: &[u8]) -> Result<(), String> {
        let text = std::str::from_utf8(raw).map_err(|_| "not UTF-8".to_string())?;
        let text = text.trim();
        if text.is_empty() {
            return Ok(());
        }
        if !text.starts_with('{') {
            return Err("not a JSON object".into());
        }
        let line: Line<'_> =
            serde_json::from_str(text).map_err(|e| format!("not a booking: {e}"))?;
        if line.guid.is_empty() {
            return Err("guid is empty".into());
        }
        let booked_at = parse_rfc3339(&line.booked_at).map_err(|e| format!("booked_at {e}"))?;
        let booking = Booking {
            core_ref: line.core_ref.into(),
            amount: line.amount,
            booked_at,
        };
        self.span = Some(match self.span {
            None => (booked_at, booked_at),
            Some((lo, hi)) => (lo.min(booked_at), hi.max(booked_at)),
        });
        match self.by_guid.get_mut(line.guid.as_ref()) {
            None => {
                self.by_guid.insert(
                    line.guid.into(),
                    Bookings {
                        first: booking,
                        more: Vec::new(),
                    },
                );
            }
            Some(known) => {
                if let Some(same) = known.iter().find(|b| b.core_ref == booking.core_ref) {
                    if *same != booking {
                        return Err(format!(
                            "guid {:?} core_ref {:?} is on an earlier line with another \
                             amount or booked_at",
                            line.guid, booking.core_ref
                        ));
                    }
                } else {
                    known.more.push(booking);
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const L1: &[u8] =
        br#"{"guid":"G1","core_ref":"C1","amount":1500,"booked_at":"2026-12-02T09:30:12Z"}"#;

    #[test]
    fn identical_lines_are_one_booking_and_another_core_ref_is_another() {
        let mut j = Journal::default();
        j.add(L1).unwrap();
        j.add(L1).unwrap();
        assert_eq!(j.by_guid["G1"].count(), 1);
        j.add(br#"{"guid":"G1","core_ref":"C2","amount":1500,"booked_at":"2026-12-02T09:30:13Z","x":1}"#)
            .unwrap();
        assert_eq!(j.by_guid["G1"].count(), 2);
        assert_eq!(j.span.unwrap().1 - j.span.unwrap().0, 1);
    }

    #[test]
    fn bad_lines_are_refused() {
        let mut j = Journal::default();
        j.add(L1).unwrap();
        for bad in [
            &br#"{"guid":"G1","core_ref":"C1","amount":1501,"booked_at":"2026-12-02T09:30:12Z"}"#[..],
            br#"{"guid":"","core_ref":"C1","amount":1,"booked_at":"2026-12-02T09:30:12Z"}"#,
            br#"{"guid":"G2","core_ref":"C1","amount":-1,"booked_at":"2026-12-02T09:30:12Z"}"#,
            br#"{"guid":"G2","core_ref":"C1","amount":1.5,"booked_at":"2026-12-02T09:30:12Z"}"#,
            br#"{"guid":"G2","core_ref":"C1","amount":1,"booked_at":"2026-12-02T09:30:12"}"#,
            br#"{"guid":"G2","core_ref":"C1","amount":1}"#,
            br#"["G2","C1",1,"2026-12-02T09:30:12Z"]"#,
            br#"{"guid":"G2","core_ref":"C1","#,
            b"\xff",
        ] {
            assert!(j.add(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
        assert!(j.add(b"  \r\n").is_ok());
    }
}
