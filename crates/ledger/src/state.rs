//! The life of a GUID in the ledger: its state, its row, and a change from one state to
//! another.

use std::fmt;
use std::str::FromStr;

use wire::Code;

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
    /// The channel that claimed the GUID (contract §8: its client certificate's CN); `None`
    /// for anonymous channels and rows inserted by hand.
    pub channel: Option<String>,
}

/// Evidence for a GUID's history that changes nothing in its `tx` row: what an investigator
/// needs when the core may have booked the GUID twice (the booking of an earlier attempt
/// that came back after a later attempt had claimed the row). Recorded as a history row
/// whose from- and to-state are the row's state as it is (nothing moved), with `attempt`
/// the earlier attempt and `rsp_code` its result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Evidence {
    pub guid: String,
    pub attempt: i64,
    pub rsp_code: String,
    pub reason: String,
}

/// One change of a `tx` row as its history (`tx_history`) records it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct HistoryRow {
    pub id: i64,
    pub guid: String,
    /// `None`: the row was inserted.
    pub from_state: Option<String>,
    /// `None`: the row was deleted.
    pub to_state: Option<String>,
    pub rsp_code: Option<String>,
    pub attempts: Option<i64>,
    /// UTC, `YYYY-MM-DD HH:MM:SS.mmm`.
    pub at: String,
    /// `relay`, `resolve`, `reprocess`, `purge`, `migrate`, `operator:NAME`, `sql`, …
    pub who: String,
    pub reason: Option<String>,
    /// The row's channel at this change.
    pub channel: Option<String>,
}

/// One guarded transition: `guid` moves from `from` to `to` with its result code and reply,
/// if it is still in `from` and, when `attempt` is given, still on that claim (its
/// `attempts` column), and, when `min_age_secs` is given, unchanged for that long. A change
/// that names its attempt can never land on a later claim of the same GUID.
///
/// `who` and `reason` go to the row's history (`tx_history`): `who` defaults to the program
/// that opened the store (`relay`, `resolve`, …); an operator's settlement says
/// `operator:NAME`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub guid: String,
    pub from: State,
    pub attempt: Option<i64>,
    pub to: State,
    pub code: Code,
    pub response: Vec<u8>,
    pub min_age_secs: Option<u64>,
    pub who: Option<String>,
    pub reason: Option<String>,
}

impl Change {
    pub fn new(
        guid: &str,
        from: State,
        attempt: Option<i64>,
        to: State,
        code: Code,
        response: Vec<u8>,
    ) -> Change {
        Change {
            guid: guid.to_string(),
            from,
            attempt,
            to,
            code,
            response,
            min_age_secs: None,
            who: None,
            reason: None,
        }
    }

    /// The reason the history records for this change.
    pub fn because(mut self, reason: impl Into<String>) -> Change {
        self.reason = Some(reason.into());
        self
    }

    /// Who the history names instead of the program (an operator).
    pub fn by(mut self, who: impl Into<String>) -> Change {
        self.who = Some(who.into());
        self
    }

    /// Only if the row has not changed for `secs` seconds.
    pub fn if_unchanged_for(mut self, secs: u64) -> Change {
        self.min_age_secs = Some(secs);
        self
    }

    /// The result code as text (codes are ASCII by construction).
    pub fn code_str(&self) -> &str {
        std::str::from_utf8(&self.code).unwrap_or("????")
    }
}
