//! The deadlines of a connection's reads, enforced on the socket itself (CONTRACT §2, and
//! §8 v1.3 for TLS): the idle timeout until a request's first byte, then the frame timeout
//! (the request timeout on the HTTP door) from that byte.
//!
//! A reader above the socket cannot enforce them by setting the socket's read timeout before
//! each read of its own: a TLS session's one read waits for a whole record, socket read after
//! socket read, and a peer that sends that record one byte a second lets none of those reads
//! time out. So every read of the socket goes through `Clocked`, which first sets the
//! socket's timeout to what is left until the connection's deadline, and fails once it has
//! passed; the request readers only move the deadline (`Clock::until`).

use std::cell::Cell;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use super::frames::{ConnEnd, is_timeout};

/// How far the socket's timeout may be from what is left before it is set again: within
/// it, a read waits at most this much past the deadline. It spares the common case — a
/// request that arrives whole while the idle timeout set for the previous wait is still on
/// the socket — one `setsockopt` per request.
const SLACK: Duration = Duration::from_millis(5);

/// When a connection's read in progress must have ended; one per connection, used only by
/// its thread.
pub(super) struct Clock {
    at: Cell<Instant>,
    /// The read timeout this clock last set on the socket (`None`: none yet).
    set: Cell<Option<Duration>>,
}

impl Clock {
    pub(super) fn new() -> Clock {
        Clock {
            at: Cell::new(Instant::now()),
            set: Cell::new(None),
        }
    }

    /// Every socket read from now on must end by `at`.
    pub(super) fn until(&self, at: Instant) {
        self.at.set(at);
    }

    /// Sets the socket's read timeout to `left`, unless the one on it is within `SLACK`.
    fn arm(&self, sock: &TcpStream, left: Duration) -> io::Result<()> {
        if let Some(set) = self.set.get()
            && set.abs_diff(left) <= SLACK
        {
            return Ok(());
        }
        sock.set_read_timeout(Some(left))?;
        self.set.set(Some(left));
        Ok(())
    }
}

/// A connection's socket as its readers (and a TLS session) see it: every read ends by the
/// clock's deadline, with `TimedOut` once it has passed.
pub(super) struct Clocked<'a> {
    pub(super) sock: &'a TcpStream,
    pub(super) clock: &'a Clock,
}

impl Read for Clocked<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let at = self.clock.at.get();
            let left = at.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(io::ErrorKind::TimedOut.into());
            }
            self.clock.arm(self.sock, left)?;
            match (&mut &*self.sock).read(buf) {
                // A timeout a little shorter than what was left (within `SLACK`) fired:
                // wait for the rest.
                Err(e) if is_timeout(&e) && Instant::now() < at => continue,
                read => return read,
            }
        }
    }
}

impl Write for Clocked<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        (&mut &*self.sock).write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        (&mut &*self.sock).flush()
    }
}

/// Waits, under the idle timeout, until `r` has a byte of a next request. `Ok(false)`: the
/// channel closed cleanly between requests.
pub(super) fn await_request<R: Read>(
    r: &mut BufReader<R>,
    clock: &Clock,
    idle: Duration,
) -> Result<bool, ConnEnd> {
    if !r.buffer().is_empty() {
        return Ok(true);
    }
    clock.until(Instant::now() + idle);
    loop {
        match r.fill_buf() {
            Ok([]) => return Ok(false),
            Ok(_) => return Ok(true),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            // A TLS channel that closes its socket between requests without a close_notify:
            // as clean as a plain channel's close (a socket never says it).
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(false),
            Err(e) if is_timeout(&e) => return Err(ConnEnd::Idle),
            Err(e) => return Err(ConnEnd::Io(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;
    use std::thread;

    use super::*;

    /// Like a TLS session's read: returns only once it has a whole "record" of `len` bytes,
    /// reading the socket as many times as that takes.
    struct Records<R> {
        inner: R,
        len: usize,
    }

    impl<R: Read> Read for Records<R> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let mut record = vec![0u8; self.len];
            self.inner.read_exact(&mut record)?;
            let n = record.len().min(buf.len());
            buf[..n].copy_from_slice(&record[..n]);
            Ok(n)
        }
    }

    fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (sock, _) = listener.accept().unwrap();
        (client, sock)
    }

    /// One byte every 50 ms never lets a single socket read wait long, yet the whole read
    /// ends at the deadline: it is on the socket, not per read.
    #[test]
    fn a_trickle_inside_one_read_ends_at_the_deadline() {
        let (mut client, sock) = pair();
        let trickler = thread::spawn(move || {
            for _ in 0..100 {
                if client.write_all(b"x").is_err() {
                    break;
                }
                thread::sleep(Duration::from_millis(50));
            }
        });
        let clock = Clock::new();
        let mut r = Records {
            inner: Clocked {
                sock: &sock,
                clock: &clock,
            },
            len: 1000,
        };
        let started = Instant::now();
        clock.until(started + Duration::from_millis(400));
        let mut buf = [0u8; 1000];
        let err = r.read(&mut buf).expect_err("the deadline passed");
        assert!(is_timeout(&err), "{err}");
        let took = started.elapsed();
        assert!(took >= Duration::from_millis(400), "{took:?}");
        assert!(took < Duration::from_secs(2), "{took:?}");
        drop(sock);
        trickler.join().unwrap();
    }

    /// The idle wait ends at the idle timeout; bytes that arrive start a request.
    #[test]
    fn the_wait_for_a_request_is_idle_until_its_first_byte() {
        let (mut client, sock) = pair();
        let clock = Clock::new();
        let mut r = BufReader::new(Clocked {
            sock: &sock,
            clock: &clock,
        });
        let idle = Duration::from_millis(200);
        let started = Instant::now();
        assert!(matches!(
            await_request(&mut r, &clock, idle),
            Err(ConnEnd::Idle)
        ));
        assert!(started.elapsed() >= idle, "{:?}", started.elapsed());
        client.write_all(b"Q").unwrap();
        assert!(matches!(await_request(&mut r, &clock, idle), Ok(true)));
        drop(client);
        r.consume(1);
        assert!(matches!(await_request(&mut r, &clock, idle), Ok(false)));
    }
}
