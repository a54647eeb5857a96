//! The channel's side: request messages, replies, and a connection to a relay (testkit's
//! `Chan`, unwrapped for tests).

use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::thread;
use std::time::Duration;

use serde_json::Value;
use testkit::Chan;
use wire::{self, Code, Transfer};

/// How long a test's channel waits for a reply.
const REPLY_WAIT: Duration = Duration::from_secs(30);

/// A request message (without length prefix) from account 1 to account 2.
pub fn msg(guid: &str, amount: u64, memo: &str) -> Vec<u8> {
    wire::encode_request(&Transfer {
        guid: guid.into(),
        from_account: "00000000000001".into(),
        to_account: "00000000000002".into(),
        amount,
        memo: memo.into(),
    })
    .expect("a valid request")
}

/// A request message for `guid` written by hand: the encoder refuses GUIDs the contract
/// calls malformed, and some tests need to send them.
pub fn raw_msg(guid: &str, amount: u64, memo: &str) -> Vec<u8> {
    let mut m = msg("X", amount, memo);
    m[5..41].copy_from_slice(format!("{guid:<36}").as_bytes());
    m
}

/// The GUID of request message `m` (its bytes at the GUID offset, padding trimmed).
pub fn guid_of(m: &[u8]) -> String {
    String::from_utf8_lossy(&m[5..41]).trim_end().to_string()
}

/// The result code of a reply message.
pub fn code(reply: &[u8]) -> String {
    String::from_utf8_lossy(&reply[41..45]).into_owned()
}

/// Asserts the result code of `reply`, showing the whole reply on a mismatch.
pub fn assert_code(reply: &[u8], want: &str) {
    assert_eq!(code(reply), want, "{:?}", String::from_utf8_lossy(reply));
}

/// The header-only reply the relay gives to `m` with `code` (every code but `0000`).
pub fn short(m: &[u8], code: &Code) -> Vec<u8> {
    wire::reply_to(m, code, None)
}

/// The `0000` reply the relay builds from request `m` and the core's booking JSON.
pub fn booked_reply(m: &[u8], booking: &Value) -> Vec<u8> {
    let body = wire::booking_body(
        booking["core_ref"].as_str().expect("core_ref"),
        booking["amount"].as_u64().expect("amount"),
        booking["booked_at"].as_str().expect("booked_at"),
    )
    .expect("a booking the wire can carry");
    wire::reply_to(m, &wire::OK, Some(&body))
}

/// A channel connection to a relay; every call unwraps (a test fails on an I/O error).
pub struct Channel(Chan);

impl Channel {
    pub fn connect(addr: &str) -> Channel {
        Channel(Chan::connect(addr, REPLY_WAIT).unwrap_or_else(|e| panic!("connect {addr}: {e}")))
    }

    /// A connection whose source address is `source` (e.g. `127.0.0.2:0`): another peer.
    pub fn connect_from(source: &str, addr: &str) -> Channel {
        use socket2::{Domain, Socket, Type};
        let sock = Socket::new(Domain::IPV4, Type::STREAM, None).expect("socket");
        let source: SocketAddr = source.parse().expect("a source address");
        let addr: SocketAddr = addr.parse().expect("a relay address");
        sock.bind(&source.into()).expect("bind the source address");
        sock.connect(&addr.into()).expect("connect");
        let stream: TcpStream = sock.into();
        Channel(Chan::from_stream(stream, REPLY_WAIT).expect("set up the connection"))
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.0.send_raw(bytes).expect("write to the relay");
    }

    pub fn send(&mut self, m: &[u8]) {
        self.0.send(m).expect("write to the relay");
    }

    /// One reply message (without prefix).
    pub fn recv(&mut self) -> Vec<u8> {
        self.0.recv().expect("a reply frame")
    }

    pub fn call(&mut self, m: &[u8]) -> Vec<u8> {
        self.0.call(m).expect("a reply frame")
    }

    /// True if the relay has closed this connection (EOF or reset) within `limit`.
    pub fn closed_within(&mut self, limit: Duration) -> bool {
        self.0.closed_within(limit)
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.0.stream().local_addr().expect("local address")
    }
}

/// One round trip on a fresh connection.
pub fn call(addr: &str, m: &[u8]) -> Vec<u8> {
    Channel::connect(addr).call(m)
}

/// One round trip on a fresh connection whose reads wait at most `wait`, or `None` if the
/// relay closed it (or said nothing) instead of replying.
pub fn try_call(addr: impl ToSocketAddrs, m: &[u8], wait: Duration) -> Option<Vec<u8>> {
    Chan::connect(addr, wait).ok()?.call(m).ok()
}

/// Sends `m` on a fresh connection from another thread; join for the reply.
pub fn send_in_background(addr: &str, m: &[u8]) -> thread::JoinHandle<Vec<u8>> {
    let (addr, m) = (addr.to_string(), m.to_vec());
    thread::spawn(move || call(&addr, &m))
}
