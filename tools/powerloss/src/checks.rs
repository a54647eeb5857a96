//! What must hold after a cut, read from what is left on the backing folder (the ledger as
//! the restarted relay finds it) and from the core simulator's journal (the truth: it lives
//! outside the file system that loses power):
//! - the ledger passes `PRAGMA integrity_check`;
//! - every GUID a channel got `0000` for is DONE with exactly those bytes (right after the
//!   cut, or once resolve has settled it: see `acknowledged`);
//! - every GUID the core booked has a row that says it may have been sent (SENT, UNKNOWN, or
//!   DONE/0000): a missing row, or FAILED, would have it sent again;
//! - no GUID booked twice (after the round's resends, resolve and reprocess).

use std::collections::HashMap;
use std::path::Path;

use anyhow::Context;
use rusqlite::{Connection, OpenFlags, OptionalExtension};

use crate::traffic::Book;

/// A row as the checks read it.
pub struct Row {
    pub state: String,
    pub rsp_code: Option<String>,
    pub response: Option<Vec<u8>>,
}

/// Opens the ledger left on the backing folder (recovering its WAL, as a relay would).
pub fn open(ledger: &Path) -> anyhow::Result<Connection> {
    let c = Connection::open_with_flags(ledger, OpenFlags::SQLITE_OPEN_READ_WRITE)
        .with_context(|| format!("open {}", ledger.display()))?;
    c.busy_timeout(std::time::Duration::from_secs(5))?;
    Ok(c)
}

/// `PRAGMA integrity_check`'s verdict, `ok` or what it found.
pub fn integrity(c: &Connection) -> anyhow::Result<String> {
    Ok(c.query_row("PRAGMA integrity_check", [], |r| r.get(0))?)
}

/// Whether the ledger has its table yet (a cut during the relay's first start may leave none).
pub fn has_ledger(c: &Connection) -> anyhow::Result<bool> {
    Ok(c.query_row(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'tx'",
        [],
        |_| Ok(()),
    )
    .optional()?
    .is_some())
}

pub fn row(c: &Connection, guid: &str) -> anyhow::Result<Option<Row>> {
    Ok(c.query_row(
        "SELECT state, rsp_code, response FROM tx WHERE guid = ?1",
        [guid],
        |r| {
            Ok(Row {
                state: r.get(0)?,
                rsp_code: r.get(1)?,
                response: r.get(2)?,
            })
        },
    )
    .optional()?)
}

/// Bookings per GUID, from the core's journal (one JSON object a line).
pub fn bookings(journal: &Path) -> anyhow::Result<HashMap<String, u64>> {
    let text = std::fs::read_to_string(journal).unwrap_or_default();
    let mut counts = HashMap::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: serde_json::Value = serde_json::from_str(line)
            .with_context(|| format!("a journal line that is not JSON: {line}"))?;
        let guid = v["guid"].as_str().context("a journal line without guid")?;
        *counts.entry(guid.to_string()).or_insert(0) += 1;
    }
    Ok(counts)
}

/// Every acknowledged `0000` is the ledger's DONE row, byte for byte.
pub fn acknowledged(
    c: &Connection,
    book: &Book,
    round: u64,
    out: &mut Vec<String>,
) -> anyhow::Result<()> {
    for (guid, k) in &book.known {
        let Some(reply) = &k.ok_reply else { continue };
        match row(c, guid)? {
            Some(r) if r.state == "DONE" && r.response.as_deref() == Some(&reply[..]) => {}
            Some(r) => out.push(format!(
                "round {round}: {guid}: a channel got 0000, the ledger has {}/{} {}",
                r.state,
                r.rsp_code.as_deref().unwrap_or("-"),
                if r.response.as_deref() == Some(&reply[..]) {
                    "with that reply"
                } else {
                    "with another reply"
                }
            )),
            None => out.push(format!(
                "round {round}: {guid}: a channel got 0000, and the ledger has no row"
            )),
        }
    }
    Ok(())
}

/// Every GUID the core booked has a row that keeps it from being sent again.
pub fn booked_have_rows(
    c: &Connection,
    booked: &HashMap<String, u64>,
    round: u64,
    out: &mut Vec<String>,
) -> anyhow::Result<()> {
    for guid in booked.keys() {
        match row(c, guid)? {
            Some(r) if matches!(r.state.as_str(), "SENT" | "UNKNOWN") => {}
            Some(r) if r.state == "DONE" && r.rsp_code.as_deref() == Some("0000") => {}
            Some(r) => out.push(format!(
                "round {round}: {guid}: the core booked it, the ledger has {}/{}: it could be \
                 sent again",
                r.state,
                r.rsp_code.as_deref().unwrap_or("-")
            )),
            None => out.push(format!(
                "round {round}: {guid}: the core booked it, and the ledger has no row: a \
                 resend would book it again"
            )),
        }
    }
    Ok(())
}

/// No GUID booked more than once.
pub fn booked_once(booked: &HashMap<String, u64>, round: u64, out: &mut Vec<String>) {
    let mut twice: Vec<_> = booked.iter().filter(|(_, n)| **n > 1).collect();
    twice.sort();
    for (guid, n) in twice {
        out.push(format!(
            "round {round}: {guid}: booked {n} times by the core"
        ));
    }
}

/// Checkpoints `ledger` with its WAL truncated, again and again, until the first error (the
/// power went) or a kill: `powerloss --checkpoint-loop LEDGER`, a process of its own (a
/// process that touches the ledger's mapped -shm after the cut gets SIGBUS).
pub fn checkpoint_loop(ledger: &Path) -> anyhow::Result<()> {
    let c = Connection::open_with_flags(ledger, OpenFlags::SQLITE_OPEN_READ_WRITE)?;
    c.busy_timeout(std::time::Duration::from_millis(50))?;
    loop {
        let _busy: i64 = c.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get(0))?;
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}
