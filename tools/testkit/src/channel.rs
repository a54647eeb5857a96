//! A bank channel's side of the wire: write a request frame, read the reply frame.

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use ledger::wire;

/// One channel connection to a relay.
pub struct Chan {
    stream: TcpStream,
}

impl Chan {
    /// Connects to `addr`; every later read waits at most `timeout`.
    pub fn connect(addr: impl ToSocketAddrs, timeout: Duration) -> io::Result<Chan> {
        let stream = TcpStream::connect(addr)?;
        stream.set_read_timeout(Some(timeout))?;
        stream.set_write_timeout(Some(timeout))?;
        stream.set_nodelay(true)?;
        Ok(Chan { stream })
    }

    /// Bytes as they are, no framing (for malformed input).
    pub fn send_raw(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// One request message, framed.
    pub fn send(&mut self, msg: &[u8]) -> io::Result<()> {
        self.send_raw(&wire::frame(msg))
    }

    /// One reply message (without its prefix).
    pub fn recv(&mut self) -> io::Result<Vec<u8>> {
        wire::read_frame(&mut self.stream)
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
        match self.stream.read(&mut b) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => matches!(
                e.kind(),
                io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted
            ),
        }
    }

    pub fn stream(&self) -> &TcpStream {
        &self.stream
    }
}
