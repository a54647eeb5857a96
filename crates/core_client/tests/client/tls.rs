//! TLS to the core: a handshake that fails is "not sent", anything after it is not.

use std::io::Write;
use std::net::TcpListener;
use std::path::Path;
use std::sync::Arc;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use core_client::tls::TlsFiles;
use core_client::{CoreClient, Outcome};
use rustls::{ServerConfig, ServerConnection, StreamOwned};
use testkit::pki::{Pair, Pki};
use testkit::tls::{Versions, server_config};

use crate::util::*;

/// Serves one TLS connection: reads a request and answers it with `raw`. Returns the
/// URL and what the server read of the request ("" if the handshake failed).
fn serve_tls(config: Arc<ServerConfig>, raw: &'static str) -> (String, mpsc::Receiver<String>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("https://{}", l.local_addr().unwrap());
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let (s, _) = l.accept().unwrap();
        let mut tls = StreamOwned::new(ServerConnection::new(config).unwrap(), s);
        let req = read_request(&mut tls);
        if !req.is_empty() {
            let _ = tls.write_all(raw.as_bytes());
            let _ = tls.flush();
        }
        tx.send(req).unwrap();
    });
    (url, rx)
}

fn config(server: &Pair, client_ca: Option<&Path>, versions: Versions) -> Arc<ServerConfig> {
    server_config(&server.cert, &server.key, client_ca, versions).unwrap()
}

fn files(ca: &Path, client: Option<&Pair>) -> TlsFiles {
    TlsFiles {
        ca: Some(ca.to_path_buf()),
        cert: client.map(|c| c.cert.clone()),
        key: client.map(|c| c.key.clone()),
    }
}

fn post(url: &str, tls: &TlsFiles) -> Outcome {
    let read = Duration::from_millis(2000);
    CoreClient::with_tls(url, Duration::from_millis(2000), read, tls)
        .unwrap()
        .post_transfer(&transfer())
}

fn booked() -> Outcome {
    Outcome::Booked(*b"C00000000000000001000000000150020261202093012")
}

#[test]
fn a_good_certificate_books() {
    let pki = Pki::new("core CA");
    let server = pki.server(&["127.0.0.1"]);
    let (url, seen) = serve_tls(
        config(&server, None, Versions::Both),
        json_response("200 OK", BOOKING),
    );
    assert_eq!(post(&url, &files(pki.ca(), None)), booked());
    assert!(
        seen.recv()
            .unwrap()
            .starts_with("POST /v1/transfers HTTP/1.1\r\n")
    );
}

#[test]
fn an_unknown_ca_or_another_name_is_not_sent() {
    let pki = Pki::new("core CA");
    let other = Pki::new("another CA");
    for (server, ca) in [
        (pki.server(&["127.0.0.1"]), other.ca()),
        (pki.server(&["core.elsewhere.example"]), pki.ca()),
    ] {
        let (url, seen) = serve_tls(
            config(&server, None, Versions::Both),
            json_response("200 OK", BOOKING),
        );
        let o = post(&url, &files(ca, None));
        assert!(
            matches!(&o, Outcome::NotSent(why) if why.contains("certificate")),
            "{o:?}"
        );
        assert_eq!(seen.recv().unwrap(), "", "the server read no request");
    }
}

