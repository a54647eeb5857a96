//! The booking journal (`--journal`): what makes the simulator's bookings survive a restart,
//! as a real core's would.
//!
//! One JSON line per booking (`guid`, `core_ref`, `amount`, `booked_at`), appended with a
//! single `write` and flushed before the booking enters memory and before any answer leaves,
//! so that whatever a client was ever told (or could have been told) is on file. A process
//! killed in the middle of a write leaves at most a torn last line: it is dropped at start-up
//! with a warning, and the file is cut back to its last complete line so that later appends
//! start on a line of their own. That booking was never answered, so forgetting it is what
//! a core that died before committing would do. A bad line anywhere else means the file is
//! not ours or was damaged: start-up fails rather than forget bookings.
//!
//! Written to the kernel, not fsync'ed: it survives SIGKILL of the simulator (what the chaos
//! run does), not a power cut.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};
use serde_json::Number;

/// One booking as written to (and read from) the journal.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    pub guid: String,
    pub core_ref: String,
    pub amount: Number,
    pub booked_at: String,
}

/// An open journal, positioned at its end.
pub struct Journal {
    path: PathBuf,
    file: File,
    /// The length of the file up to its last complete line.
    len: u64,
}

impl Journal {
    /// Opens (creating if missing) the journal at `path` and returns it with every booking
    /// it holds, oldest first.
    pub fn open(path: &Path) -> anyhow::Result<(Journal, Vec<Entry>)> {
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(path)
            .with_context(|| format!("cannot open journal {}", path.display()))?;
        let mut raw = Vec::new();
        file.read_to_end(&mut raw)
            .with_context(|| format!("cannot read journal {}", path.display()))?;

        let (entries, keep) = parse(&raw, path)?;
        if keep < raw.len() {
            // Cut the torn tail, so that the next booking starts a line of its own.
            file.set_len(keep as u64)
                .with_context(|| format!("cannot truncate journal {}", path.display()))?;
        }
        let mut len = keep as u64;
        if keep > 0 && raw[keep - 1] != b'\n' {
            // A complete last booking whose newline never made it: finish its line.
            file.write_all(b"\n")
                .with_context(|| format!("cannot write journal {}", path.display()))?;
            len += 1;
        }
        let journal = Journal {
            path: path.to_path_buf(),
            file,
            len,
        };
        Ok((journal, entries))
    }

    /// Appends one booking and flushes it to the file. Only after this returns `Ok` may the
    /// booking be counted or answered.
    pub fn append(&mut self, entry: &Entry) -> anyhow::Result<()> {
        let mut line = serde_json::to_vec(entry).context("cannot encode a journal line")?;
        line.push(b'\n');
        // One write of the whole line (O_APPEND): a kill leaves a prefix of it at most.
        match self.file.write_all(&line).and_then(|()| self.file.flush()) {
            Ok(()) => {
                self.len += line.len() as u64;
                Ok(())
            }
            Err(e) => {
                // A part of the line may be on file (disk full): cut it, or every later
                // booking would follow a damaged line.
                let _ = self.file.set_len(self.len);
                Err(e).with_context(|| format!("cannot write journal {}", self.path.display()))
            }
        }
    }
}

/// Parses the journal's bytes. Returns the bookings and how many leading bytes to keep (less
/// than `raw.len()` when a torn last line is dropped).
fn parse(raw: &[u8], path: &Path) -> anyhow::Result<(Vec<Entry>, usize)> {
    let mut entries = Vec::new();
    let mut start = 0;
    while start < raw.len() {
        let (end, next) = match raw[start..].iter().position(|&b| b == b'\n') {
            Some(i) => (start + i, start + i + 1),
            None => (raw.len(), raw.len()),
        };
        let line = &raw[start..end];
        let is_last = next >= raw.len();
        if line.iter().all(u8::is_ascii_whitespace) {
            start = next;
            continue;
        }
        match serde_json::from_slice::<Entry>(line) {
            Ok(entry) if !is_last || end < raw.len() => entries.push(entry),
            // A complete booking whose newline never made it: keep it (it is on file); its
            // newline is added by `open`.
            Ok(entry) => {
                entries.push(entry);
                return Ok((entries, raw.len()));
            }
            Err(e) if is_last => {
                log::warn!(
                    "journal {}: ignoring a torn last line ({} bytes, {e}): {:?}",
                    path.display(),
                    line.len(),
                    String::from_utf8_lossy(line)
                );
                return Ok((entries, start));
            }
            Err(e) => bail!(
                "journal {}: line {} is not a booking ({e}): {:?}",
                path.display(),
                entries.len() + 1,
                String::from_utf8_lossy(line)
            ),
        }
        start = next;
    }
    Ok((entries, raw.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(guid: &str, n: u64) -> String {
        format!(
            "{{\"guid\":\"{guid}\",\"core_ref\":\"C{n:017}\",\"amount\":1500,\"booked_at\":\"2026-01-01T00:00:00Z\"}}\n"
        )
    }

    fn p() -> &'static Path {
        Path::new("j")
    }

    #[test]
    fn parses_complete_lines() {
        let raw = format!("{}{}", line("G1", 1), line("G2", 2));
        let (entries, keep) = parse(raw.as_bytes(), p()).unwrap();
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[1].guid, "G2");
        assert_eq!(keep, raw.len());
    }

    #[test]
    fn drops_a_torn_last_line() {
        let good = line("G1", 1);
        let raw = format!("{good}{{\"guid\":\"G2\",\"core_r");
        let (entries, keep) = parse(raw.as_bytes(), p()).unwrap();
        assert_eq!(entries.len(), 1);
        assert_eq!(keep, good.len());
    }

    #[test]
    fn drops_a_bad_terminated_last_line() {
        let good = line("G1", 1);
        let raw = format!("{good}garbage\n");
        let (entries, keep) = parse(raw.as_bytes(), p()).unwrap();
        assert_eq!(entries.len(), 1);
        assert_eq!(keep, good.len());
    }

    #[test]
    fn keeps_a_complete_last_line_without_newline() {
        let raw = format!("{}{}", line("G1", 1), line("G2", 2).trim_end());
        let (entries, keep) = parse(raw.as_bytes(), p()).unwrap();
        assert_eq!(entries.len(), 2);
        assert_eq!(keep, raw.len());
    }

    #[test]
    fn refuses_a_bad_line_in_the_middle() {
        let raw = format!("{}garbage\n{}", line("G1", 1), line("G2", 2));
        assert!(parse(raw.as_bytes(), p()).is_err());
    }

    #[test]
    fn empty_file_is_empty() {
        assert_eq!(parse(b"", p()).unwrap(), (vec![], 0));
    }
}
