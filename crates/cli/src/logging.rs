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

use std::fmt::Write as _;
use std::io::{self, Write};
use std::sync::OnceLock;

use env_logger::fmt::Formatter;
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
    write!(
        buf,
        "[{} {style}{:<5}{style:#} {}] {}",
        buf.timestamp_millis(),
        record.level(),
        record.target(),
        record.args()
    )?;
    let mut fields = TextFields {
        out: String::new(),
        first: record.args().as_str() == Some(""),
    };
    record
        .key_values()
        .visit(&mut fields)
        .map_err(io::Error::other)?;
    writeln!(buf, "{}", fields.out)
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
        let _ = write!(self.out, "{sep}{key}={value}");
        Ok(())
    }
}

fn write_json(buf: &mut Formatter, record: &Record<'_>) -> io::Result<()> {
    let mut fields = JsonFields(String::new());
    record
        .key_values()
        .visit(&mut fields)
        .map_err(io::Error::other)?;
    let line = json_line(
        record.level(),
        record.target(),
        &record.args().to_string(),
        &fields.0,
    );
    writeln!(buf, "{line}")
}

/// The four keys every JSON line has.
const RESERVED: [&str; 4] = ["timestamp", "level", "target", "message"];

/// Fields already encoded as `,"key":value…`.
struct JsonFields(String);

impl<'kvs> VisitSource<'kvs> for JsonFields {
    fn visit_pair(&mut self, key: Key<'kvs>, value: Value<'kvs>) -> Result<(), kv::Error> {
        let key = key.as_str();
        let key = if RESERVED.contains(&key) {
            format!("field.{key}")
        } else {
            key.to_string()
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
            json_string(&value.to_string())
        };
        let _ = write!(self.0, ",{}:{value}", json_string(&key));
        Ok(())
    }
}

fn json_string(s: &str) -> String {
    serde_json::Value::from(s).to_string()
}

/// One JSON log line (without newline); `fields` is `,"key":value…` or empty.
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
        json_string(target),
        json_string(message)
    )
}

/// A line the tool writes itself on stderr, not through `log` (never filtered by
/// `RUST_LOG`). Text: `tool: warning: message` for a warning, `tool: message` otherwise, as
/// the tools always wrote them; JSON: one object with `target` the tool's name.
pub fn stderr_line(tool: &str, level: Level, message: &str) {
    let line = match format() {
        LogFormat::Text if level == Level::Warn => format!("{tool}: warning: {message}"),
        LogFormat::Text => format!("{tool}: {message}"),
        LogFormat::Json => json_line(level, tool, message, ""),
    };
    let mut err = io::stderr().lock();
    let _ = writeln!(err, "{line}");
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
}
