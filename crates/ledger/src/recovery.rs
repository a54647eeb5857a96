//! Recovery (contract §11): a ledger put back to an earlier state — restored from a backup, a
//! PostgreSQL database restored to a point in time, a failover that lost commits — no longer
//! knows the GUIDs claimed after that point, and a channel's resend of one of them would be
//! booked a second time. While the ledger is marked **recovering**, the relay and reprocess
//! ask the core before they claim a GUID the ledger has no row for (or re-claim a FAILED row),
//! and write what the core booked instead of sending it again.
//!
//! The mark is one row in the side table `ledger_recovery` (both backends): since when the
//! ledger may have forgotten claims, who set it, and when. Ledger-wide events (recovery begun
//! or ended, a restore) go to `ledger_events`, the history of the ledger as a whole, since
//! `tx_history` is the history of one GUID.

pub mod journal;

use serde::Serialize;

/// How far before a backup's snapshot the recovery window starts: a claim committed just
/// before the snapshot instant may still have been in flight at the core, and the clocks of
/// the relay's host and the core's need not agree to the second.
pub const SNAPSHOT_MARGIN_SECS: i64 = 300;

/// The ledger's recovery mark, as the ledger holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Recovery {
    /// Since when the ledger may have forgotten claims (RFC 3339, UTC, to the second).
    pub since: String,
    /// Who marked it (an operator's system name, `restore`, …).
    pub who: String,
    /// When it was marked (RFC 3339, UTC).
    pub at: String,
}

/// A row written DONE/`0000` from a booking the core reports (recovery mode, `restore
/// --journal`), never sent by us: one `INSERT … ON CONFLICT (guid) DO NOTHING`, so a row that
/// exists (claimed meanwhile) is left as it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Booked {
    pub guid: String,
    pub tx_code: String,
    /// The request the channel sent (the relay in recovery mode); `None` where there is none
    /// (`restore --journal`: the journal has no request).
    pub request: Option<Vec<u8>>,
    /// The reply a channel gets: the 90-byte `0000` reply built from the booking.
    pub response: Vec<u8>,
    /// The channel that asked (`None`: anonymous, or none).
    pub channel: Option<String>,
    /// Who the history names (`None`: the store's program).
    pub who: Option<String>,
    /// Why the history says the row was written.
    pub reason: String,
}

/// A ledger-wide event for `ledger_events`: who did what.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LedgerEvent {
    pub at: String,
    pub who: String,
    pub event: String,
    pub detail: Option<String>,
}

/// `rfc3339` (UTC, `YYYY-MM-DDThh:mm:ssZ`, or with an offset) minus `secs`, as
/// `YYYY-MM-DDThh:mm:ssZ`; `None` if it is not RFC 3339.
pub fn minus_secs(rfc3339: &str, secs: i64) -> Option<String> {
    use time::format_description::well_known::Rfc3339;
    let t = time::OffsetDateTime::parse(rfc3339, &Rfc3339).ok()?;
    let t = (t - time::Duration::seconds(secs)).to_offset(time::UtcOffset::UTC);
    Some(utc_second(t))
}

/// The instant `t` as `YYYY-MM-DDThh:mm:ssZ` (UTC, the fraction cut off).
pub fn utc_second(t: time::OffsetDateTime) -> String {
    let format =
        time::macros::format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]Z");
    t.to_offset(time::UtcOffset::UTC)
        .format(&format)
        .unwrap_or_default()
}

/// `rfc3339` in the one form the ledger stores (`YYYY-MM-DDThh:mm:ssZ`), or `None`.
pub fn normalize(rfc3339: &str) -> Option<String> {
    minus_secs(rfc3339, 0)
}

/// `since` as the ledger stores it, or the error naming what was given.
pub(crate) fn stored_since(since: &str) -> crate::error::Result<String> {
    normalize(since).ok_or_else(|| crate::error::LedgerError::BadInstant(since.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_starts_five_minutes_before_the_snapshot_in_utc() {
        assert_eq!(
            minus_secs("2026-12-06T10:02:03Z", SNAPSHOT_MARGIN_SECS).as_deref(),
            Some("2026-12-06T09:57:03Z")
        );
        assert_eq!(
            normalize("2026-12-06T11:02:03.9+01:00").as_deref(),
            Some("2026-12-06T10:02:03Z")
        );
        assert_eq!(normalize("yesterday"), None);
        assert_eq!(normalize("2026-12-06 10:02:03"), None);
    }
}
