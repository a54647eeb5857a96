//! The core's booking journal (CONTRACT §10), read as a stream: one JSON object a line,
//! `{"guid","core_ref","amount","booked_at"}` (other fields ignored, blank lines skipped).
//! Never the lines themselves are kept: per booking its GUID and core_ref (in one shared text
//! arena), amount, `booked_at` in seconds and line number, 40 bytes plus the two strings, in
//! one vector sorted by GUID once the file is read (a hash map costs twice that for a
//! million GUIDs). Identical bookings (same guid, core_ref, amount and instant) are one;
//! two lines with the same guid and core_ref that differ otherwise, or any line that is not
//! a booking, make the journal bad: the earliest such line is named, and nothing is
//! reported.

use std::borrow::Cow;
use std::fmt;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::time::{Secs, parse_rfc3339};

/// One booking as the journal holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    amount: u64,
    booked_at: Secs,
    guid: (u32, u32),
    core_ref: (u32, u32),
    line: u32,
}

/// One booking of the core, as the classes read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Booking<'a> {
    pub core_ref: &'a str,
    pub amount: u64,
    pub booked_at: Secs,
}

/// The journal as read: its bookings by GUID, and the earliest and latest `booked_at`.
#[derive(Debug, Default)]
pub struct Journal {
    text: String,
    entries: Vec<Entry>,
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
    let mut bad: Option<(u64, String)> = None;
    loop {
        buf.clear();
        let n = r
            .read_until(b'\n', &mut buf)
            .map_err(|e| fail(Some(j.lines + 1), format!("cannot read: {e}")))?;
        if n == 0 {
            break;
        }
        j.lines += 1;
        let torn = buf.last() != Some(&b'\n');
        if let Err(why) = j.add(&buf) {
            let why = if torn {
                format!("{why} (torn last line)")
            } else {
                why
            };
            bad = Some((j.lines, why));
            break;
        }
    }
    // A conflict on an earlier line than the first unreadable one is named first.
    match (j.seal(), bad) {
        (Err((n, why)), Some((m, _))) if n < m => Err(fail(Some(n), why)),
        (_, Some((m, why))) => Err(fail(Some(m), why)),
        (Err((n, why)), None) => Err(fail(Some(n), why)),
        (Ok(()), None) => Ok(j),
    }
}

