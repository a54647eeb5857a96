//! The core simulator as the tests use it: a `coresim` process and testkit's HTTP client
//! for it (`/_stats`, inquiries, bookings made directly).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::Duration;

use core_client::tls::TlsFiles;
use serde_json::Value;
use testkit::CoreHttp;
use testkit::pki::Pair;

use super::messages::guid_of;
use super::process::Server;

/// A running core simulator, killed on drop.
pub struct Core {
    pub server: Server,
    /// `http` or `https`.
    scheme: &'static str,
    http: CoreHttp,
}

impl Core {
    /// A simulator on a free port (`extra`: e.g. `--slow-ms 1000`).
    pub fn start(extra: &[&str]) -> Core {
        Core::listening_on("127.0.0.1:0", extra)
    }

    /// A simulator on `port`: a core that comes back where a relay already points.
    pub fn on_port(port: u16, extra: &[&str]) -> Core {
        Core::listening_on(&format!("127.0.0.1:{port}"), extra)
    }

    fn listening_on(listen: &str, extra: &[&str]) -> Core {
        let server = Server::spawn("coresim", &[&["--listen", listen], extra].concat());
        let http = CoreHttp::new(&server.url(), Duration::from_secs(30));
        Core {
            server,
            scheme: "http",
            http,
        }
    }

    /// A simulator serving HTTPS on a free port with the certificate `tls` (`extra`: e.g.
    /// `--client-ca FILE`), at `https://127.0.0.1:PORT`; the test's own requests to it
    /// (`/_stats`, inquiries) are checked against, and show, `client` (`--core-ca` etc.).
    pub fn start_tls(tls: &Pair, client: &TlsFiles, extra: &[&str]) -> Core {
        let cert = tls.cert.to_str().expect("a UTF-8 path");
        let key = tls.key.to_str().expect("a UTF-8 path");
        let args = [
            &[
                "--listen",
                "127.0.0.1:0",
                "--tls-cert",
                cert,
                "--tls-key",
                key,
            ],
            extra,
        ];
        let server = Server::spawn("coresim", &args.concat());
        let url = format!("https://{}", server.addr);
        let http = CoreHttp::with_tls(&url, Duration::from_secs(30), client);
        Core {
            server,
            scheme: "https",
            http,
        }
    }

    pub fn url(&self) -> String {
        format!("{}://{}", self.scheme, self.server.addr)
    }

    /// `/_stats`: `{"bookings":N,"by_guid":{…},"inquiries":M}`.
    pub fn stats(&self) -> Value {
        self.http.stats().expect("core /_stats")
    }

    /// How many times the core booked `guid`.
    pub fn bookings(&self, guid: &str) -> u64 {
        self.http.bookings(guid).expect("core /_stats")
    }

    /// How many bookings the core made in all.
    pub fn total_bookings(&self) -> u64 {
        self.stats()["bookings"].as_u64().expect("bookings")
    }

    /// How many inquiries the core answered.
    pub fn inquiries(&self) -> u64 {
        self.stats()["inquiries"].as_u64().expect("inquiries")
    }

    /// Bookings per GUID.
    pub fn by_guid(&self) -> BTreeMap<String, u64> {
        self.stats()["by_guid"]
            .as_object()
            .expect("by_guid")
            .iter()
            .map(|(k, v)| (k.clone(), v.as_u64().expect("a count")))
            .collect()
    }

    /// The inquiry `GET /v1/transfers/{guid}`: the booking, or `None` on 404 (counts as an
    /// inquiry in `/_stats`).
    pub fn inquiry(&self, guid: &str) -> Option<Value> {
        self.http.inquiry(guid).expect("core inquiry")
    }

    /// Books `guid` directly with a 14-digit amount, which no reply can carry: every inquiry
    /// about it answers 200 with a booking resolve cannot use (an inquiry error, for as long
    /// as the core keeps answering so; the README's "left to an operator" case).
    pub fn book_unrepresentable(&self, guid: &str) -> Value {
        let t = wire::Transfer {
            guid: guid.into(),
            from_account: "00000000000001".into(),
            to_account: "00000000000002".into(),
            amount: 10_000_000_000_000,
            memo: String::new(),
        };
        self.http
            .book(&t)
            .unwrap_or_else(|e| panic!("booking {guid}: {e:#}"))
    }

    /// Books the transfer in request message `m` directly, as if an earlier send had reached
    /// the core. Returns the booking JSON.
    pub fn book(&self, m: &[u8]) -> Value {
        let t = wire::parse_request(m).expect("a valid request");
        self.http
            .book(&t)
            .unwrap_or_else(|e| panic!("booking {}: {e:#}", guid_of(m)))
    }
}

/// A port on 127.0.0.1 where nothing listens, taken for the rest of the run by a socket
/// bound to it that never listens: connections are refused, and no server started later
/// (every test starts its servers on port 0, and tests run in parallel) can be given it.
pub fn dead_port() -> u16 {
    use socket2::{Domain, Socket, Type};
    static HELD: Mutex<Vec<Socket>> = Mutex::new(Vec::new());
    let sock = Socket::new(Domain::IPV4, Type::STREAM, None).expect("socket");
    let any: SocketAddr = "127.0.0.1:0".parse().expect("an address");
    sock.bind(&any.into()).expect("bind a port");
    let port = sock
        .local_addr()
        .ok()
        .and_then(|a| a.as_socket())
        .expect("the bound port")
        .port();
    HELD.lock().unwrap_or_else(|e| e.into_inner()).push(sock);
    port
}

/// A core URL where nothing listens (see `dead_port`).
pub fn dead_url() -> String {
    format!("http://127.0.0.1:{}", dead_port())
}
