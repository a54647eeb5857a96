//! Instants as reconciliation compares them: whole seconds since the epoch, UTC (§10: "to
//! the second"), read from RFC 3339 (the journal, `--from`, `--to`), from a reply body's
//! `YYYYMMDDhhmmss` and from the ledger's `YYYY-MM-DD HH:MM:SS`.

use time::format_description::well_known::Rfc3339;
use time::macros::format_description;
use time::{OffsetDateTime, PrimitiveDateTime, UtcOffset};

/// Seconds since 1970-01-01T00:00:00Z.
pub type Secs = i64;

/// An RFC 3339 instant with its offset (`Z` or `±hh:mm`), fractions of a second dropped.
pub fn parse_rfc3339(s: &str) -> Result<Secs, String> {
    OffsetDateTime::parse(s, &Rfc3339)
        .map(|t| t.unix_timestamp())
        .map_err(|e| format!("{s:?} is not an RFC 3339 time with an offset: {e}"))
}

/// `YYYY-MM-DDThh:mm:ssZ`.
pub fn format_rfc3339(t: Secs) -> String {
    match OffsetDateTime::from_unix_timestamp(t) {
        Ok(t) => t
            .format(format_description!(
                "[year]-[month]-[day]T[hour]:[minute]:[second]Z"
            ))
            .unwrap_or_else(|_| t.to_string()),
        Err(_) => format!("@{t}"),
    }
}

/// A reply body's `YYYYMMDDhhmmss` (UTC).
pub fn parse_compact(s: &str) -> Option<Secs> {
    if s.len() != 14 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let t = PrimitiveDateTime::parse(
        s,
        format_description!("[year][month][day][hour][minute][second]"),
    )
    .ok()?;
    Some(t.assume_offset(UtcOffset::UTC).unix_timestamp())
}

/// The ledger's `updated_at`, `YYYY-MM-DD HH:MM:SS` (UTC).
pub fn parse_ledger(s: &str) -> Option<Secs> {
    let t = PrimitiveDateTime::parse(
        s,
        format_description!("[year]-[month]-[day] [hour]:[minute]:[second]"),
    )
    .ok()?;
    Some(t.assume_offset(UtcOffset::UTC).unix_timestamp())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_three_forms_meet() {
        let a = parse_rfc3339("2026-12-02T09:30:12Z").unwrap();
        assert_eq!(parse_rfc3339("2026-12-02T10:30:12.999+01:00").unwrap(), a);
        assert_eq!(parse_compact("20261202093012"), Some(a));
        assert_eq!(parse_ledger("2026-12-02 09:30:12"), Some(a));
        assert_eq!(format_rfc3339(a), "2026-12-02T09:30:12Z");
        assert!(parse_rfc3339("2026-12-02T09:30:12").is_err());
        assert_eq!(parse_compact("2026120209301"), None);
    }
}
