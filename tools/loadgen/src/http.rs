//! A minimal keep-alive HTTP/1.1 client on `std::net`, for `--direct` (POSTs straight to the
//! core simulator) and `/_stats`. One persistent connection per loadgen connection: a new
//! TCP connection is made only at the start and after the previous one failed or the server
//! said `Connection: close`. It never retries: the core is not idempotent.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

/// `http://host:port[/base]`, resolved once.
#[derive(Clone, Debug)]
pub struct Endpoint {
    pub addr: SocketAddr,
    pub host: String,
    pub base: String,
}

impl Endpoint {
    pub fn parse(url: &str) -> Result<Endpoint, String> {
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| format!("core URL {url:?} must start with http://"))?;
        let (host, base) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        let addr = host
            .to_socket_addrs()
            .map_err(|e| format!("cannot resolve {host:?}: {e}"))?
            .next()
            .ok_or_else(|| format!("{host:?} resolves to no address"))?;
        Ok(Endpoint {
            addr,
            host: host.to_string(),
            base: base.trim_end_matches('/').to_string(),
        })
    }
}

pub struct Response {
    pub status: u16,
    pub body: Vec<u8>,
}

pub struct HttpConn {
    ep: Endpoint,
    timeout: Duration,
    stream: Option<BufReader<TcpStream>>,
    /// TCP connections made, the first one included.
    pub connects: u64,
}

fn bad(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

impl HttpConn {
    pub fn new(ep: Endpoint, timeout: Duration) -> HttpConn {
        HttpConn {
            ep,
            timeout,
            stream: None,
            connects: 0,
        }
    }

    /// Opens the connection now if there is none (so that connecting is not timed).
    pub fn ensure_connected(&mut self) -> io::Result<()> {
        if self.stream.is_none() {
            let s = TcpStream::connect_timeout(&self.ep.addr, self.timeout)?;
            s.set_nodelay(true)?;
            s.set_read_timeout(Some(self.timeout))?;
            s.set_write_timeout(Some(self.timeout))?;
            self.connects += 1;
            self.stream = Some(BufReader::new(s));
        }
        Ok(())
    }

    /// One exchange. Any error drops the connection; the next call opens a new one.
    pub fn request(&mut self, method: &str, path: &str, body: &[u8]) -> io::Result<Response> {
        let result = self.exchange(method, path, body);
        match &result {
            Ok((_, keep)) if *keep => {}
            _ => self.stream = None,
        }
        result.map(|(r, _)| r)
    }

    fn exchange(&mut self, method: &str, path: &str, body: &[u8]) -> io::Result<(Response, bool)> {
        self.ensure_connected()?;
        let mut req = format!(
            "{method} {}{path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\n\r\n",
            self.ep.base,
            self.ep.host,
            body.len()
        )
        .into_bytes();
        req.extend_from_slice(body);
        let r = self.stream.as_mut().expect("connected");
        r.get_mut().write_all(&req)?;

        let mut line = String::new();
        if r.read_line(&mut line)? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "connection closed before the status line",
            ));
        }
        let mut parts = line.split_whitespace();
        let version = parts.next().unwrap_or_default().to_string();
        let status: u16 = parts
            .next()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| bad(format!("bad status line {line:?}")))?;
        let mut keep = version == "HTTP/1.1";
        let mut length: Option<usize> = None;
        let mut chunked = false;
        loop {
            line.clear();
            if r.read_line(&mut line)? == 0 {
                return Err(bad("connection closed in the headers"));
            }
            let h = line.trim_end();
            if h.is_empty() {
                break;
            }
            let Some((name, value)) = h.split_once(':') else {
                return Err(bad(format!("bad header {h:?}")));
            };
            let value = value.trim();
            match name.trim().to_ascii_lowercase().as_str() {
                "content-length" => {
                    length = Some(value.parse().map_err(|_| bad("bad Content-Length"))?);
                }
                "transfer-encoding" => chunked = value.to_ascii_lowercase().contains("chunked"),
                "connection" => match value.to_ascii_lowercase().as_str() {
                    "close" => keep = false,
                    "keep-alive" => keep = true,
                    _ => {}
                },
                _ => {}
            }
        }
        let body = if chunked {
            read_chunked(r)?
        } else if let Some(n) = length {
            let mut b = vec![0u8; n];
            r.read_exact(&mut b)?;
            b
        } else {
            keep = false;
            let mut b = Vec::new();
            r.read_to_end(&mut b)?;
            b
        };
        Ok((Response { status, body }, keep))
    }
}

fn read_chunked(r: &mut BufReader<TcpStream>) -> io::Result<Vec<u8>> {
    let mut body = Vec::new();
    let mut line = String::new();
    loop {
        line.clear();
        r.read_line(&mut line)?;
        let size = line.trim().split(';').next().unwrap_or_default();
        let n = usize::from_str_radix(size, 16).map_err(|_| bad("bad chunk size"))?;
        if n == 0 {
            // trailers until the empty line
            loop {
                line.clear();
                if r.read_line(&mut line)? == 0 || line.trim_end().is_empty() {
                    return Ok(body);
                }
            }
        }
        let start = body.len();
        body.resize(start + n, 0);
        r.read_exact(&mut body[start..])?;
        let mut crlf = [0u8; 2];
        r.read_exact(&mut crlf)?;
    }
}
