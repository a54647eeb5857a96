//! The core's booking journal (CONTRACT §10), read as a stream: one JSON object a line,
//! `{"guid","core_ref","amount","booked_at"}` (other fields ignored, blank lines skipped).
//! Several files (several days' exports, `--journal` given more than once) are read as one
//! journal. Never the lines themselves are kept: per booking its GUID and core_ref (in one
//! shared text arena), amount, `booked_at` in seconds, file and line number, 40 bytes plus
//! the two strings, in one vector sorted by GUID once every file is read (a hash map costs
//! twice that for a million GUIDs). Identical bookings (same guid, core_ref, amount and
//! instant) are one, in one file or across files, since consecutive exports may overlap;
//! two lines with the same guid and core_ref that differ otherwise, or any line that is not
//! a booking, make the journal bad: the earliest such line (files in the order given) is
//! named, and nothing is reported.

use std::borrow::Cow;
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
    /// Where the booking was read: the file's index in [`Journal::files`], and its line.
    /// Both fit in the padding the other fields leave, so a second file costs no memory.
    file: u16,
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
    /// The files read, in the order given (an entry's `file` is an index into it).
    files: Vec<PathBuf>,
    /// Lines read of the file being read, which numbers the next booking.
    file_lines: u64,
    /// The earliest and latest `booked_at`, if any line was a booking.
    pub span: Option<(Secs, Secs)>,
    /// Lines read, in every file (blank ones included).
    pub lines: u64,
}

/// Why the journal cannot be used: the file, and the line when it is one line's fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "journal {}{}: {why}",
    .file.display(),
    .line.map_or(String::new(), |n| format!(" line {n}"))
)]
pub struct JournalError {
    pub file: PathBuf,
    pub line: Option<u64>,
    pub why: String,
}

/// A line that makes the journal bad: the index of its file, its line (0 for the file as a
/// whole), and why. Ordered by where it is, so that the earliest is the one named.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Fault {
    pub file: usize,
    pub line: u64,
    pub why: String,
}

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
    read_all(&[path.to_path_buf()])
}

/// Reads the journals `paths` as one journal: a booking is one booking whichever file it is
/// in, so that a GUID booked on two days is seen booked twice, and an export that overlaps
/// the next one does not double what they share.
pub fn read_all(paths: &[PathBuf]) -> Result<Journal, JournalError> {
    let mut j = Journal::default();
    // Reading stops at the first unreadable line (or file): what follows it is not read.
    let mut bad: Option<Fault> = None;
    for path in paths {
        if let Err(fault) = j.read_file(path) {
            bad = Some(fault);
            break;
        }
    }
    // A conflict on an earlier line than the first unreadable one is named first.
    let fault = match (j.seal(), bad) {
        (Err(conflict), Some(bad)) => Some(conflict.min(bad)),
        (Err(f), None) | (Ok(()), Some(f)) => Some(f),
        (Ok(()), None) => None,
    };
    match fault {
        None => Ok(j),
        Some(f) => Err(JournalError {
            file: j.files[f.file].clone(),
            line: (f.line > 0).then_some(f.line),
            why: f.why,
        }),
    }
}

impl Journal {
    /// Reads one more file into the journal, every line, up to the first that is not a
    /// booking (its fault returned; the lines before it are kept, so that a conflict among
    /// them on an earlier line can still be named first). [`Journal::seal`] must follow the
    /// last file.
    fn read_file(&mut self, path: &Path) -> Result<(), Fault> {
        let file = self.files.len();
        self.files.push(path.to_path_buf());
        self.file_lines = 0;
        let fault = |line, why: String| Fault { file, line, why };
        if u16::try_from(file).is_err() {
            return Err(fault(0, "too many journal files".into()));
        }
        let f = File::open(path).map_err(|e| fault(0, format!("cannot open: {e}")))?;
        let mut r = BufReader::with_capacity(1 << 16, f);
        let mut buf = Vec::with_capacity(256);
        loop {
            buf.clear();
            let n = r
                .read_until(b'\n', &mut buf)
                .map_err(|e| fault(self.file_lines + 1, format!("cannot read: {e}")))?;
            if n == 0 {
                return Ok(());
            }
            self.lines += 1;
            self.file_lines += 1;
            let torn = buf.last() != Some(&b'\n');
            if let Err(why) = self.add(&buf) {
                let why = if torn {
                    format!("{why} (torn last line)")
                } else {
                    why
                };
                return Err(fault(self.file_lines, why));
            }
        }
    }

    /// Adds one line (its bytes, newline included or not) of the file read last.
    /// [`Journal::seal`] must follow the last.
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
            // Lines added by hand (no file read) count as the first file's.
            file: u16::try_from(self.files.len().saturating_sub(1))
                .map_err(|_| "too many journal files")?,
            line: u32::try_from(self.file_lines.max(1)).map_err(|_| "too many lines")?,
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

