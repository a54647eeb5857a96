//! `--json` when a run fails: every run with `--json` prints one JSON object on stdout, a
//! failed one included, `{"tool":…,"error":…,"exit":N,"exit_code":N}` (`exit_code` as in
//! the summary objects). The error's line still goes to stderr, as without `--json`.

use std::ffi::OsString;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::json;

static JSON: AtomicBool = AtomicBool::new(false);

/// Notes whether the command line asked for `--json` (before any `--`), so that a failure
/// before or after the flags are parsed can answer in JSON.
pub(crate) fn note_json(argv: &[OsString]) {
    let json = argv
        .iter()
        .skip(1)
        .take_while(|a| *a != "--")
        .any(|a| a == "--json");
    JSON.store(json, Ordering::Relaxed);
}

/// Whether failures are answered in JSON on stdout too.
pub fn json_failures() -> bool {
    JSON.load(Ordering::Relaxed)
}

/// The failure object, on stdout, if `--json` was asked for.
pub fn print_failure(tool: &str, error: &str, exit: u8) {
    if !json_failures() {
        return;
    }
    let v = json!({ "tool": tool, "error": error, "exit": exit, "exit_code": exit });
    crate::outln!("{v}");
}

/// What a run that builds its `--json` object by hand prints on stdout: `v` with the `tool`
/// and `exit_code` every tool's object carries (as `print_report` adds them), so that a
/// script reads any tool's answer alike. Returns `exit`.
pub fn print_object(tool: &str, mut v: serde_json::Value, exit: u8) -> u8 {
    if let Some(obj) = v.as_object_mut() {
        obj.insert("tool".into(), tool.into());
        obj.insert("exit_code".into(), exit.into());
    }
    crate::outln!("{v}");
    exit
}

/// A run that ends without doing its work, for a reason it found itself (not an error the run
/// returned): one line on stderr and, with `--json`, the failure object on stdout, so that a
/// script reading stdout gets one object on this path too. Returns `exit`, the run's code.
pub fn refuse_run(tool: &str, message: &str, exit: u8) -> u8 {
    crate::stderr_line(tool, log::Level::Error, message);
    print_failure(tool, message, exit);
    exit
}

/// Exits with a usage error (exit 2, clap's text on stderr); with `--json`, the failure
/// object on stdout first. `--help` and `--version` (exit 0) print as they always do.
pub fn usage_exit(e: clap::Error, tool: &str) -> ! {
    if e.exit_code() != 0 {
        let text = e.to_string();
        let first = text.lines().next().unwrap_or_default();
        let message = first.strip_prefix("error: ").unwrap_or(first);
        print_failure(tool, message, u8::try_from(e.exit_code()).unwrap_or(2));
    }
    e.exit()
}
