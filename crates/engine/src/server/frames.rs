//! Reading the channel's frames under the idle and frame timeouts.

use std::fmt;
use std::io::{self, BufReader, Read};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Why a connection ended other than by a clean close between frames.
#[derive(Debug)]
pub(super) enum ConnEnd {
    Idle,
    BadPrefix(String),
    FrameTimeout,
    EofMidFrame,
    Io(io::Error),
}

impl fmt::Display for ConnEnd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConnEnd::Idle => f.write_str("idle timeout"),
            ConnEnd::BadPrefix(why) => f.write_str(why),
            ConnEnd::FrameTimeout => f.write_str("frame not complete within the frame timeout"),
            ConnEnd::EofMidFrame => f.write_str("closed by the channel in the middle of a frame"),
            ConnEnd::Io(e) => e.fmt(f),
        }
    }
}

pub(super) fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// Reads one frame from `r`, a reader over `sock` (the socket itself, or a TLS session on
/// it): the timeouts are set on `sock`. `Ok(None)`: the channel closed cleanly between
/// frames. The idle timeout runs until a frame's first byte; from then on the whole frame
/// has `frame_timeout`.
pub(super) fn read_frame<R: Read>(
    r: &mut BufReader<R>,
    sock: &TcpStream,
    idle: Duration,
    frame: Duration,
) -> Result<Option<Vec<u8>>, ConnEnd> {
    if r.buffer().is_empty() {
        sock.set_read_timeout(Some(idle)).map_err(ConnEnd::Io)?;
        loop {
            match io::BufRead::fill_buf(r) {
                Ok([]) => return Ok(None),
                Ok(_) => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // A TLS channel that closes its socket between frames without a
                // close_notify: as clean as a plain channel's close (a socket never says it).
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
                Err(e) if is_timeout(&e) => return Err(ConnEnd::Idle),
                Err(e) => return Err(ConnEnd::Io(e)),
            }
        }
    }
    let mut by_deadline = Deadline {
        r,
        sock,
        at: Instant::now() + frame,
    };
    wire::read_frame(&mut by_deadline)
        .map(Some)
        .map_err(|e| match e.kind() {
            io::ErrorKind::UnexpectedEof => ConnEnd::EofMidFrame,
            io::ErrorKind::InvalidData => ConnEnd::BadPrefix(e.to_string()),
            _ if is_timeout(&e) => ConnEnd::FrameTimeout,
            _ => ConnEnd::Io(e),
        })
}

/// A reader whose every read must end by `at`: before each read that must wait for the
/// socket, the socket's timeout is set to what is left.
pub(super) struct Deadline<'a, R> {
    pub(super) r: &'a mut BufReader<R>,
    pub(super) sock: &'a TcpStream,
    pub(super) at: Instant,
}

impl<R: Read> Read for Deadline<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.r.buffer().is_empty() {
            let left = self.at.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(io::ErrorKind::TimedOut.into());
            }
            self.sock.set_read_timeout(Some(left))?;
        }
        self.r.read(buf)
    }
}
