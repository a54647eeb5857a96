//! The access line: one per request, whichever door it came through, with the channel's
//! address and identity, the result code and state, and how long it took.

use std::net::TcpStream;
use std::time::Duration;

use engine::transfer;
use log::info;

use crate::accept::Door;
use crate::metrics::ANONYMOUS;

/// One line per request; the fields are key-values, so that `--log-format json` carries them
/// as keys and the text format prints `guid=… peer=… channel=… code=… state=… ms=…`, and for
/// an `E900` `detail=…`, the field and the rule it broke; then `door=tcp` or `door=http`.
pub(crate) fn log_request(
    handled: &transfer::Handled,
    peer: &str,
    channel: Option<&str>,
    took: Duration,
    door: Door,
) {
    log_answer(
        &handled.guid,
        &handled.code,
        handled.state.map_or("-", |s| s.as_str()),
        handled.detail,
        (peer, channel, took, door),
    );
}

/// The line of `log_request` from its parts (the HTTP door's E900 has no `Handled`).
pub(crate) fn log_answer(
    guid: &str,
    code: &[u8],
    state: &str,
    detail: Option<&str>,
    (peer, channel, took, door): (&str, Option<&str>, Duration, Door),
) {
    let channel = channel.unwrap_or(ANONYMOUS);
    let code = String::from_utf8_lossy(code);
    let ms = u64::try_from(took.as_millis()).unwrap_or(u64::MAX);
    let door = door.as_str();
    match detail {
        None => info!(guid, peer, channel, code:% = code, state, ms, door; ""),
        Some(detail) => info!(guid, peer, channel, code:% = code, state, ms, detail, door; ""),
    }
}

/// The channel's address as the request lines name it (`peer=`); `-` if unknown.
pub(crate) fn peer_label(sock: &TcpStream) -> String {
    sock.peer_addr()
        .map_or_else(|_| "-".to_string(), |a| a.to_string())
}