/// A server that takes the connection but never answers the ClientHello: the
/// handshake runs out of the connect timeout, before any request byte.
#[test]
fn a_handshake_that_never_completes_is_not_sent() {
    let pki = Pki::new("core CA");
    let (tx, rx) = mpsc::channel::<()>();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("https://{}", l.local_addr().unwrap());
    thread::spawn(move || {
        let (_s, _) = l.accept().unwrap();
        let _ = rx.recv(); // hold the connection open until the test ends
    });
    let connect = Duration::from_millis(300);
    let c = CoreClient::with_tls(
        &url,
        connect,
        Duration::from_secs(5),
        &files(pki.ca(), None),
    );
    let started = std::time::Instant::now();
    let o = c.unwrap().post_transfer(&transfer());
    drop(tx);
    assert!(matches!(o, Outcome::NotSent(_)), "{o:?}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn mutual_tls_with_a_good_client_certificate_books() {
    let pki = Pki::new("core CA");
    let server = pki.server(&["127.0.0.1"]);
    let client = pki.client("relay");
    for versions in [Versions::Both, Versions::Tls12] {
        let (url, _) = serve_tls(
            config(&server, Some(pki.ca()), versions),
            json_response("200 OK", BOOKING),
        );
        assert_eq!(post(&url, &files(pki.ca(), Some(&client))), booked());
    }
}

/// TLS 1.3: the client has finished its side of the handshake, and sent the request,
/// before the server says it wants a client certificate it did not get: unknown, by
/// the rule (the server did not read it, but the client cannot know that). TLS 1.2:
/// the server says so within the handshake: not sent.
#[test]
fn a_missing_client_certificate_is_unknown_under_tls13_and_not_sent_under_tls12() {
    let pki = Pki::new("core CA");
    let server = pki.server(&["127.0.0.1"]);
    let strangers = Pki::new("a CA the core does not know");
    let stranger = strangers.client("relay");
    for client in [None, Some(&stranger)] {
        let (url, seen) = serve_tls(
            config(&server, Some(pki.ca()), Versions::Both),
            json_response("200 OK", BOOKING),
        );
        let o = post(&url, &files(pki.ca(), client));
        assert!(is_unknown(&o), "TLS 1.3, client {client:?}: {o:?}");
        assert_eq!(seen.recv().unwrap(), "", "the server read no request");

        let (url, seen) = serve_tls(
            config(&server, Some(pki.ca()), Versions::Tls12),
            json_response("200 OK", BOOKING),
        );
        let o = post(&url, &files(pki.ca(), client));
        assert!(
            matches!(o, Outcome::NotSent(_)),
            "TLS 1.2, client {client:?}: {o:?}"
        );
        assert_eq!(seen.recv().unwrap(), "", "the server read no request");
    }
}

fn refused(url: &str, tls: &TlsFiles) -> String {
    match CoreClient::with_tls(url, Duration::from_secs(1), Duration::from_secs(1), tls) {
        Ok(_) => panic!("{url} with {tls:?} was taken"),
        Err(e) => e.0,
    }
}

#[test]
fn bad_settings_are_refused_at_start_with_one_line() {
    let pki = Pki::new("core CA");
    let client = pki.client("relay");
    let others = Pki::new("another CA");
    let other = others.client("relay");
    let garbage = pki.dir().join("garbage.pem");
    std::fs::write(&garbage, "not a certificate\n").unwrap();
    let missing = pki.dir().join("missing.pem");
    let https = "https://127.0.0.1:9";
    let with = |ca: &Path, cert: Option<&Path>, key: Option<&Path>| TlsFiles {
        ca: Some(ca.to_path_buf()),
        cert: cert.map(Path::to_path_buf),
        key: key.map(Path::to_path_buf),
    };
    for (tls, says) in [
        (with(&missing, None, None), "--core-ca"),
        (with(&garbage, None, None), "no PEM certificate"),
        (with(&client.key, None, None), "no PEM certificate"),
        (with(pki.ca(), Some(&client.cert), None), "both or neither"),
        (
            with(pki.ca(), Some(&client.cert), Some(&missing)),
            "--core-key",
        ),
        (
            with(pki.ca(), Some(&client.cert), Some(&garbage)),
            "--core-key",
        ),
        (
            with(pki.ca(), Some(&garbage), Some(&client.key)),
            "--core-cert",
        ),
        // A key that is not the certificate's: found now, not at the first call.
        (
            with(pki.ca(), Some(&client.cert), Some(&other.key)),
            "--core-cert",
        ),
    ] {
        let e = refused(https, &tls);
        assert!(e.contains(says), "{tls:?}: {e}");
        assert_eq!(e.lines().count(), 1, "{e}");
    }
    let e = refused("http://127.0.0.1:9", &with(pki.ca(), None, None));
    assert!(e.contains("https://"), "{e}");
    assert!(
        CoreClient::with_tls(
            https,
            Duration::from_secs(1),
            Duration::from_secs(1),
            &with(pki.ca(), Some(&client.cert), Some(&client.key))
        )
        .is_ok()
    );
}
