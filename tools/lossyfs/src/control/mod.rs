//! The control socket: a Unix stream socket; per connection one command line, one reply
//! line, then the connection is closed. After a drop it stops serving.

mod command;

pub use command::Command;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};

use crate::model::DropReport;
use crate::state::Shared;

/// How a drop ended.
#[derive(Debug)]
pub enum Dropped {
    /// The drop was done and answered.
    Done(DropReport),
    /// Reverting failed (the backing folder may be half reverted).
    Failed(std::io::Error),
}

/// Serves `listener` until a drop has been done; returns how it ended.
pub fn serve(listener: &UnixListener, state: &Shared) -> Dropped {
    loop {
        let Ok((stream, _)) = listener.accept() else {
            continue;
        };
        if let Some(dropped) = handle(stream, state) {
            return dropped;
        }
    }
}

/// Answers one connection; returns the outcome of a drop if it was one.
fn handle(stream: UnixStream, state: &Shared) -> Option<Dropped> {
    let mut line = String::new();
    let mut reader = BufReader::new(&stream);
    if reader.read_line(&mut line).is_err() {
        return None;
    }
    let (reply, dropped) = match Command::parse(line.trim_end_matches(['\n', '\r'])) {
        Ok(Command::Stats) => (state.stats().to_string(), None),
        Ok(Command::Freeze) => {
            state.freeze();
            ("frozen".to_string(), None)
        }
        Ok(Command::Drop { mode, seed }) => match state.drop_unsynced(mode, seed) {
            Ok(report) => (report.to_string(), Some(Dropped::Done(report))),
            Err(e) => (format!("error reverting: {e}"), Some(Dropped::Failed(e))),
        },
        Err(message) => (format!("error {message}"), None),
    };
    let mut writer = &stream;
    let _ = writeln!(writer, "{reply}");
    let _ = writer.flush();
    dropped
}
