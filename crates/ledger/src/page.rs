//! Pages of rows for a ledger of any size: keyset pagination over the index `tx_state_updated
//! (state, updated_at)`. Rows come oldest change first, ordered by `(updated_at, guid)`; a
//! page ends at a [`Cursor`], the key of its last row, and the next page starts strictly
//! after it (`WHERE (updated_at, guid) > cursor … LIMIT n`), so no row is read twice or
//! skipped however many rows there are, and no query reads more than a page of them per
//! state. A listing of every state asks each state for a page and merges them.

use std::fmt;

use crate::error::Result;
use crate::state::{Row, State};

/// Where a page ended: the key `(updated_at, guid)` of its last row. `at` is `updated_at` as
/// the backend compares it (SQLite: the column's text; PostgreSQL: UTC to the microsecond,
/// `YYYY-MM-DD HH:MM:SS.ffffff`); GUIDs compare byte by byte on both.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Cursor {
    pub at: String,
    pub guid: String,
}

/// Bytes a cursor's text keeps as they are; every other byte is `%XX`, so that the text
/// needs no quoting in a shell.
fn plain(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b':')
}

fn encode(s: &str, out: &mut String) {
    for &b in s.as_bytes() {
        if plain(b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
}

fn decode(s: &str) -> std::result::Result<String, String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = s
                    .get(i + 1..i + 3)
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .ok_or("a % must be followed by two hex digits")?;
                out.push(hex);
                i += 3;
            }
            b if plain(b) => {
                out.push(b);
                i += 1;
            }
            b => return Err(format!("unexpected character {:?}", b as char)),
        }
    }
    String::from_utf8(out).map_err(|_| "not UTF-8 once decoded".to_string())
}

/// `AT,GUID`, each percent-encoded (`2026-01-02%2003:04:05,G-1`): the text a listing prints
/// for its next page and `--after` takes back.
impl fmt::Display for Cursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = String::new();
        encode(&self.at, &mut s);
        s.push(',');
        encode(&self.guid, &mut s);
        f.write_str(&s)
    }
}

impl std::str::FromStr for Cursor {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Cursor, String> {
        let (at, guid) = s
            .split_once(',')
            .ok_or("a cursor is AT,GUID as a listing prints it")?;
        let (at, guid) = (decode(at)?, decode(guid)?);
        if at.is_empty() || guid.is_empty() {
            return Err("a cursor is AT,GUID as a listing prints it".into());
        }
        Ok(Cursor { at, guid })
    }
}

/// Which rows, from where, how many.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageQuery {
    /// Only this state (`None`: every state).
    pub state: Option<State>,
    /// Only rows unchanged for at least this many seconds (`None`: any row).
    pub older_than_secs: Option<u64>,
    /// Only rows after this key (`None`: from the oldest).
    pub after: Option<Cursor>,
    /// At most this many rows (at least 1).
    pub limit: u64,
}

/// One page: its rows, oldest change first, and where the next page starts (`None`: this
/// was the last).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    pub rows: Vec<Row>,
    pub next: Option<Cursor>,
}

/// A count and the first rows it counted (an operator's screenful, not all of them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counted<T> {
    pub total: i64,
    pub first: Vec<T>,
}

/// The page `q` asks for, from `state_page` (one state's rows after a cursor, keyed, at
/// most a given number): each state asked for one row more than the page holds, the
/// answers merged by key; a row beyond the page means there is a next one.
pub(crate) fn page_of(
    q: &PageQuery,
    mut state_page: impl FnMut(State, u64) -> Result<Vec<(Cursor, Row)>>,
) -> Result<Page> {
    let limit = q.limit.max(1);
    let states = q.state.map_or(State::ALL.to_vec(), |s| vec![s]);
    let mut keyed = Vec::new();
    for state in states {
        keyed.extend(state_page(state, limit.saturating_add(1))?);
    }
    keyed.sort_by(|a, b| a.0.cmp(&b.0));
    let keep = usize::try_from(limit).unwrap_or(usize::MAX);
    let more = keyed.len() > keep;
    keyed.truncate(keep);
    let next = if more {
        keyed.last().map(|(c, _)| c.clone())
    } else {
        None
    };
    Ok(Page {
        rows: keyed.into_iter().map(|(_, r)| r).collect(),
        next,
    })
}

/// A limit as SQL binds it.
pub(crate) fn sql_limit(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(guid: &str, state: State, at: &str) -> Row {
        Row {
            guid: guid.into(),
            tx_code: None,
            state,
            rsp_code: None,
            request: None,
            response: None,
            attempts: None,
            updated_at: at.into(),
            channel: None,
        }
    }

    #[test]
    fn a_cursor_survives_its_text() {
        for (at, guid) in [
            ("2026-01-02 03:04:05", "G-1"),
            ("2026-01-02 03:04:05.123456", "txrelay /healthz probe"),
            ("x,y%z", "ü,%"),
        ] {
            let c = Cursor {
                at: at.into(),
                guid: guid.into(),
            };
            let text = c.to_string();
            assert!(text.bytes().all(|b| plain(b) || b == b'%' || b == b','));
            assert_eq!(text.matches(',').count(), 1, "{text}");
            assert_eq!(text.parse::<Cursor>(), Ok(c));
        }
        assert_eq!(
            Cursor {
                at: "2026-01-02 03:04:05".into(),
                guid: "G-1".into()
            }
            .to_string(),
            "2026-01-02%2003:04:05,G-1"
        );
        for bad in [
            "", "no-comma", ",G", "AT,", "a b,G", "%2,G", "%zz,G", "%FF,G",
        ] {
            assert!(bad.parse::<Cursor>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn pages_of_every_state_merge_by_key_and_say_whether_more_follow() {
        let rows = [
            row("A", State::Done, "1"),
            row("B", State::Failed, "1"),
            row("C", State::Done, "2"),
            row("D", State::Unknown, "3"),
        ];
        let keyed = |s: State, after: &Option<Cursor>, n: u64| -> Vec<(Cursor, Row)> {
            rows.iter()
                .filter(|r| r.state == s)
                .map(|r| {
                    let c = Cursor {
                        at: r.updated_at.clone(),
                        guid: r.guid.clone(),
                    };
                    (c, r.clone())
                })
                .filter(|(c, _)| after.as_ref().is_none_or(|a| c > a))
                .take(n as usize)
                .collect()
        };
        let mut q = PageQuery {
            state: None,
            older_than_secs: None,
            after: None,
            limit: 2,
        };
        let mut seen = Vec::new();
        loop {
            let after = q.after.clone();
            let p = page_of(&q, |s, n| Ok(keyed(s, &after, n))).unwrap();
            seen.extend(p.rows.iter().map(|r| r.guid.clone()));
            match p.next {
                Some(c) => q.after = Some(c),
                None => break,
            }
        }
        assert_eq!(seen, ["A", "B", "C", "D"]);
        q.after = None;
        q.limit = 4;
        let p = page_of(&q, |s, n| Ok(keyed(s, &None, n))).unwrap();
        assert_eq!((p.rows.len(), p.next), (4, None), "exactly a page: no next");
        q.state = Some(State::Done);
        q.limit = 1;
        let p = page_of(&q, |s, n| Ok(keyed(s, &None, n))).unwrap();
        assert_eq!(p.rows, [rows[0].clone()]);
        assert_eq!(p.next.map(|c| c.guid), Some("A".into()));
    }
}