impl Journal {
    /// Adds one line (its bytes, newline included or not). [`Journal::seal`] must follow the
    /// last.
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
        self.span = Some(match self.span {
            None => (booked_at, booked_at),
            Some((lo, hi)) => (lo.min(booked_at), hi.max(booked_at)),
        });
        let guid = self.push_text(&line.guid)?;
        let core_ref = self.push_text(&line.core_ref)?;
        self.entries.push(Entry {
            amount: line.amount,
            booked_at,
            guid,
            core_ref,
            line: u32::try_from(self.lines.max(1)).map_err(|_| "too many lines")?,
        });
        Ok(())
    }

    fn push_text(&mut self, s: &str) -> Result<(u32, u32), String> {
        let at = u32::try_from(self.text.len()).map_err(|_| "the journal is too large")?;
        let len = u32::try_from(s.len()).map_err(|_| "a field is too long")?;
        self.text.push_str(s);
        Ok((at, len))
    }

    fn str(&self, (at, len): (u32, u32)) -> &str {
        &self.text[at as usize..(at + len) as usize]
    }

    /// Sorts the bookings by GUID and merges identical ones; a GUID and core_ref on two lines
    /// that differ otherwise is the later line's fault (the earliest such line, and why).
    pub fn seal(&mut self) -> Result<(), (u64, String)> {
        let mut entries = std::mem::take(&mut self.entries);
        entries.sort_unstable_by(|a, b| {
            (self.str(a.guid), self.str(a.core_ref), a.line).cmp(&(
                self.str(b.guid),
                self.str(b.core_ref),
                b.line,
            ))
        });
        let mut conflict: Option<(u64, String)> = None;
        let mut kept: Vec<Entry> = Vec::with_capacity(entries.len());
        for e in entries {
            if let Some(last) = kept.last()
                && self.str(last.guid) == self.str(e.guid)
                && self.str(last.core_ref) == self.str(e.core_ref)
            {
                if (last.amount, last.booked_at) != (e.amount, e.booked_at)
                    && conflict
                        .as_ref()
                        .is_none_or(|(n, _)| u64::from(e.line) < *n)
                {
                    conflict = Some((
                        e.line.into(),
                        format!(
                            "guid {:?} core_ref {:?} is on line {} with another amount or \
                             booked_at",
                            self.str(e.guid),
                            self.str(e.core_ref),
                            last.line
                        ),
                    ));
                }
                continue;
            }
            kept.push(e);
        }
        kept.shrink_to_fit();
        self.entries = kept;
        conflict.map_or(Ok(()), Err)
    }

    /// How many distinct bookings (entry indexes run from 0 to this).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entries of `guid`'s bookings, if it has any.
    pub fn find(&self, guid: &str) -> Option<Range<usize>> {
        let start = self.entries.partition_point(|e| self.str(e.guid) < guid);
        let end = start
            + self.entries[start..]
                .iter()
                .take_while(|e| self.str(e.guid) == guid)
                .count();
        (end > start).then_some(start..end)
    }

    /// The booking at entry `i`.
    pub fn booking(&self, i: usize) -> Booking<'_> {
        let e = &self.entries[i];
        Booking {
            core_ref: self.str(e.core_ref),
            amount: e.amount,
            booked_at: e.booked_at,
        }
    }

    /// The GUID of entry `i`.
    pub fn guid(&self, i: usize) -> &str {
        self.str(self.entries[i].guid)
    }

    /// Every GUID's entries, in GUID order.
    pub fn groups(&self) -> impl Iterator<Item = Range<usize>> + '_ {
        let mut start = 0;
        std::iter::from_fn(move || {
            if start >= self.entries.len() {
                return None;
            }
            let g = self.guid(start);
            let end = start
                + self.entries[start..]
                    .iter()
                    .take_while(|e| self.str(e.guid) == g)
                    .count();
            let r = start..end;
            start = end;
            Some(r)
        })
    }
}

/// Every booking of the journals `files`, read in full (a bad one refused, naming its file and
/// line, before anything is returned), as `restore --journal` and `inspect recovery --journal`
/// enter them into a recovering ledger.
pub fn read_bookings(
    files: &[PathBuf],
) -> Result<Vec<ledger::recovery::journal::JournalBooking>, JournalError> {
    let mut bookings = Vec::new();
    for file in files {
        let j = read(file)?;
        let source = file.display().to_string();
        for i in 0..j.len() {
            let b = j.booking(i);
            bookings.push(ledger::recovery::journal::JournalBooking {
                guid: j.guid(i).to_string(),
                core_ref: b.core_ref.to_string(),
                amount: b.amount,
                booked_at: crate::time::format_rfc3339(b.booked_at),
                source: source.clone(),
            });
        }
    }
    Ok(bookings)
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
        j.seal().unwrap();
        assert_eq!(j.find("G1"), Some(0..1));
        j.add(br#"{"guid":"G1","core_ref":"C2","amount":1500,"booked_at":"2026-12-02T09:30:13Z","x":1}"#)
            .unwrap();
        j.add(br#"{"guid":"G0","core_ref":"C2","amount":1500,"booked_at":"2026-12-02T09:30:13Z","x":1}"#)
            .unwrap();
        j.seal().unwrap();
        assert_eq!(j.find("G1"), Some(1..3));
        assert_eq!(j.find("G2"), None);
        assert_eq!(j.groups().collect::<Vec<_>>(), [0..1, 1..3]);
        assert_eq!(j.span.unwrap().1 - j.span.unwrap().0, 1);
    }

    #[test]
    fn bad_lines_are_refused() {
        let mut j = Journal::default();
        j.add(L1).unwrap();
        j.add(br#"{"guid":"G1","core_ref":"C1","amount":1501,"booked_at":"2026-12-02T09:30:12Z"}"#)
            .unwrap();
        assert!(j.seal().is_err());
        for bad in [
            &br#"{"guid":"","core_ref":"C1","amount":1,"booked_at":"2026-12-02T09:30:12Z"}"#[..],
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
