//! Parsing a tool's flags with the refusals clap does not make by itself: a negative number
//! (clap would call `-1` an unexpected argument), and an empty value, given on the command
//! line (`--db ''`) or by an environment twin set to nothing (`RELAY_LISTEN=`). Each is a
//! usage error (exit 2) naming the flag, or the variable, in clap's own format. And clap's
//! own errors about a value an environment twin gave (`RESOLVE_MIN_AGE=abc`) name the
//! variable, not a flag the command line does not hold.

use std::ffi::{OsStr, OsString};

use clap::error::ErrorKind;
use clap::parser::ValueSource;
use clap::{ArgMatches, Command, Parser};

/// The tool's flags from its command line and environment; a usage error exits 2.
pub fn parse<T: Parser>() -> T {
    parse_from(std::env::args_os())
}

/// [`parse`] from the given arguments (the first is the program's name).
/// With `--json` on the command line, a usage error also prints the failure object on
/// stdout, and so does a later failure of the run (`crate::main`).
/// First, with `TXRELAY_GENERATE=DIR`, the tool writes its man pages and completions there
/// and exits ([`crate::generate_if_asked`]).
pub fn parse_from<T: Parser, I: IntoIterator<Item = S>, S: Into<OsString>>(argv: I) -> T {
    crate::generate_if_asked::<T>();
    let argv: Vec<OsString> = argv.into_iter().map(Into::into).collect();
    crate::failure::note_json(&argv);
    try_parse_from(argv).unwrap_or_else(|e| crate::usage_exit(e, T::command().get_name()))
}

/// [`parse_from`], returning the usage error instead of exiting.
pub fn try_parse_from<T: Parser, I: IntoIterator<Item = S>, S: Into<OsString>>(
    argv: I,
) -> Result<T, clap::Error> {
    let argv: Vec<OsString> = argv.into_iter().map(Into::into).collect();
    let mut cmd = T::command();
    cmd.build();
    if let Some(message) = negative_value(&cmd, &argv).or_else(|| empty_env(&cmd, &argv)) {
        return Err(cmd.error(ErrorKind::InvalidValue, message));
    }
    let matches = match cmd.try_get_matches_from_mut(argv.clone()) {
        Ok(matches) => matches,
        Err(e) => return Err(name_twins(&mut cmd, &argv, e)),
    };
    if let Some(message) = empty_value(&cmd, &matches) {
        return Err(cmd.error(ErrorKind::InvalidValue, message));
    }
    T::from_arg_matches(&matches).map_err(|e| {
        let e = e.format(&mut cmd);
        name_twins(&mut cmd, &argv, e)
    })
}

/// Whether `--long` is on the command line (`--long VALUE` or `--long=VALUE`). No flag of
/// ours has a short form.
fn on_command_line(argv: &[OsString], long: &str) -> bool {
    argv.iter().skip(1).any(|a| {
        a.to_string_lossy()
            .strip_prefix("--")
            .is_some_and(|f| f == long || f.strip_prefix(long).is_some_and(|v| v.starts_with('=')))
    })
}

/// A flag whose value came from its environment twin: not on the command line, its
/// variable set.
struct Twin {
    /// The flag as clap's errors show it (`--min-age <MIN_AGE>`).
    shown: String,
    /// The variable (`RESOLVE_MIN_AGE`).
    var: String,
    /// Its value.
    value: OsString,
    /// `--min-age`.
    long: String,
}

impl Twin {
    /// How an error names it: `RESOLVE_MIN_AGE (it stands for --min-age)`.
    fn named(&self) -> String {
        format!("{} (it stands for {})", self.var, self.long)
    }
}

/// The flags of `cmd` and its subcommands whose value came from their environment twin.
fn twins_used(cmd: &Command, argv: &[OsString]) -> Vec<Twin> {
    let mut used: Vec<Twin> = cmd
        .get_arguments()
        .filter_map(|a| {
            let (var, long) = (a.get_env()?, a.get_long()?);
            let value = std::env::var_os(var).filter(|_| !on_command_line(argv, long))?;
            Some(Twin {
                shown: a.to_string(),
                var: var.to_string_lossy().into_owned(),
                value,
                long: format!("--{long}"),
            })
        })
        .collect();
    for sub in cmd.get_subcommands() {
        used.extend(twins_used(sub, argv));
    }
    used
}

