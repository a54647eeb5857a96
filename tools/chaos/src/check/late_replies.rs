//! (h) The rows late replies settled, held against the relays' log lines and the core's
//! books.

use std::collections::{BTreeMap, HashMap};

use ledger::{Row, State};

use super::{Checks, H};
use crate::late::Settled;

/// (h) Every row a late reply settled, as the relays logged it: DONE (final) with the code
/// and on the attempt the log line names, settled once, and if a booking, booked once by the
/// core. `settled`: every relay's settled lines, all starts.
pub fn late(c: &mut Checks, settled: &[Settled], rows: &[Row], by_guid: &BTreeMap<String, u64>) {
    let by_row: HashMap<&str, &Row> = rows.iter().map(|r| (r.guid.as_str(), r)).collect();
    let mut seen: HashMap<&str, &Settled> = HashMap::new();
    for s in settled {
        c.case(H);
        let g = s.guid.as_str();
        if let Some(before) = seen.insert(g, s) {
            c.fail(
                H,
                g,
                format!(
                    "settled by a late reply twice: {} on attempt {}, then {} on attempt {}",
                    before.code, before.attempt, s.code, s.attempt
                ),
            );
            continue;
        }
        let Some(row) = by_row.get(g) else {
            c.fail(
                H,
                g,
                format!(
                    "a late reply settled it ({}), but the ledger has no row",
                    s.code
                ),
            );
            continue;
        };
        let code = row.rsp_code.as_deref().unwrap_or("-");
        if row.state != State::Done || code != s.code || row.attempts != Some(s.attempt) {
            c.fail(
                H,
                g,
                format!(
                    "a late reply settled it DONE {} on attempt {}, but the row is {} {code} \
                     (attempts {:?})",
                    s.code, s.attempt, row.state, row.attempts
                ),
            );
            continue;
        }
        let booked = by_guid.get(g).copied().unwrap_or(0);
        let want = u64::from(s.code == "0000");
        if booked != want {
            c.fail(
                H,
                g,
                format!(
                    "a late reply settled it DONE {}, but the core booked it {booked} times",
                    s.code
                ),
            );
        }
    }
}
