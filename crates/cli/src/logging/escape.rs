//! What a log line may carry: no character that a terminal, a log viewer or a line-based
//! collector would read as the end of a line or as a command. Some values come from peers
//! (an HTTP body's member name, a malformed request's detail), so a raw newline would let
//! any client write a line of its choosing into the relay's log. Every such character is
//! written as a visible escape instead: `\n`, `\r`, `\t`, and `\u{1b}` for the others (the
//! form of Rust's `escape_debug`). Backslashes are left as they are: a value holding the two
//! characters `\` `n` stays on its line, which is all the escaping is for.

use std::borrow::Cow;
use std::fmt::{self, Write};

/// Whether `c` never reaches the log raw: the C0 and C1 controls and DEL (a newline, a
/// carriage return, ESC that starts a terminal sequence), the Unicode line and paragraph
/// separators (which some viewers break lines at), and the bidirectional embeddings,
/// overrides and isolates (which make a terminal show a line's text in another order).
fn must_escape(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        )
}

/// Writes `s` to `out`, each character of `must_escape` as its visible escape.
fn write_escaped(out: &mut impl Write, s: &str) -> fmt::Result {
    let mut rest = s;
    while let Some(at) = rest.find(must_escape) {
        out.write_str(&rest[..at])?;
        let c = rest[at..].chars().next().unwrap_or_default();
        match c {
            '\n' => out.write_str("\\n")?,
            '\r' => out.write_str("\\r")?,
            '\t' => out.write_str("\\t")?,
            c => write!(out, "\\u{{{:x}}}", u32::from(c))?,
        }
        rest = &rest[at + c.len_utf8()..];
    }
    out.write_str(rest)
}

/// `s` with its characters of `must_escape` escaped; borrowed when there are none, as in
/// nearly every line.
pub(super) fn escape(s: &str) -> Cow<'_, str> {
    if !s.contains(must_escape) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    let _ = write_escaped(&mut out, s);
    Cow::Owned(out)
}

/// A `fmt::Write` that escapes what is written through it, so that a `Display` value (a
/// record's message, a key-value) is escaped as it is formatted, without a copy first.
pub(super) struct Escaping<'a, W: Write>(pub &'a mut W);

impl<W: Write> Write for Escaping<'_, W> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        write_escaped(self.0, s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_and_separators_are_escaped_visibly() {
        let cases = [
            ("plain text, é and ünï", "plain text, é and ünï"),
            ("a\nb", "a\\nb"),
            ("a\r\nb", "a\\r\\nb"),
            ("tab\there", "tab\\there"),
            ("\u{1b}[31mred", "\\u{1b}[31mred"),
            ("nul\0", "nul\\u{0}"),
            ("del\u{7f}", "del\\u{7f}"),
            ("nel\u{85}c1\u{9b}", "nel\\u{85}c1\\u{9b}"),
            ("ls\u{2028}ps\u{2029}", "ls\\u{2028}ps\\u{2029}"),
            ("rlo\u{202e}fdp.exe", "rlo\\u{202e}fdp.exe"),
            ("iso\u{2066}x\u{2069}", "iso\\u{2066}x\\u{2069}"),
            ("back\\slash \\n", "back\\slash \\n"),
            ("", ""),
        ];
        for (raw, want) in cases {
            assert_eq!(escape(raw), want, "{raw:?}");
        }
    }

    #[test]
    fn an_escaped_value_has_no_control_left() {
        let all: String = (0u32..0x3000).filter_map(char::from_u32).collect();
        let out = escape(&all);
        assert!(!out.contains(must_escape), "{out:?}");
        assert!(!out.contains('\n') && !out.contains('\r'));
    }

    #[test]
    fn nothing_to_escape_borrows() {
        assert!(matches!(escape("guid=G-1 code=0000"), Cow::Borrowed(_)));
    }

    #[test]
    fn the_writer_escapes_what_is_formatted_through_it() {
        let mut out = String::new();
        let value = String::from("x\ny");
        write!(Escaping(&mut out), "{value}|{:>4}", 7).unwrap();
        assert_eq!(out, "x\\ny|   7");
    }
}
