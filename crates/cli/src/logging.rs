//! Log lines on stderr, `--log-format text` (the default) or `json`.
//!
//! Both come from the same `log` calls: a line's fields are the record's key-values (the
//! relay's per-request line is `info!(guid = …, code = …, state = …, ms = …; "")`). Text is
//! env_logger's usual header, the message, then ` key=value` per field (without the leading
//! space when there is no message, so the request line stays `guid=… code=… state=… ms=…`).
//! JSON is one object a line: `timestamp` (UTC, milliseconds), `level`, `target`, `message`,
//! then each field under its own key (numbers and booleans as such, anything else a string;
//! a field named like one of the four is written as `field.NAME`).
//!
//! Lines a tool writes itself rather than through `log` (a warning before the run, the
//! one-line fatal error) go through `stderr_line`, which follows the same format.
//!
//! In both formats the message, every key and every value are escaped (`escape`): a
//! newline, a carriage return, ESC and the other controls never reach stderr raw, but as
//! `\n`, `\r`, `\u{1b}`…, so that no value, a peer's among them, can start a line of its
//! own. In JSON the escaped text is then JSON-encoded: a consumer that decodes a line and
//! prints its message (`jq -r`) sees the same visible escapes as the text format shows.

mod escape;

use std::fmt::Write as _;
use std::io::{self, Write};
use std::sync::OnceLock;

use env_logger::fmt::Formatter;
use escape::{Escaping, escape};
use log::kv::{self, Key, Value, VisitSource};
use log::{Level, Record};
use time::OffsetDateTime;
use time::macros::format_description;

/// How the tools write their log lines on stderr.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// `[timestamp LEVEL target] message key=value…`, the timestamp UTC with milliseconds.
    #[default]
    Text,
    /// One JSON object a line: timestamp, level, target, message, and the fields.
    Json,
}

static FORMAT: OnceLock<LogFormat> = OnceLock::new();

/// The format set by `init` (text before it).
pub fn format() -> LogFormat {
    FORMAT.get().copied().unwrap_or_default()
}

/// Sets up the logger on stderr: `RUST_LOG` sets the level (default `info`).
pub fn init(fmt: LogFormat) {
    let _ = FORMAT.set(fmt);
    let mut b = env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info"));
    match fmt {
        LogFormat::Text => b.format(write_text),
        LogFormat::Json => b.format(write_json),
    };
    let _ = b.try_init();
}

fn write_text(buf: &mut Formatter, record: &Record<'_>) -> io::Result<()> {
    let style = buf.default_level_style(record.level());
    let text = text_after_header(record).map_err(io::Error::other)?;
    writeln!(
        buf,
        "[{} {style}{:<5}{style:#} {}] {text}",
        buf.timestamp_millis(),
        record.level(),
        escape(record.target()),
    )
}

/// What a text line has after its `[timestamp LEVEL target] ` header: the message, then
/// ` key=value` per field, all escaped.
fn text_after_header(record: &Record<'_>) -> Result<String, kv::Error> {
    let mut message = String::new();
    let _ = write!(Escaping(&mut message), "{}", record.args());
    let mut fields = TextFields {
        first: message.is_empty(),
        out: message,
    };
    record.key_values().visit(&mut fields)?;
    Ok(fields.out)
}

struct TextFields {
    out: String,
    first: bool,
}

impl<'kvs> VisitSource<'kvs> for TextFields {
    fn visit_pair(&mut self, key: Key<'kvs>, value: Value<'kvs>) -> Result<(), kv::Error> {
        let sep = if std::mem::take(&mut self.first) {
            ""
        } else {
            " "
        };
        self.out.push_str(sep);
        let _ = write!(Escaping(&mut self.out), "{key}={value}");
        Ok(())
    }
}

fn write_json(buf: &mut Formatter, record: &Record<'_>) -> io::Result<()> {
    let mut fields = JsonFields(String::new());
    record
        .key_values()
        .visit(&mut fields)
        .map_err(io::Error::other)?;
    let message = record.args().to_string();
    let line = json_line(record.level(), record.target(), &message, &fields.0);
    writeln!(buf, "{line}")
}

/// The four keys every JSON line has.
const RESERVED: [&str; 4] = ["timestamp", "level", "target", "message"];

/// Fields already encoded as `,"key":value…`.
struct JsonFields(String);

impl<'kvs> VisitSource<'kvs> for JsonFields {
    fn visit_pair(&mut self, key: Key<'kvs>, value: Value<'kvs>) -> Result<(), kv::Error> {
        let key = escape(key.as_str());
        let key = if RESERVED.contains(&key.as_ref()) {
            format!("field.{key}")
        } else {
            key.into_owned()
        };
        let value = if let Some(b) = value.to_bool() {
            b.to_string()
        } else if let Some(n) = value.to_u64() {
            n.to_string()
        } else if let Some(n) = value.to_i64() {
            n.to_string()
        } else if let Some(x) = value.to_f64().filter(|x| x.is_finite()) {
            serde_json::Value::from(x).to_string()
        } else {
            json_string(&escape(&value.to_string()))
        };
        let _ = write!(self.0, ",{}:{value}", json_string(&key));
        Ok(())
    }
}

fn json_string(s: &str) -> String {
    serde_json::Value::from(s).to_string()
}

/// One JSON log line (without newline); `fields` is `,"key":value…` or empty, its keys and
/// values already escaped. The target and the message are escaped here.
fn json_line(level: Level, target: &str, message: &str, fields: &str) -> String {
    let ts = OffsetDateTime::now_utc()
        .format(format_description!(
            "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
        ))
        .unwrap_or_default();
    format!(
        "{{\"timestamp\":{},\"level\":{},\"target\":{},\"message\":{}{fields}}}",
        json_string(&ts),
        json_string(level.as_str()),
        json_string(&escape(target)),
        json_string(&escape(message))
    )
}

