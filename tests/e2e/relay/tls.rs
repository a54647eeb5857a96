//! TLS to the core: the relay, resolve and reprocess against the simulator serving HTTPS
//! with a throwaway CA made in the test. A handshake that fails is E902 (FAILED, nothing
//! booked, safe to send again); anything after it is E901 — including a client certificate
//! that a TLS 1.3 server refuses, which the relay learns only after it sent the request.

use std::path::Path;

use core_client::tls::TlsFiles;
use testkit::pki::{Pair, Pki};
use wire::{E_NOT_SENT, E_UNKNOWN};

use super::tls_scene::path;
use crate::util::*;

/// The test's own view of the core (`/_stats`, inquiries): trusting `pki`, showing `client`.
fn trusting(pki: &Pki, client: Option<&Pair>) -> TlsFiles {
    TlsFiles {
        ca: Some(pki.ca().to_path_buf()),
        cert: client.map(|c| c.cert.clone()),
        key: client.map(|c| c.key.clone()),
    }
}

/// `args` and `--core-ca CA` (and `--core-cert`, `--core-key`): a tool's arguments.
fn tls_args<'a>(args: &[&'a str], ca: &'a Path, client: Option<&'a Pair>) -> Vec<&'a str> {
    let mut all = args.to_vec();
    all.extend(["--core-ca", path(ca)]);
    if let Some(c) = client {
        all.extend(["--core-cert", path(&c.cert), "--core-key", path(&c.key)]);
    }
    all
}

/// A core behind TLS with a certificate for 127.0.0.1 signed by `pki`.
pub(crate) fn https_core(pki: &Pki, client: Option<&Pair>, extra: &[&str]) -> Core {
    Core::start_tls(&pki.server(&["127.0.0.1"]), &trusting(pki, client), extra)
}

#[test]
fn a_good_certificate_books_and_a_resend_is_replayed() {
    skip_if_unavailable!();
    let pki = Pki::new("core CA");
    let core = https_core(&pki, None, &[]);
    assert!(core.url().starts_with("https://127.0.0.1:"));
    let db = TempLedger::new();
    let relay = start_relay(&db, &core.url(), &tls_args(&[], pki.ca(), None));
    let m = msg("G-TLS-OK", 1500, "rent");
    let first = call(&relay.addr, &m);
    assert_code(&first, "0000");
    assert_done_with(&db, &core, &m, &first);
    assert_eq!(
        call(&relay.addr, &m),
        first,
        "the resend gets the stored reply"
    );
    assert_eq!(core.bookings("G-TLS-OK"), 1);
}

#[test]
fn an_unknown_ca_is_e902_and_once_fixed_a_resend_and_reprocess_book_once() {
    skip_if_unavailable!();
    let pki = Pki::new("core CA");
    let other = Pki::new("a CA the core does not use");
    let core = https_core(&pki, None, &[]);
    let db = TempLedger::new();
    let relay = start_relay(&db, &core.url(), &tls_args(&[], other.ca(), None));
    let (m1, m2) = (msg("G-TLS-CA-1", 10, ""), msg("G-TLS-CA-2", 20, ""));
    for m in [&m1, &m2] {
        assert_eq!(call(&relay.addr, m), short(m, &E_NOT_SENT));
        assert_failed_e902(&db, m, 1);
    }
    assert_eq!(
        core.total_bookings(),
        0,
        "the handshake failed: nothing was sent"
    );
    assert!(
        relay.stderr().contains("UnknownIssuer"),
        "the log says why: {}",
        relay.stderr()
    );
    // reprocess with the same wrong CA: still not sent, nothing booked.
    let run = reprocess(
        &db,
        &core.url(),
        &tls_args(&["--max-attempts", "5", "--json"], other.ca(), None),
    );
    run.expect_code(EXIT_LEFT);
    assert_eq!(core.total_bookings(), 0);
    assert_eq!(db.state("G-TLS-CA-1"), Some(State::Failed));
    drop(relay);

    // Fixed: the channel's resend goes through a relay with the right CA...
    let relay = start_relay(&db, &core.url(), &tls_args(&[], pki.ca(), None));
    let reply = call(&relay.addr, &m1);
    assert_code(&reply, "0000");
    assert_eq!(reply, assert_done_as_booked(&db, &core, &m1));
    // ...and reprocess with the right CA sends the other row.
    let run = reprocess(
        &db,
        &core.url(),
        &tls_args(&["--max-attempts", "5", "--json"], pki.ca(), None),
    );
    run.expect_code(EXIT_SETTLED);
    assert_counts(&run.json(), &[("sent", 1), ("done", 1)]);
    assert_done_as_booked(&db, &core, &m2);
    assert_eq!(core.bookings("G-TLS-CA-1"), 1);
    assert_eq!(core.bookings("G-TLS-CA-2"), 1);
    assert_eq!(call(&relay.addr, &m1), reply);
}