    /// Sorts the bookings by GUID and merges identical ones, across files too; a GUID and
    /// core_ref on two lines that differ otherwise is the later line's fault (files in the
    /// order given): the earliest such line, and why.
    pub fn seal(&mut self) -> Result<(), Fault> {
        let mut entries = std::mem::take(&mut self.entries);
        entries.sort_unstable_by(|a, b| {
            (self.str(a.guid), self.str(a.core_ref), a.file, a.line).cmp(&(
                self.str(b.guid),
                self.str(b.core_ref),
                b.file,
                b.line,
            ))
        });
        let mut conflict: Option<Fault> = None;
        let mut kept: Vec<Entry> = Vec::with_capacity(entries.len());
        for e in entries {
            if let Some(last) = kept.last()
                && self.str(last.guid) == self.str(e.guid)
                && self.str(last.core_ref) == self.str(e.core_ref)
            {
                let here = (usize::from(e.file), u64::from(e.line));
                if (last.amount, last.booked_at) != (e.amount, e.booked_at)
                    && conflict.as_ref().is_none_or(|c| here < (c.file, c.line))
                {
                    conflict = Some(Fault {
                        file: here.0,
                        line: here.1,
                        why: format!(
                            "guid {:?} core_ref {:?} is on line {}{} with another amount or \
                             booked_at",
                            self.str(e.guid),
                            self.str(e.core_ref),
                            last.line,
                            self.other_file(last.file, e.file)
                        ),
                    });
                }
                continue;
            }
            kept.push(e);
        }
        kept.shrink_to_fit();
        self.entries = kept;
        conflict.map_or(Ok(()), Err)
    }

    /// ` of FILE` when a conflicting line is in another file than the line it is named on.
    fn other_file(&self, file: u16, of: u16) -> String {
        match self.files.get(usize::from(file)) {
            Some(path) if file != of => format!(" of {}", path.display()),
            _ => String::new(),
        }
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

    /// Files of the test's own, in a directory of its own under the system's temp dir.
    fn files(name: &str, contents: &[&str]) -> Vec<PathBuf> {
        let dir = std::env::temp_dir().join(format!("reconcile-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        contents
            .iter()
            .enumerate()
            .map(|(i, text)| {
                let path = dir.join(format!("day{i}.jsonl"));
                std::fs::write(&path, text).unwrap();
                path
            })
            .collect()
    }

    const L2: &str =
        r#"{"guid":"G1","core_ref":"C2","amount":1500,"booked_at":"2026-12-03T00:00:01Z"}"#;

    #[test]
    fn a_booking_costs_40_bytes_plus_its_strings_whatever_file_it_is_in() {
        assert_eq!(std::mem::size_of::<Entry>(), 40);
    }

    #[test]
    fn several_files_are_one_journal() {
        let l1 = std::str::from_utf8(L1).unwrap();
        // The day before's export repeats G1/C1 (the exports overlap): one booking; G1/C2 in
        // the second file is the GUID's second booking.
        let paths = files("one", &[&format!("{l1}\n"), &format!("{l1}\n\n{L2}\n")]);
        let j = read_all(&paths).unwrap();
        assert_eq!(j.find("G1"), Some(0..2));
        assert_eq!(j.booking(1).core_ref, "C2");
        assert_eq!(j.lines, 4);
        assert_eq!(
            j.span.unwrap().1 - j.span.unwrap().0,
            14 * 3600 + 29 * 60 + 49
        );
        // Each file alone: one booking.
        assert_eq!(read(&paths[1]).unwrap().find("G1"), Some(0..2));
        assert_eq!(read(&paths[0]).unwrap().find("G1"), Some(0..1));
    }

    #[test]
    fn a_conflict_across_files_names_the_later_line_and_the_other_file() {
        let l1 = std::str::from_utf8(L1).unwrap();
        let other = l1.replace("1500", "1501");
        let paths = files(
            "conflict",
            &[&format!("{l1}\n"), &format!("{L2}\n{other}\n")],
        );
        let e = read_all(&paths).unwrap_err();
        assert_eq!((e.file.as_path(), e.line), (paths[1].as_path(), Some(2)));
        assert!(
            e.why
                .contains(&format!("on line 1 of {}", paths[0].display())),
            "{e}"
        );
        // A bad line after the conflict: the conflict, earlier, is named.
        let paths = files(
            "conflict-first",
            &[&format!("{l1}\n{other}\n"), "{\"guid\":\n"],
        );
        let e = read_all(&paths).unwrap_err();
        assert_eq!((e.file.as_path(), e.line), (paths[0].as_path(), Some(2)));
        assert!(e.why.contains("on line 1 with"), "{e}");
        // A bad line before it: the bad line.
        let paths = files("bad-first", &["x\n", &format!("{l1}\n{other}\n")]);
        let e = read_all(&paths).unwrap_err();
        assert_eq!((e.file.as_path(), e.line), (paths[0].as_path(), Some(1)));
        // A file that is not there is named, without a line.
        let mut paths = files("gone", &[&format!("{l1}\n")]);
        paths.push(paths[0].with_file_name("nowhere.jsonl"));
        let e = read_all(&paths).unwrap_err();
        assert_eq!((e.file.as_path(), e.line), (paths[1].as_path(), None));
        assert!(e.to_string().contains("nowhere.jsonl: cannot open"), "{e}");
    }
}