/// A line the tool writes itself on stderr, not through `log` (never filtered by
/// `RUST_LOG`). Text: `tool: warning: message` for a warning, `tool: message` otherwise, as
/// the tools always wrote them; JSON: one object with `target` the tool's name.
pub fn stderr_line(tool: &str, level: Level, message: &str) {
    let line = own_line(format(), tool, level, message);
    let mut err = io::stderr().lock();
    let _ = writeln!(err, "{line}");
}

/// The text of `stderr_line` in `fmt`, the message escaped: a fatal error may quote what a
/// peer or a file said.
fn own_line(fmt: LogFormat, tool: &str, level: Level, message: &str) -> String {
    match fmt {
        LogFormat::Text if level == Level::Warn => {
            format!("{tool}: warning: {}", escape(message))
        }
        LogFormat::Text => format!("{tool}: {}", escape(message)),
        LogFormat::Json => json_line(level, tool, message, ""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use log::kv::Source;
    use time::format_description::well_known::Rfc3339;

    #[test]
    fn a_json_line_has_the_four_keys_then_the_fields() {
        let mut fields = JsonFields(String::new());
        let kvs: &[(&str, Value<'_>)] = &[
            ("guid", Value::from("G-1")),
            ("ms", Value::from(12u64)),
            ("message", Value::from("x\"y")),
            ("ok", Value::from(true)),
        ];
        kvs.visit(&mut fields).unwrap();
        let line = json_line(Level::Info, "engine::server", "", &fields.0);
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["level"], "INFO");
        assert_eq!(v["target"], "engine::server");
        assert_eq!(v["message"], "");
        assert_eq!(v["guid"], "G-1");
        assert_eq!(v["ms"], 12);
        assert_eq!(v["field.message"], "x\"y");
        assert_eq!(v["ok"], true);
        let ts = v["timestamp"].as_str().unwrap();
        assert!(OffsetDateTime::parse(ts, &Rfc3339).is_ok(), "{ts}");
        assert!(
            ts.ends_with('Z') && ts.len() == "2026-01-31T23:59:59.123Z".len(),
            "{ts}"
        );
        assert!(line.starts_with("{\"timestamp\":"), "{line}");
    }

    #[test]
    fn text_fields_follow_the_message_or_stand_alone() {
        let kvs: &[(&str, Value<'_>)] = &[("guid", Value::from("G")), ("ms", Value::from(3u64))];
        for (first, want) in [(true, "guid=G ms=3"), (false, " guid=G ms=3")] {
            let mut f = TextFields {
                out: String::new(),
                first,
            };
            kvs.visit(&mut f).unwrap();
            assert_eq!(f.out, want);
        }
    }

    /// What a peer might send, for example as an HTTP body's member name.
    const FORGED: &str = "x\nWARN engine::double_booking fake\r\u{1b}[2K\u{85}\u{2028}";

    #[test]
    fn a_text_line_escapes_its_message_keys_and_values() {
        let kvs: &[(&str, Value<'_>)] = &[
            ("guid", Value::from("G")),
            ("detail", Value::from(FORGED)),
            ("bad\nkey", Value::from(1u64)),
        ];
        // One statement: `format_args!`'s temporaries live until its end.
        let text = text_after_header(
            &Record::builder()
                .args(format_args!("told {}", "a\nb"))
                .key_values(&kvs)
                .build(),
        )
        .unwrap();
        assert_eq!(
            text,
            "told a\\nb guid=G detail=x\\nWARN engine::double_booking fake\\r\\u{1b}[2K\\u{85}\\u{2028} \
             bad\\nkey=1"
        );
        // The per-request line, without a message, starts with its first field.
        let guid_only = &kvs[..1];
        let quiet = text_after_header(
            &Record::builder()
                .args(format_args!(""))
                .key_values(&guid_only)
                .build(),
        );
        assert_eq!(quiet.unwrap(), "guid=G");
    }

    #[test]
    fn a_json_line_stays_one_line_and_its_values_decode_to_visible_escapes() {
        let mut fields = JsonFields(String::new());
        let kvs: &[(&str, Value<'_>)] =
            &[("detail", Value::from(FORGED)), ("n", Value::from(3u64))];
        kvs.visit(&mut fields).unwrap();
        let line = json_line(Level::Info, "engine::server", "a\u{2029}b", &fields.0);
        assert!(!line.contains(['\n', '\r', '\u{1b}', '\u{85}', '\u{2028}', '\u{2029}']));
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        // Decoded (as `jq -r` would print it), the value still shows its escapes.
        assert_eq!(
            v["detail"],
            "x\\nWARN engine::double_booking fake\\r\\u{1b}[2K\\u{85}\\u{2028}"
        );
        assert_eq!(v["message"], "a\\u{2029}b");
        assert_eq!(v["n"], 3);
    }

    #[test]
    fn a_line_of_the_tool_itself_is_escaped_in_both_formats() {
        let text = own_line(LogFormat::Text, "relay", Level::Warn, FORGED);
        assert!(text.starts_with("relay: warning: x\\nWARN"), "{text}");
        assert_eq!(text.lines().count(), 1);
        let fatal = own_line(LogFormat::Text, "relay", Level::Error, "a\nb");
        assert_eq!(fatal, "relay: a\\nb");
        let json = own_line(LogFormat::Json, "relay", Level::Error, FORGED);
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert!(!v["message"].as_str().unwrap().contains('\n'), "{v}");
    }
}
