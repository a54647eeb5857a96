//! What the tools print on stdout, written so that a reader that has gone ends nothing badly.
//!
//! `println!` panics when its write fails. Rust ignores SIGPIPE, so once a reader such as
//! `head -1` has what it wants and exits, every later write fails with a broken pipe, and
//! `inspect … | head -1` or `reconcile … | head` ended in a panic (exit 101, a panic message
//! on stderr). A reader that has seen enough is not a failure of the run: from the first
//! broken pipe on, what a tool prints is dropped, and the tool ends as it would have, with
//! its run's exit code (docs/tools.md). Any other write error (a full disk under `> file`)
//! also stops the printing, and the run then ends as a fatal one (exit 1, one line on
//! stderr): output cut short must not pass for a whole one.
//!
//! Every tool prints through here: `print_report`, the `--json` objects of `failure`, and
//! the lines a tool writes itself (`outln!`).

use std::fmt;
use std::io::{self, ErrorKind, Write};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once stdout failed: later lines are dropped.
static CLOSED: AtomicBool = AtomicBool::new(false);

/// The write error that was not a broken pipe, until the run's end takes it.
static FAILED: Mutex<Option<io::Error>> = Mutex::new(None);

/// Prints a line on stdout as `println!` does (`cli::outln!("…", …)`), but never panics: see
/// the module's text.
#[macro_export]
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::print_args(format_args!($($arg)*))
    };
}

/// Writes `args` and a newline on stdout, flushed; nothing once stdout has failed.
pub fn print_args(args: fmt::Arguments<'_>) {
    if CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut out = io::stdout().lock();
    let written = out
        .write_fmt(args)
        .and_then(|()| out.write_all(b"\n"))
        .and_then(|()| out.flush());
    if let Err(e) = written {
        CLOSED.store(true, Ordering::Relaxed);
        if e.kind() != ErrorKind::BrokenPipe {
            FAILED
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get_or_insert(e);
        }
    }
}

/// The error that stopped stdout, unless it was a broken pipe (taken: said once).
pub(crate) fn take_failure() -> Option<io::Error> {
    FAILED.lock().unwrap_or_else(|e| e.into_inner()).take()
}
