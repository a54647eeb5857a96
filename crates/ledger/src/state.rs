//! The life of a GUID in the ledger: its state, its row, and a change from one state to
//! another.

use std::fmt;
use std::str::FromStr;

use crate::wire::Code;

/// The life of a GUID in the ledger. `RECEIVED` is never written by our tools but is part of
/// the contract's schema (another tool may insert it), and is treated like `SENT`: in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum State {
    Received,
    Sent,
    Done,
    Unknown,
    Failed,
}

impl State {
    pub const ALL: [State; 5] = [
        State::Received,
        State::Sent,
        State::Done,
        State::Unknown,
        State::Failed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            State::Received => "RECEIVED",
            State::Sent => "SENT",
            State::Done => "DONE",
            State::Unknown => "UNKNOWN",
            State::Failed => "FAILED",
        }
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl serde::Serialize for State {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl FromStr for State {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        State::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| format!("unknown ledger state {s:?}"))
    }
}

/// One ledger row as stored. Every column but guid, state and updated_at may be NULL in a
/// row inserted by hand, so they are `Option`s, and values of an unexpected SQL type are
/// read leniently (text as bytes, bytes as text) rather than failing the whole query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub guid: String,
    pub tx_code: Option<String>,
    pub state: State,
    pub rsp_code: Option<String>,
    pub request: Option<Vec<u8>>,
    pub response: Option<Vec<u8>>,
    pub attempts: Option<i64>,
    pub updated_at: String,
}

/// One guarded transition: `guid` moves from `from` to `to` with its result code and reply,
/// if it is still in `from` and, when `attempt` is given, still on that claim (its
/// `attempts` column). A change that names its attempt can never land on a later claim of
/// the same GUID.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub guid: String,
    pub from: State,
    pub attempt: Option<i64>,
    pub to: State,
    pub code: Code,
    pub response: Vec<u8>,
}

impl Change {
    /// The result code as text (codes are ASCII by construction).
    pub fn code_str(&self) -> &str {
        std::str::from_utf8(&self.code).unwrap_or("????")
    }
}