/// Clap's error `e` with every flag whose value came from its environment twin named as the
/// variable (`invalid value 'abc' for RESOLVE_MIN_AGE (it stands for --min-age): …`, as
/// `--core`'s own refusal and [`empty_env`] say it): clap names the flag, which sends the
/// operator to a command line that has no such flag. Clap's "invalid UTF-8" names nothing:
/// when the command line is UTF-8, the twins whose value is not are named. `e` as it was
/// when no twin is to blame.
fn name_twins(cmd: &mut Command, argv: &[OsString], e: clap::Error) -> clap::Error {
    if e.exit_code() == 0 {
        return e; // --help, --version
    }
    let twins = twins_used(cmd, argv);
    if e.kind() == ErrorKind::InvalidUtf8 {
        let not_utf8: Vec<String> = twins
            .iter()
            .filter(|t| t.value.to_str().is_none())
            .map(Twin::named)
            .collect();
        if not_utf8.is_empty() || argv.iter().any(|a| a.to_str().is_none()) {
            return e;
        }
        let message = format!("invalid UTF-8 in {}", not_utf8.join(", "));
        return cmd.error(e.kind(), message);
    }
    // Clap's message without its styles, up to the usage and the pointer to --help, which
    // `cmd.error` adds again.
    let text = e.to_string();
    let first = text.split("\n\n").next().unwrap_or_default();
    let first = first.strip_prefix("error: ").unwrap_or(first);
    let mut message = first.to_string();
    for twin in &twins {
        message = message.replace(&format!("'{}'", twin.shown), &twin.named());
    }
    if message == first {
        return e;
    }
    cmd.error(e.kind(), message)
}

/// `--flag -1` or `--flag=-1` for a flag that takes a value: no flag of ours takes a
/// negative number.
fn negative_value(cmd: &Command, argv: &[OsString]) -> Option<String> {
    let mut args = argv.iter().skip(1).map(|a| a.to_string_lossy());
    while let Some(arg) = args.next() {
        if arg == "--" {
            break;
        }
        let Some(long) = arg.strip_prefix("--") else {
            continue;
        };
        let (name, inline) = match long.split_once('=') {
            Some((name, value)) => (name.to_string(), Some(value.to_string())),
            None => (long.to_string(), None),
        };
        if !takes_value(cmd, &name) {
            continue;
        }
        let value = match inline {
            Some(value) => value,
            None => match args.next() {
                Some(value) => value.into_owned(),
                None => break,
            },
        };
        if is_negative_number(&value) {
            return Some(format!(
                "invalid value '{value}' for '--{name}': negative numbers are not allowed"
            ));
        }
    }
    None
}

fn is_negative_number(value: &str) -> bool {
    value
        .strip_prefix('-')
        .is_some_and(|rest| rest.parse::<f64>().is_ok())
}

/// Whether `--name` is a flag of `cmd` or of one of its subcommands that takes a value.
fn takes_value(cmd: &Command, name: &str) -> bool {
    cmd.get_arguments().any(|a| {
        a.get_long() == Some(name) && a.get_action().takes_values() && a.get_num_args().is_some()
    }) || cmd.get_subcommands().any(|sub| takes_value(sub, name))
}

/// An environment twin set to nothing (`RELAY_LISTEN=`) for a flag not given on the command
/// line: clap would take the empty string as the value, and the error, if any, would name
/// the flag and not the variable.
fn empty_env(cmd: &Command, argv: &[OsString]) -> Option<String> {
    cmd.get_arguments()
        .filter_map(|a| Some((a.get_env()?, a.get_long()?)))
        .find(|(var, long)| {
            std::env::var_os(var).is_some_and(|v| v.is_empty()) && !on_command_line(argv, long)
        })
        .map(|(var, long)| {
            format!(
                "{} is set but empty (it stands for --{long}): set a value or unset it",
                var.to_string_lossy()
            )
        })
        .or_else(|| cmd.get_subcommands().find_map(|sub| empty_env(sub, argv)))
}

