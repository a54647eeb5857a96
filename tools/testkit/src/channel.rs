//! A bank channel's side of the wire: write a request frame, read the reply frame, over
//! plain TCP or (feature `tls`, [`crate::tls_client`]) inside TLS.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

/// What a channel reads and writes frames through: the socket itself, or a TLS session on it.
pub trait Io: Read + Write + Send {}
impl<T: Read + Write + Send> Io for T {}

/// One channel connection to a relay.
pub struct Chan {
    /// The socket, for its timeouts and addresses.
    stream: TcpStream,
    /// Where frames go: a clone of `stream`, or a TLS session over one.
    io: Box<dyn Io>,
}

impl Chan {
    /// Connects to `addr`; every later read waits at most `timeout`.
    pub fn connect(addr: impl ToSocketAddrs, timeout: Duration) -> io::Result<Chan> {
        Chan::from_stream(TcpStream::connect(addr)?, timeout)
    }

    /// Connects to `addr`, giving up after `connect`; every later read and write waits at
    /// most `timeout`.
    pub fn connect_timeout(
        addr: &SocketAddr,
        connect: Duration,
        timeout: Duration,
    ) -> io::Result<Chan> {
        Chan::from_stream(TcpStream::connect_timeout(addr, connect)?, timeout)
    }

    /// A connection made some other way (from a chosen source address, say); every later
    /// read waits at most `timeout`.
    pub fn from_stream(stream: TcpStream, timeout: Duration) -> io::Result<Chan> {
        let io = Box::new(stream.try_clone()?);
        Chan::over(stream, io, timeout)
    }

    /// A connection whose frames go through `io` (a TLS session over `stream`, say); every
    /// later read and write of `stream` waits at most `timeout`.
    pub fn over(stream: TcpStream, io: Box<dyn Io>, timeout: Duration) -> io::Result<Chan> {
        stream.set_read_timeout(Some(timeout))?;
        stream.set_write_timeout(Some(timeout))?;
        stream.set_nodelay(true)?;
        Ok(Chan { stream, io })
    }

    /// Bytes as they are, no framing (for malformed input).
    pub fn send_raw(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.io.write_all(bytes)?;
        self.io.flush()
    }

    /// One request message, framed.
    pub fn send(&mut self, msg: &[u8]) -> io::Result<()> {
        self.send_raw(&wire::frame(msg))
    }

    /// One reply message (without its prefix). A prefix that is not four digits is
    /// `InvalidData`; a read that waited `timeout` in vain is `WouldBlock` or `TimedOut`
    /// (see [`is_timeout`]).
    pub fn recv(&mut self) -> io::Result<Vec<u8>> {
        wire::read_frame(&mut self.io)
    }

    /// Sends `msg` and reads its reply.
    pub fn call(&mut self, msg: &[u8]) -> io::Result<Vec<u8>> {
        self.send(msg)?;
        self.recv()
    }

    /// True if the relay has closed this connection (EOF or reset) within `limit`.
    pub fn closed_within(&mut self, limit: Duration) -> bool {
        if self.stream.set_read_timeout(Some(limit)).is_err() {
            return true;
        }
        let mut b = [0u8; 1];
        match self.io.read(&mut b) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => matches!(
                e.kind(),
                io::ErrorKind::ConnectionReset
                    | io::ErrorKind::ConnectionAborted
                    // TLS: the relay's alert (a refused certificate) or a close without one.
                    | io::ErrorKind::InvalidData
                    | io::ErrorKind::UnexpectedEof
            ),
        }
    }

    pub fn stream(&self) -> &TcpStream {
        &self.stream
    }
}

/// True for the error of a read or write that waited its whole timeout.
pub fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;
    use std::thread;

    use super::*;

    /// A peer that answers each frame it reads with `reply` (framed as given), then
    /// hangs up after `frames` of them.
    fn peer(frames: usize, reply: &'static [u8]) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            for _ in 0..frames {
                wire::read_frame(&mut s).unwrap();
                s.write_all(reply).unwrap();
            }
        });
        addr
    }

    #[test]
    fn frames_requests_and_reads_replies() {
        let addr = peer(2, b"0003R\x01Z");
        let mut c =
            Chan::connect_timeout(&addr, Duration::from_secs(5), Duration::from_secs(5)).unwrap();
        assert_eq!(c.call(b"Q").unwrap(), b"R\x01Z");
        assert_eq!(c.call(b"Q").unwrap(), b"R\x01Z");
        assert!(c.closed_within(Duration::from_secs(5)));
    }

    #[test]
    fn a_bad_prefix_is_invalid_data_and_silence_a_timeout() {
        let mut c = Chan::connect(peer(1, b"12x4"), Duration::from_secs(5)).unwrap();
        let e = c.call(b"Q").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{e}");

        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let stream = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let _silent = listener.accept().unwrap();
        let mut c = Chan::from_stream(stream, Duration::from_millis(50)).unwrap();
        let e = c.call(b"Q").unwrap_err();
        assert!(is_timeout(&e), "{e}");
    }
}
