//! The booking a stored reply tells of, read from its bytes (CONTRACT §2): a `0000` reply is
//! the 45-byte header and the 45-byte body, core_ref (18, space-padded), amount (13 digits),
//! booked_at `YYYYMMDDhhmmss` (UTC).

use crate::time::{Secs, parse_compact};

const HEADER: usize = 45;
const BODY: usize = 45;

/// What the stored reply says was booked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    pub core_ref: String,
    pub amount: u64,
    pub booked_at: Secs,
}

/// The booking in `reply`, or why it cannot be read.
pub fn decode(reply: &[u8]) -> Result<Stored, String> {
    if reply.len() != HEADER + BODY {
        return Err(format!(
            "the stored reply is {} bytes, not {}",
            reply.len(),
            HEADER + BODY
        ));
    }
    if reply[0] != b'R' || &reply[41..45] != b"0000" {
        return Err("the stored reply is not a 0000 reply".into());
    }
    let body = &reply[HEADER..];
    let text = |r: std::ops::Range<usize>| std::str::from_utf8(&body[r]).ok();
    let core_ref = text(0..18)
        .map(|s| s.trim_end_matches(' ').to_string())
        .ok_or("the stored core_ref is not ASCII")?;
    let amount = text(18..31)
        .filter(|s| s.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|s| s.parse().ok())
        .ok_or("the stored amount is not 13 digits")?;
    let booked_at = text(31..45)
        .and_then(parse_compact)
        .ok_or("the stored booked_at is not YYYYMMDDhhmmss")?;
    Ok(Stored {
        core_ref,
        amount,
        booked_at,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_body_is_read_field_by_field() {
        let mut r = format!("RTRNF{:<36}0000", "G1").into_bytes();
        r.extend_from_slice(b"C0000000000000001 000000000150020261202093012");
        let s = decode(&r).unwrap();
        assert_eq!(s.core_ref, "C0000000000000001");
        assert_eq!(s.amount, 1500);
        assert_eq!(
            s.booked_at,
            crate::time::parse_rfc3339("2026-12-02T09:30:12Z").unwrap()
        );
        let mut bad = r.clone();
        bad[70] = b'x';
        assert!(decode(&bad).is_err());
        assert!(decode(&r[..89]).is_err());
    }
}