/// The first value given as empty on the command line (`--db ''`).
fn empty_value(cmd: &Command, matches: &ArgMatches) -> Option<String> {
    for arg in cmd.get_arguments() {
        let id = arg.get_id().as_str();
        if matches.value_source(id) != Some(ValueSource::CommandLine) {
            continue;
        }
        let Ok(Some(mut values)) = matches.try_get_raw(id) else {
            continue;
        };
        if values.any(OsStr::is_empty) {
            let flag = arg
                .get_long()
                .map_or_else(|| id.to_string(), |l| format!("--{l}"));
            return Some(format!(
                "invalid value '' for '{flag}': a value is required"
            ));
        }
    }
    let (name, sub_matches) = matches.subcommand()?;
    empty_value(cmd.find_subcommand(name)?, sub_matches)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Parser, Debug)]
    struct Args {
        #[arg(long, env = "PARSE_TEST_DB")]
        db: Option<String>,
        #[arg(long, default_value_t = 1)]
        days: u64,
        #[arg(long)]
        dry_run: bool,
        #[command(subcommand)]
        command: Option<Sub>,
    }

    #[derive(clap::Subcommand, Debug)]
    enum Sub {
        List {
            #[arg(long)]
            limit: Option<u64>,
        },
    }

    fn message(argv: &[&str]) -> String {
        try_parse_from::<Args, _, _>(argv).unwrap_err().to_string()
    }

    #[test]
    fn a_negative_number_names_its_flag() {
        for argv in [
            &["t", "--days", "-1"][..],
            &["t", "--days=-1"],
            &["t", "list", "--limit", "-5"],
        ] {
            let m = message(argv);
            assert!(m.contains("negative numbers are not allowed"), "{m}");
            assert!(m.contains("'--days'") || m.contains("'--limit'"), "{m}");
        }
        let e = try_parse_from::<Args, _, _>(["t", "--days", "-1"]).unwrap_err();
        assert_eq!(e.exit_code(), 2);
    }

    #[test]
    fn an_empty_value_names_its_flag() {
        let m = message(&["t", "--db", ""]);
        assert!(m.contains("invalid value '' for '--db'"), "{m}");
        let m = message(&["t", "list", "--limit="]);
        assert!(m.contains("--limit"), "{m}");
    }

    /// Flags whose twins are variables cargo sets for every test it runs (`cli`, `0.1.0`).
    #[derive(Parser, Debug)]
    struct Twins {
        #[arg(long, env = "CARGO_PKG_NAME")]
        count: Option<u64>,
        #[arg(long, env = "CARGO_PKG_VERSION", value_enum)]
        format: Option<crate::LogFormat>,
    }

    #[test]
    fn a_bad_value_from_a_twin_names_the_variable_and_from_the_flag_the_flag() {
        let name_of = |argv: &[&str]| try_parse_from::<Twins, _, _>(argv).unwrap_err();
        let e = name_of(&["t", "--format", "text"]);
        let m = e.to_string();
        assert_eq!(e.exit_code(), 2, "{m}");
        assert!(
            m.starts_with(
                "error: invalid value 'cli' for CARGO_PKG_NAME (it stands for --count): invalid \
                 digit"
            ),
            "{m}"
        );
        let m = name_of(&["t", "--count", "3"]).to_string();
        assert!(
            m.contains("for CARGO_PKG_VERSION (it stands for --format)"),
            "{m}"
        );
        assert!(m.contains("[possible values: text, json]"), "{m}");
        let m = name_of(&["t", "--count=x", "--format", "json"]).to_string();
        assert!(m.contains("invalid value 'x' for '--count <COUNT>'"), "{m}");
        assert!(!m.contains("CARGO_PKG_NAME"), "{m}");
    }

    #[test]
    fn good_values_and_switches_still_parse() {
        let a: Args = try_parse_from(["t", "--days", "7", "--dry-run", "--db", "x.db"]).unwrap();
        assert_eq!(
            (a.days, a.dry_run, a.db.as_deref()),
            (7, true, Some("x.db"))
        );
        let a: Args = try_parse_from(["t", "--db", "-"]).unwrap();
        assert_eq!(a.db.as_deref(), Some("-"));
        assert!(a.command.is_none());
    }
}
