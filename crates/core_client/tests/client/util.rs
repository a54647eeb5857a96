//! A tiny server that misbehaves in exactly one way, and what the tests send it.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::thread;
use std::time::Duration;

use core_client::{CoreClient, Outcome};
use wire::Transfer;

pub fn transfer() -> Transfer {
    Transfer {
        guid: "G1".into(),
        from_account: "00000000000001".into(),
        to_account: "00000000000002".into(),
        amount: 1500,
        memo: "rent".into(),
    }
}

pub fn client(url: &str) -> CoreClient {
    CoreClient::new(url, Duration::from_millis(500), Duration::from_millis(500)).unwrap()
}

/// Reads one HTTP request (headers and a Content-Length body) and returns it.
pub fn read_request(s: &mut impl Read) -> String {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        if s.read(&mut byte).unwrap_or(0) == 0 {
            break;
        }
        buf.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&buf).to_string();
    let len = head
        .lines()
        .find_map(|l| {
            let l = l.to_ascii_lowercase();
            l.strip_prefix("content-length:")
                .map(|v| v.trim().parse::<usize>().unwrap())
        })
        .unwrap_or(0);
    let mut body = vec![0; len];
    s.read_exact(&mut body).unwrap();
    head + &String::from_utf8_lossy(&body)
}

/// The URL of a port nothing listens on (bound, then closed): connections are refused.
pub fn refusing() -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    drop(l);
    url
}

/// Serves one connection with `f` and returns the base URL.
pub fn serve(f: impl FnOnce(TcpStream) + Send + 'static) -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    thread::spawn(move || {
        let (s, _) = l.accept().unwrap();
        f(s);
    });
    url
}

pub fn answer(raw: &'static str) -> String {
    serve(move |mut s| {
        read_request(&mut s);
        s.write_all(raw.as_bytes()).unwrap();
    })
}

pub fn json_response(status: &str, body: &str) -> &'static str {
    format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .leak()
}

pub const BOOKING: &str = r#"{"guid":"G1","core_ref":"C00000000000000001","amount":1500,"booked_at":"2026-12-02T09:30:12Z"}"#;

pub fn is_unknown(o: &Outcome) -> bool {
    matches!(o, Outcome::Unknown(_))
}
