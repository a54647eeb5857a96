//! A tiny HTTP/1.1 client over a `TcpStream` for the relay's HTTP channel API (CONTRACT §9):
//! exact bytes out, the status, headers and body back, and whether the relay closed.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::Value;

/// How long a test's HTTP client waits for an answer.
const ANSWER_WAIT: Duration = Duration::from_secs(30);

/// The body of a valid transfer from account 1 to account 2.
pub fn transfer_body(amount: u64, memo: &str) -> String {
    serde_json::json!({
        "tx_code": "TRNF",
        "from_account": "00000000000001",
        "to_account": "00000000000002",
        "amount": amount,
        "memo": memo,
    })
    .to_string()
}

/// One answer.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    /// Names lower-cased.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("{e}: {:?}", String::from_utf8_lossy(&self.body)))
    }
}

/// A keep-alive connection to the relay's HTTP port.
pub struct Http {
    /// The socket, for its timeouts.
    sock: TcpStream,
    /// Where the bytes go: a clone of `sock`, or a TLS session on it.
    io: Box<dyn testkit::channel::Io>,
    buf: Vec<u8>,
}

impl Http {
    pub fn connect(addr: &str) -> Http {
        let sock = TcpStream::connect(addr).expect("connect to the HTTP port");
        let io = Box::new(sock.try_clone().expect("a clone of the socket"));
        Http::over(sock, io)
    }

    /// Over `io`, a TLS session on `sock` say.
    pub fn over(sock: TcpStream, io: Box<dyn testkit::channel::Io>) -> Http {
        sock.set_read_timeout(Some(ANSWER_WAIT)).unwrap();
        Http {
            sock,
            io,
            buf: Vec::new(),
        }
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.io
            .write_all(bytes)
            .and_then(|()| self.io.flush())
            .expect("write");
    }

    /// A POST /v1/transfers with `key` as the Idempotency-Key line (`None`: none).
    pub fn post(&mut self, key: Option<&str>, body: &str) -> Answer {
        self.send_raw(&post_bytes(key, body));
        self.answer().expect("an answer")
    }

    pub fn get(&mut self, path: &str) -> Answer {
        self.send_raw(format!("GET {path} HTTP/1.1\r\nHost: relay\r\n\r\n").as_bytes());
        self.answer().expect("an answer")
    }

    /// The next answer; `None` if the relay closed first.
    pub fn answer(&mut self) -> Option<Answer> {
        self.read_answer(true)
    }

    /// The next answer to a HEAD: its head alone, whatever its `Content-Length` says.
    pub fn head_answer(&mut self) -> Option<Answer> {
        self.read_answer(false)
    }

    fn read_answer(&mut self, with_body: bool) -> Option<Answer> {
        let end = loop {
            if let Some(i) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            if !self.fill() {
                return None;
            }
        };
        let head = String::from_utf8(self.buf[..end].to_vec()).expect("an ASCII head");
        let mut lines = head.split("\r\n");
        let status: u16 = lines.next().unwrap()[9..12].parse().expect("a status");
        let headers: Vec<(String, String)> = lines
            .filter(|l| !l.is_empty())
            .map(|l| {
                let (n, v) = l.split_once(':').expect("a header line");
                (n.to_ascii_lowercase(), v.trim().to_string())
            })
            .collect();
        let len: usize = headers
            .iter()
            .find(|(n, _)| n == "content-length" && with_body)
            .map_or(0, |(_, v)| v.parse().unwrap());
        while self.buf.len() < end + len {
            assert!(self.fill(), "closed in the middle of a body");
        }
        let body = self.buf[end..end + len].to_vec();
        self.buf.drain(..end + len);
        Some(Answer {
            status,
            headers,
            body,
        })
    }

    /// Whether the relay closes the connection (end of file or reset) within `limit`.
    pub fn closed_within(&mut self, limit: Duration) -> bool {
        self.sock.set_read_timeout(Some(limit)).unwrap();
        let mut b = [0u8; 4096];
        loop {
            match self.io.read(&mut b) {
                Ok(0) => return true,
                Ok(_) => continue,
                Err(e) => {
                    return !matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    );
                }
            }
        }
    }

    fn fill(&mut self) -> bool {
        let mut b = [0u8; 4096];
        match self.io.read(&mut b) {
            Ok(0) | Err(_) => false,
            Ok(n) => {
                self.buf.extend_from_slice(&b[..n]);
                true
            }
        }
    }
}

/// The bytes of a POST /v1/transfers.
pub fn post_bytes(key: Option<&str>, body: &str) -> Vec<u8> {
    let key = key.map_or(String::new(), |k| format!("Idempotency-Key: {k}\r\n"));
    format!(
        "POST /v1/transfers HTTP/1.1\r\nHost: relay\r\nContent-Type: application/json\r\n\
         {key}Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// One POST on a fresh connection.
pub fn http_post(addr: &str, key: Option<&str>, body: &str) -> Answer {
    Http::connect(addr).post(key, body)
}

/// One GET on a fresh connection.
pub fn http_get_answer(addr: &str, path: &str) -> Answer {
    Http::connect(addr).get(path)
}

/// `--http-listen` on a free port, and that address: the relay announces it on its second
/// stdout line, which `Server` does not keep.
pub fn http_listen() -> (String, String) {
    let addr = format!("127.0.0.1:{}", testkit::free_port());
    ("--http-listen".to_string(), addr)
}

/// An HTTPS connection to `addr` trusting `tls`'s CA (and showing its identity, if any).
/// Under TLS 1.3 a refused client certificate shows only at the first read.
pub fn https_connect(addr: &str, tls: &testkit::tls_client::ClientTls) -> std::io::Result<Http> {
    use rustls::pki_types::ServerName;
    let config = tls.config().map_err(std::io::Error::other)?;
    let name = ServerName::try_from("127.0.0.1").expect("a server name");
    let conn = rustls::ClientConnection::new(config, name).map_err(std::io::Error::other)?;
    let sock = TcpStream::connect(addr)?;
    sock.set_read_timeout(Some(ANSWER_WAIT))?;
    let mut session = rustls::StreamOwned::new(conn, sock.try_clone()?);
    while session.conn.is_handshaking() {
        session.conn.complete_io(&mut session.sock)?;
    }
    Ok(Http::over(sock, Box::new(session)))
}