#[test]
fn a_certificate_for_another_name_is_e902() {
    skip_if_unavailable!();
    let pki = Pki::new("core CA");
    let tls = pki.server(&["core.elsewhere.example"]);
    // No client of the test can check this core by its address either: its bookings are
    // counted in its journal.
    let journal = pki.dir().join("journal");
    let core = Core::start_tls(&tls, &TlsFiles::default(), &["--journal", path(&journal)]);
    let db = TempLedger::new();
    let relay = start_relay(&db, &core.url(), &tls_args(&[], pki.ca(), None));
    let m = msg("G-TLS-NAME", 10, "");
    assert_eq!(call(&relay.addr, &m), short(&m, &E_NOT_SENT));
    assert_failed_e902(&db, &m, 1);
    assert!(
        relay.stderr().contains("not valid for name"),
        "{}",
        relay.stderr()
    );
    let booked = std::fs::read_to_string(&journal).unwrap_or_default();
    assert_eq!(booked, "", "the core booked nothing");
}

/// A relay without `--core-ca`, its system trust store being `store` (`SSL_CERT_FILE`, which
/// the system's store gives way to, as with OpenSSL: no test depends on the machine's own).
fn relay_with_system_roots(db: &TempLedger, core: &Core, store: &Path) -> Server {
    let mut cmd = relay_command(db, &core.url(), &[]);
    cmd.env("SSL_CERT_FILE", store);
    Server::start(cmd)
}

#[test]
fn without_core_ca_the_system_roots_are_used() {
    skip_if_unavailable!();
    let pki = Pki::new("core CA");
    let other = Pki::new("a CA the core does not use");
    let core = https_core(&pki, None, &[]);
    let db = TempLedger::new();
    let m = msg("G-TLS-SYS-1", 10, "");
    let relay = relay_with_system_roots(&db, &core, other.ca());
    assert_eq!(call(&relay.addr, &m), short(&m, &E_NOT_SENT));
    drop(relay);
    let relay = relay_with_system_roots(&db, &core, pki.ca());
    assert_code(&call(&relay.addr, &m), "0000");
    assert_eq!(core.bookings("G-TLS-SYS-1"), 1);
}

/// TLS 1.3 (what the relay and the simulator agree on): the server asks for a client
/// certificate, the relay has none, finishes its side of the handshake and sends the
/// request; only then does the server's refusal reach it. The request was sent: E901,
/// whatever the server did with it (here: nothing, it never completed the handshake).
#[test]
fn a_client_certificate_required_and_missing_is_e901_under_tls13_and_nothing_is_booked() {
    skip_if_unavailable!();
    let pki = Pki::new("core CA");
    let client = pki.client("relay");
    let core = https_core(&pki, Some(&client), &["--client-ca", path(pki.ca())]);
    let db = TempLedger::new();
    let relay = start_relay(
        &db,
        &core.url(),
        &tls_args(&["--late-reply-ms", "0"], pki.ca(), None),
    );
    let m = msg("G-TLS-MTLS-MISSING", 10, "");
    assert_eq!(call(&relay.addr, &m), short(&m, &E_UNKNOWN));
    assert_eq!(db.state("G-TLS-MTLS-MISSING"), Some(State::Unknown));
    assert_eq!(core.total_bookings(), 0, "the core never read the request");
    assert!(
        relay.stderr().contains("outcome unknown: after connecting"),
        "{}",
        relay.stderr()
    );
    drop(relay);

    // resolve without the certificate cannot ask: the row stays UNKNOWN.
    db.age("G-TLS-MTLS-MISSING", OLD);
    let run = resolve(
        &db,
        &core.url(),
        &tls_args(&["--min-age", "60"], pki.ca(), None),
    );
    run.expect_code(EXIT_LEFT);
    assert_eq!(db.state("G-TLS-MTLS-MISSING"), Some(State::Unknown));
    // With it (the failed inquiry's backoff waited out), the core says it never booked the
    // GUID: FAILED, and reprocess books it once.
    make_inquiries_due(&db);
    let run = resolve(
        &db,
        &core.url(),
        &tls_args(&["--min-age", "60"], pki.ca(), Some(&client)),
    );
    run.expect_code(EXIT_SETTLED);
    assert_failed_e902(&db, &m, 1);
    let run = reprocess(
        &db,
        &core.url(),
        &tls_args(&["--max-attempts", "5"], pki.ca(), Some(&client)),
    );
    run.expect_code(EXIT_SETTLED);
    assert_done_as_booked(&db, &core, &m);
    assert_eq!(core.bookings("G-TLS-MTLS-MISSING"), 1);
}

/// A core that speaks TLS 1.2 only refuses the missing certificate within the handshake,
/// before the relay sends anything: E902.
#[test]
fn a_client_certificate_required_and_missing_is_e902_under_tls12() {
    skip_if_unavailable!();
    let pki = Pki::new("core CA");
    let client = pki.client("relay");
    let core = https_core(
        &pki,
        Some(&client),
        &["--client-ca", path(pki.ca()), "--tls12"],
    );
    let db = TempLedger::new();
    let relay = start_relay(&db, &core.url(), &tls_args(&[], pki.ca(), None));
    let m = msg("G-TLS12-MISSING", 10, "");
    assert_eq!(call(&relay.addr, &m), short(&m, &E_NOT_SENT));
    assert_failed_e902(&db, &m, 1);
    assert_eq!(core.total_bookings(), 0);
}

