//! Reading the channel's frames under the idle and frame timeouts.

use std::fmt;
use std::io::{self, BufReader, Read};
use std::time::{Duration, Instant};

use super::clock::{Clock, await_request};

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

/// A connection's two read timeouts.
pub(super) struct Timeouts {
    pub(super) idle: Duration,
    pub(super) frame: Duration,
}

/// Reads one frame from `r`, a reader over the connection's socket (the socket itself, or a
/// TLS session on it) whose reads `clock` bounds. `Ok(None)`: the channel closed cleanly
/// between frames. The idle timeout runs until a frame's first byte; from then on the whole
/// frame has the frame timeout, however many reads of the socket it takes.
pub(super) fn read_frame<R: Read>(
    r: &mut BufReader<R>,
    clock: &Clock,
    t: &Timeouts,
) -> Result<Option<Vec<u8>>, ConnEnd> {
    if !await_request(r, clock, t.idle)? {
        return Ok(None);
    }
    clock.until(Instant::now() + t.frame);
    wire::read_frame(r).map(Some).map_err(|e| match e.kind() {
        io::ErrorKind::UnexpectedEof => ConnEnd::EofMidFrame,
        io::ErrorKind::InvalidData => ConnEnd::BadPrefix(e.to_string()),
        _ if is_timeout(&e) => ConnEnd::FrameTimeout,
        _ => ConnEnd::Io(e),
    })
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::net::{TcpListener, TcpStream};
    use std::thread;

    use super::super::clock::Clocked;
    use super::*;

    /// A frame that had to wait for its rest (and so had the frame deadline on the socket)
    /// must not leave it there: the silence after it is idle, closed at the idle timeout,
    /// not at what was left of the frame's.
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
        let clock = Clock::new();
        let mut r = BufReader::new(Clocked {
            sock: &sock,
            clock: &clock,
        });
        let t = Timeouts {
            idle: Duration::from_millis(300),
            frame: Duration::from_secs(30),
        };
        for _ in 0..2 {
            let got = read_frame(&mut r, &clock, &t).unwrap();
            assert_eq!(got.as_deref(), Some(&b"hello"[..]));
        }
        let _client = sender.join().unwrap();
        let waited = Instant::now();
        assert!(matches!(read_frame(&mut r, &clock, &t), Err(ConnEnd::Idle)));
        assert!(
            waited.elapsed() < Duration::from_secs(5),
            "{:?}",
            waited.elapsed()
        );
    }

    /// The frame timeout counts from the frame's first byte, across reads.
    #[test]
    fn a_frame_sent_a_byte_at_a_time_ends_at_the_frame_timeout() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (sock, _) = listener.accept().unwrap();
        let sender = thread::spawn(move || {
            for b in wire::frame(&[b'Q'; 100]) {
                if client.write_all(&[b]).is_err() {
                    break;
                }
                thread::sleep(Duration::from_millis(30));
            }
        });
        let clock = Clock::new();
        let mut r = BufReader::new(Clocked {
            sock: &sock,
            clock: &clock,
        });
        let t = Timeouts {
            idle: Duration::from_secs(30),
            frame: Duration::from_millis(300),
        };
        let started = Instant::now();
        assert!(matches!(
            read_frame(&mut r, &clock, &t),
            Err(ConnEnd::FrameTimeout)
        ));
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
        drop(r);
        drop(sock);
        sender.join().unwrap();
    }
}
