//! Durations as an operator types and reads them: `90s`, `15m`, `2h`, `1d`, `1h30m`.

/// Seconds per unit letter.
const UNITS: [(char, u64); 4] = [('d', 86_400), ('h', 3_600), ('m', 60), ('s', 1)];

/// `--older-than`: one or more `<digits><unit>` (unit `s`, `m`, `h` or `d`), e.g. `90s`,
/// `15m`, `2h`, `1d`, `1h30m`; in seconds.
pub fn parse_secs(text: &str) -> Result<u64, String> {
    let bad = || {
        format!(
            "{text:?} is not a duration: digits and a unit (s, m, h, d), e.g. 90s, 15m, 2h, 1d, \
             1h30m"
        )
    };
    let mut total: u64 = 0;
    let mut digits = String::new();
    for c in text.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let (_, per) = UNITS.iter().find(|(u, _)| *u == c).ok_or_else(bad)?;
        let n: u64 = digits.parse().map_err(|_| bad())?;
        total = n
            .checked_mul(*per)
            .and_then(|s| total.checked_add(s))
            .ok_or_else(|| format!("{text:?} is too long a duration"))?;
        digits.clear();
    }
    if !digits.is_empty() || text.is_empty() {
        return Err(bad());
    }
    Ok(total)
}

/// `secs` in at most two units, largest first: `45s`, `15m 3s`, `2h 5m`, `3d 4h`.
pub fn human(secs: u64) -> String {
    let parts: Vec<String> = UNITS
        .iter()
        .scan(secs, |left, &(u, per)| {
            let n = *left / per;
            *left %= per;
            Some((n, u))
        })
        .skip_while(|&(n, u)| n == 0 && u != 's')
        .take(2)
        .filter(|&(n, _)| n > 0)
        .map(|(n, u)| format!("{n}{u}"))
        .collect();
    if parts.is_empty() {
        "0s".into()
    } else {
        parts.join(" ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_single_and_combined_units() {
        for (text, secs) in [
            ("90s", 90),
            ("15m", 900),
            ("2h", 7_200),
            ("1d", 86_400),
            ("1h30m", 5_400),
            ("0s", 0),
            ("1d2h3m4s", 93_784),
        ] {
            assert_eq!(parse_secs(text), Ok(secs), "{text}");
        }
    }

    #[test]
    fn refuses_what_is_not_a_duration() {
        for text in [
            "",
            "90",
            "m",
            "15x",
            "1.5h",
            "-1h",
            "1 h",
            "h1",
            "99999999999999999999d",
        ] {
            assert!(parse_secs(text).is_err(), "{text}");
        }
    }

    #[test]
    fn reads_back_in_two_units() {
        for (secs, text) in [
            (0, "0s"),
            (45, "45s"),
            (60, "1m"),
            (903, "15m 3s"),
            (7_500, "2h 5m"),
            (7_205, "2h"),
            (273_600, "3d 4h"),
        ] {
            assert_eq!(human(secs), text, "{secs}");
        }
    }
}
