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

/// A connection's two read timeouts, and whether the socket's is the idle one now (so that
/// a channel that sends frame after frame costs no `setsockopt` per frame).
pub(super) struct Timeouts {
    idle: Duration,
    frame: Duration,
    /// The socket's read timeout is `idle` (set by the last frame's wait and not changed
    /// since).
    idle_set: bool,
}

impl Timeouts {
    pub(super) fn new(idle: Duration, frame: Duration) -> Timeouts {
        Timeouts {
            idle,
            frame,
            idle_set: false,
        }
    }
}

/// Reads one frame from `r`, a reader over `sock` (the socket itself, or a TLS session on
/// it): the timeouts are set on `sock`. `Ok(None)`: the channel closed cleanly between
/// frames. The idle timeout runs until a frame's first byte; from then on the whole frame
/// has the frame timeout.
pub(super) fn read_frame<R: Read>(
    r: &mut BufReader<R>,
    sock: &TcpStream,
    t: &mut Timeouts,
) -> Result<Option<Vec<u8>>, ConnEnd> {
    if r.buffer().is_empty() {
        if !t.idle_set {
            sock.set_read_timeout(Some(t.idle)).map_err(ConnEnd::Io)?;
            t.idle_set = true;
        }
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
        at: Instant::now() + t.frame,
        idle_set: &mut t.idle_set,
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
    /// Cleared when this reader changes the socket's read timeout.
    pub(super) idle_set: &'a mut bool,
}

impl<R: Read> Read for Deadline<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.r.buffer().is_empty() {
            let left = self.at.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(io::ErrorKind::TimedOut.into());
            }
            *self.idle_set = false;
            self.sock.set_read_timeout(Some(left))?;
        }
        self.r.read(buf)
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::net::TcpListener;
    use std::thread;

    use super::*;

    /// The idle timeout is set once, not per frame, so a frame that had to wait for its
    /// rest (and set the frame deadline on the socket) must put the idle timeout back: the
    /// silence after it is idle, closed at the idle timeout, not at what was left of the
    /// frame's.
    #[test]
    fn after_a_frame_that_arrived_in_pieces_silence_is_idle_again() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (sock, _) = listener.accept().unwrap();
        let frame = wire::frame(b"hello");
        let sender = thread::spawn(move || {
            for piece in [&frame[..], &frame[..2]] {
                client.write_all(piece).unwrap();
            }
            thread::sleep(Duration::from_millis(100));
            client.write_all(&frame[2..]).unwrap();
            client // kept open, silent
        });
        let mut r = BufReader::new(&sock);
        let mut t = Timeouts::new(Duration::from_millis(300), Duration::from_secs(30));
        for _ in 0..2 {
            let got = read_frame(&mut r, &sock, &mut t).unwrap();
            assert_eq!(got.as_deref(), Some(&b"hello"[..]));
        }
        let _client = sender.join().unwrap();
        let waited = Instant::now();
        assert!(matches!(
            read_frame(&mut r, &sock, &mut t),
            Err(ConnEnd::Idle)
        ));
        assert!(
            waited.elapsed() < Duration::from_secs(5),
            "{:?}",
            waited.elapsed()
        );
    }
}