#[test]
fn mutual_tls_with_a_good_client_certificate_books() {
    skip_if_unavailable!();
    let pki = Pki::new("core CA");
    let client = pki.client("relay");
    let core = https_core(&pki, Some(&client), &["--client-ca", path(pki.ca())]);
    let db = TempLedger::new();
    let relay = start_relay(&db, &core.url(), &tls_args(&[], pki.ca(), Some(&client)));
    let m = msg("G-TLS-MTLS-OK", 1500, "rent");
    let reply = call(&relay.addr, &m);
    assert_code(&reply, "0000");
    assert_done_with(&db, &core, &m, &reply);
    assert_eq!(call(&relay.addr, &m), reply);
    assert_eq!(core.bookings("G-TLS-MTLS-OK"), 1);
}

#[test]
fn resolve_settles_over_https() {
    skip_if_unavailable!();
    let pki = Pki::new("core CA");
    let core = https_core(&pki, None, &[]);
    let (booked, never) = (msg("G-TLS-R-1", 10, ""), msg("G-TLS-R-2", 20, ""));
    let db = TempLedger::new();
    RowSpec::unknown(&booked).age(OLD).insert(&db);
    RowSpec::unknown(&never).age(OLD).insert(&db);
    core.book(&booked);
    let run = resolve(
        &db,
        &core.url(),
        &tls_args(&["--min-age", "60", "--json"], pki.ca(), None),
    );
    run.expect_code(EXIT_SETTLED);
    assert_done_as_booked(&db, &core, &booked);
    assert_failed_e902(&db, &never, 1);
    assert_eq!(core.bookings("G-TLS-R-2"), 0);
}

#[test]
fn a_late_reply_over_tls_settles_the_row() {
    skip_if_unavailable!();
    let pki = Pki::new("core CA");
    let core = https_core(&pki, None, &["--slow-ms", "1000"]);
    let db = TempLedger::new();
    let relay = start_relay(
        &db,
        &core.url(),
        &tls_args(&["--read-timeout-ms", "300"], pki.ca(), None),
    );
    let m = msg("G-TLS-LATE", 10, "SLOW");
    assert_eq!(call(&relay.addr, &m), short(&m, &E_UNKNOWN));
    assert!(eventually(WAIT, || db.state("G-TLS-LATE") == Some(State::Done)));
    let reply = assert_done_as_booked(&db, &core, &m);
    assert_eq!(call(&relay.addr, &m), reply);
    assert_eq!(core.bookings("G-TLS-LATE"), 1);
}

/// A bad file stops each tool at start with one line (exit 1); a half-given client
/// certificate is a usage error (exit 2); http:// with TLS settings is refused.
#[test]
fn bad_tls_settings_stop_the_tools_at_start() {
    skip_if_unavailable!();
    let pki = Pki::new("core CA");
    let client = pki.client("relay");
    let missing = pki.dir().join("missing.pem");
    let db = TempLedger::new();
    RowSpec::failed(&msg("G-TLS-BAD", 10, "")).insert(&db);
    let https = "https://127.0.0.1:9";
    let common = |tool: &str| -> Vec<&str> {
        match tool {
            "relay" => vec!["--db", db.arg(), "--listen", "127.0.0.1:0"],
            "resolve" => vec!["--db", db.arg(), "--min-age", "60"],
            _ => vec!["--db", db.arg(), "--max-attempts", "3"],
        }
    };
    let run = |tool: &str, more: &[&str]| Run::new(tool, &[&common(tool)[..], more].concat());
    for tool in ["relay", "resolve", "reprocess"] {
        let run_ = run(tool, &["--core", https, "--core-ca", path(&missing)]);
        let err = run_.expect_code(EXIT_FATAL).stderr();
        assert!(
            err.contains("--core-ca") && err.contains("missing.pem"),
            "{err}"
        );
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(!run_.stdout().contains("listening on"));

        let run_ = run(tool, &["--core", https, "--core-cert", path(&client.cert)]);
        let err = run_.expect_code(EXIT_USAGE).stderr();
        assert!(err.contains("--core-key"), "{err}");

        let http = "http://127.0.0.1:9";
        let run_ = run(tool, &["--core", http, "--core-ca", path(pki.ca())]);
        let err = run_.expect_code(EXIT_FATAL).stderr();
        assert!(err.contains("https://"), "{err}");
    }
    // The environment twins, the same.
    for (tool, var, file, code) in [
        ("relay", "RELAY_CORE_CERT", &client.cert, EXIT_USAGE),
        ("resolve", "RESOLVE_CORE_CA", &missing, EXIT_FATAL),
        ("reprocess", "REPROCESS_CORE_KEY", &client.key, EXIT_USAGE),
    ] {
        let core_var = format!("{}_CORE", tool.to_uppercase());
        Run::with_env(
            tool,
            &common(tool),
            &[(&*core_var, https), (var, path(file))],
        )
        .expect_code(code);
    }
    assert_eq!(
        db.state("G-TLS-BAD"),
        Some(State::Failed),
        "no tool touched the ledger"
    );
}
