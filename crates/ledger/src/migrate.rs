//! Moving an SQLite ledger into PostgreSQL: each row inserted with `ON CONFLICT (guid) DO
//! NOTHING` and its own `updated_at`; a GUID already present is compared, never overwritten.

use log::warn;
use serde::Serialize;

use crate::error::LedgerError;
use crate::postgres::PgStore;
use crate::state::Row;
use crate::store::Store;

#[derive(Debug, Default, Serialize)]
pub struct MigrateSummary {
    pub read: usize,
    pub copied: usize,
    /// Already in the target with exactly the same content (an earlier run).
    pub present: usize,
    /// Not copied: already there with other content, or not representable.
    pub refused: usize,
    /// The refused GUIDs, for the operator.
    pub refused_guids: Vec<String>,
}

/// Copies every row of `source` into `target`.
pub fn copy(source: &dyn Store, target: &PgStore) -> Result<MigrateSummary, LedgerError> {
    let mut sum = MigrateSummary::default();
    for row in source.all_rows()? {
        sum.read += 1;
        match copy_one(&row, target) {
            Ok(true) => sum.copied += 1,
            Ok(false) => sum.present += 1,
            Err(why) => {
                warn!("guid={} not copied: {why}", row.guid);
                sum.refused += 1;
                sum.refused_guids.push(row.guid);
            }
        }
    }
    Ok(sum)
}

/// `Ok(true)`: copied; `Ok(false)`: already there, identical; `Err`: refused, and why.
fn copy_one(row: &Row, target: &PgStore) -> Result<bool, String> {
    if row.attempts.is_none() {
        return Err("attempts is not an integer".into());
    }
    if !canonical_time(&row.updated_at) {
        return Err(format!(
            "updated_at {:?} is not YYYY-MM-DD HH:MM:SS",
            row.updated_at
        ));
    }
    if target.copy_row(row).map_err(|e| e.to_string())? {
        return Ok(true);
    }
    match target.read(&row.guid).map_err(|e| e.to_string())? {
        Some(there) if &there == row => Ok(false),
        Some(there) => Err(format!(
            "already in the target with other content ({} {} attempts {:?}, updated {})",
            there.state,
            there.rsp_code.as_deref().unwrap_or("-"),
            there.attempts,
            there.updated_at
        )),
        None => Err("neither copied nor found (deleted meanwhile?)".into()),
    }
}

fn canonical_time(t: &str) -> bool {
    let b = t.as_bytes();
    b.len() == 19
        && b.iter().enumerate().all(|(i, c)| match i {
            4 | 7 => *c == b'-',
            10 => *c == b' ',
            13 | 16 => *c == b':',
            _ => c.is_ascii_digit(),
        })
}
