//! The frames door (contract §2): a connection's frames read in order under their deadlines
//! (`frames`), each answered by `engine::transfer` before the next is read.

use std::io::{BufReader, Read, Write};
use std::time::Instant;

use engine::transfer;

use crate::Shared;
use crate::accept::Door;
use crate::access_log::{log_request, peer_label};
use crate::frames::{ConnEnd, Timeouts, read_frame};
use crate::registry::Conn;

/// Reads frames from `reader` (over `conn`'s socket) and answers each in turn, until the
/// channel closes, a frame is bad or late, the relay stops, or a reload refuses the
/// channel's certificate.
pub(crate) fn serve_frames<S: Read + Write>(
    shared: &Shared,
    conn: &Conn<'_>,
    reader: &mut BufReader<S>,
) -> Result<(), ConnEnd> {
    let cfg = &shared.config;
    let peer = peer_label(conn.entry);
    let channel = conn.channel;
    let timeouts = Timeouts {
        idle: cfg.idle_timeout,
        frame: cfg.frame_timeout,
    };
    while let Some(msg) = read_frame(reader, conn.clock, &timeouts)? {
        if conn.refused() {
            break;
        }
        let started = Instant::now();
        let handled = transfer::handle_in(
            shared.store.as_ref(),
            &shared.core,
            &shared.events,
            shared.recovery.mode(),
            channel,
            &msg,
        );
        shared
            .metrics
            .request(&handled.code, channel, Door::Tcp.as_str());
        log_request(&handled, &peer, channel, started.elapsed(), Door::Tcp);
        let out = reader.get_mut();
        out.write_all(&wire::frame(&handled.reply))
            .and_then(|()| out.flush())
            .map_err(ConnEnd::Io)?;
        if shared.stopping() || conn.refused() {
            break;
        }
    }
    Ok(())
}
