//! A reload (SIGHUP) that brings a new `--client-crl` or `--client-ca` reaches the
//! connections already open (CONTRACT §8, v1.3): a kept-alive connection whose certificate
//! the new files refuse answers the request it is serving, then is closed, and takes no
//! further request — on the frames' door and on the HTTP door; another channel's connection
//! goes on. And a revocation list past its nextUpdate: still used, a warning at start and at
//! each reload, its nextUpdate a metric.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rcgen::{
    BasicConstraints, CertificateParams, CertificateRevocationListParams, CertifiedIssuer, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyIdMethod, KeyPair, KeyUsagePurpose, SerialNumber,
};
use testkit::Chan;
use testkit::pki::{Pair, Pki};
use testkit::tls_client::{ClientTls, connect};

use super::metrics::{relay_with_admin, scrape};
use super::tls_scene::path;
use crate::util::*;

/// A TLS channel to the relay at `addr` (whose certificate `server_ca` issued), showing
/// `identity`.
fn chan(addr: &str, server_ca: &Path, identity: &Pair) -> std::io::Result<Chan> {
    let tls = ClientTls::new(server_ca, "127.0.0.1").with_identity(&identity.cert, &identity.key);
    let config = tls.config().expect("a client configuration");
    connect(
        &addr.parse().expect("an address"),
        &config,
        "127.0.0.1",
        WAIT,
    )
}

/// Whether the relay logged, within `WAIT`, `n` lines containing every one of `parts`.
fn logged_n(relay: &Server, n: usize, parts: &[&str]) -> bool {
    eventually(WAIT, || {
        let lines = relay.stderr();
        let found = lines
            .lines()
            .filter(|l| parts.iter().all(|p| l.contains(p)))
            .count();
        found >= n
    })
}

/// How many lines of the relay's log contain `part`.
fn lines_with(relay: &Server, part: &str) -> usize {
    relay.stderr().lines().filter(|l| l.contains(part)).count()
}

/// The relay's flags for TLS with mutual TLS: `server`'s certificate, clients of `client_ca`.
fn mutual<'a>(server: &'a Pair, client_ca: &'a Path) -> Vec<&'a str> {
    vec![
        "--tls-cert",
        path(&server.cert),
        "--tls-key",
        path(&server.key),
        "--client-ca",
        path(client_ca),
    ]
}

#[test]
fn a_reload_that_revokes_a_channel_closes_its_connections_after_the_request_in_flight() {
    skip_if_unavailable!();
    let pki = Pki::new("relay CA");
    let server = pki.server(&["localhost", "127.0.0.1"]);
    let (a, b) = (pki.client("chan-a"), pki.client("chan-b"));
    let crl = pki.crl(&[]);
    let db = temp_ledger();
    let core = Core::start(&["--slow-ms", "3000"]);
    let (flag, h) = http_listen();
    let mut args = mutual(&server, pki.ca());
    args.extend(["--client-crl", path(&crl), &flag, &h]);
    let (relay, _admin) = relay_with_admin(&db, &core.url(), &args);

    let mut ca = chan(&relay.addr, pki.ca(), &a).expect("A's session");
    let mut cb = chan(&relay.addr, pki.ca(), &b).expect("B's session");
    let tls_a = ClientTls::new(pki.ca(), "127.0.0.1").with_identity(&a.cert, &a.key);
    let mut ha = https_connect(&h, &tls_a).expect("A's HTTPS session");
    assert_code(&ca.call(&msg("G-REV-A1", 5, "")).unwrap(), "0000");
    assert_code(&cb.call(&msg("G-REV-B1", 5, "")).unwrap(), "0000");
    assert_eq!(
        ha.post(Some("\"G-REV-AH1\""), &transfer_body(5, "")).status,
        200
    );

    // A's request in flight (the core thinks 3 s), another written right behind it.
    let in_flight = msg("G-REV-A2", 5, "SLOW");
    ca.send(&in_flight).unwrap();
    ca.send(&msg("G-REV-A3", 5, "")).unwrap();
    assert!(eventually(WAIT, || db.state("G-REV-A2") == Some(State::Sent)));

    pki.crl(&[&a]);
    relay.signal("-HUP");
    assert!(logged_n(&relay, 1, &["reloaded TLS certificates"]));
    // The request in flight is answered; then the connection ends, the one behind it unread.
    let answered = ca.recv().expect("the answer to the request in flight");
    assert_done_with(&db, &core, &in_flight, &answered);
    assert!(ca.closed_within(WAIT), "A's connection is still open");
    assert!(ha.closed_within(WAIT), "A's HTTPS connection is still open");
    assert_eq!(
        db.state("G-REV-A3"),
        None,
        "a request taken after the reload"
    );
    // New handshakes of A are refused; B goes on, on its open connection and on a new one.
    let refused = chan(&relay.addr, pki.ca(), &a).and_then(|mut c| c.call(&msg("G-REV-A4", 5, "")));
    assert!(refused.is_err(), "A was served after its revocation");
    assert_code(&cb.call(&msg("G-REV-B2", 5, "")).unwrap(), "0000");
    let mut cb2 = chan(&relay.addr, pki.ca(), &b).expect("B's new session");
    assert_code(&cb2.call(&msg("G-REV-B3", 5, "")).unwrap(), "0000");
    assert_eq!(db.state("G-REV-A4"), None);
    assert_eq!(core.bookings("G-REV-A3"), 0);
    assert_eq!(core.total_bookings(), 6, "{:?}", core.by_guid());
    assert!(
        logged_n(
            &relay,
            2,
            &["closing the connection of channel chan-a", "revoked"]
        ),
        "{}",
        relay.stderr()
    );
}

#[test]
fn a_reload_that_swaps_the_client_ca_closes_the_connections_of_the_old_one() {
    skip_if_unavailable!();
    let relay_pki = Pki::new("relay CA");
    let server = relay_pki.server(&["localhost", "127.0.0.1"]);
    let (old_ca, new_ca) = (Pki::new("old channel CA"), Pki::new("new channel CA"));
    let dir = tempfile::tempdir().unwrap();
    let client_ca = dir.path().join("client-ca.pem");
    std::fs::copy(old_ca.ca(), &client_ca).unwrap();
    let (old, new) = (old_ca.client("chan-old"), new_ca.client("chan-new"));
    let db = temp_ledger();
    let core = Core::start(&[]);
    let (relay, _admin) = relay_with_admin(&db, &core.url(), &mutual(&server, &client_ca));

    let mut c_old = chan(&relay.addr, relay_pki.ca(), &old).expect("a session of the old CA");
    assert_code(&c_old.call(&msg("G-SWAP-1", 5, "")).unwrap(), "0000");
    assert!(
        chan(&relay.addr, relay_pki.ca(), &new)
            .and_then(|mut c| c.call(&msg("G-SWAP-EARLY", 5, "")))
            .is_err()
    );

    std::fs::copy(new_ca.ca(), &client_ca).unwrap();
    relay.signal("-HUP");
    assert!(logged_n(&relay, 1, &["reloaded TLS certificates"]));
    // Closed at once, not at the idle timeout (300 s).
    assert!(
        c_old.closed_within(WAIT),
        "the old CA's connection is still open"
    );
    let closing = ["closing the connection of channel chan-old", "unknown_ca"];
    assert!(logged_n(&relay, 1, &closing), "{}", relay.stderr());
    let mut c_new = chan(&relay.addr, relay_pki.ca(), &new).expect("a session of the new CA");
    assert_code(&c_new.call(&msg("G-SWAP-2", 5, "")).unwrap(), "0000");
    assert_eq!(db.state("G-SWAP-EARLY"), None);
    assert_eq!(core.total_bookings(), 2);
}

/// A CA of the test's own, for revocation lists whose dates the test chooses.
struct ListCa {
    dir: tempfile::TempDir,
    issuer: CertifiedIssuer<'static, KeyPair>,
    ca: PathBuf,
}

impl ListCa {
    fn new() -> ListCa {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, "list CA");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let ca = dir.path().join("ca.pem");
        std::fs::write(&ca, issuer.as_ref().pem()).unwrap();
        ListCa { dir, issuer, ca }
    }

    fn client(&self, cn: &str) -> Pair {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, cn);
        params.use_authority_key_identifier_extension = true;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        params.serial_number = Some(SerialNumber::from(7u64));
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        let pair = Pair {
            cert: self.dir.path().join(format!("{cn}.pem")),
            key: self.dir.path().join(format!("{cn}.key")),
            serial: 7,
        };
        std::fs::write(&pair.cert, cert.pem()).unwrap();
        std::fs::write(&pair.key, key.serialize_pem()).unwrap();
        pair
    }

    /// Writes `list.crl.pem`, revoking nothing, due to be replaced at `next_update` (Unix
    /// seconds).
    fn crl(&self, number: u64, next_update: u64) -> PathBuf {
        let at = |secs: u64| (UNIX_EPOCH + Duration::from_secs(secs)).into();
        let params = CertificateRevocationListParams {
            this_update: at(next_update.min(now()) - 86400),
            next_update: at(next_update),
            crl_number: SerialNumber::from(number),
            issuing_distribution_point: None,
            revoked_certs: Vec::new(),
            key_identifier_method: KeyIdMethod::Sha256,
        };
        let crl = params.signed_by(&self.issuer).unwrap();
        let path = self.dir.path().join("list.crl.pem");
        std::fs::write(&path, crl.pem().unwrap()).unwrap();
        path
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

#[test]
fn a_list_past_its_next_update_is_used_with_a_warning_at_start_and_reload_and_a_metric() {
    skip_if_unavailable!();
    let relay_pki = Pki::new("relay CA");
    let server = relay_pki.server(&["localhost", "127.0.0.1"]);
    let lists = ListCa::new();
    let branch = lists.client("branch-9");
    let stale = now() - 2 * 3600;
    let crl = lists.crl(1, stale);
    let db = temp_ledger();
    let core = Core::start(&[]);
    let mut args = mutual(&server, &lists.ca);
    args.extend(["--client-crl", path(&crl)]);
    let (relay, admin) = relay_with_admin(&db, &core.url(), &args);
    let warning = "is past its nextUpdate";
    assert!(
        logged_n(&relay, 1, &[warning, path(&crl)]),
        "{}",
        relay.stderr()
    );
    let metric = "txrelay_client_crl_next_update_seconds";
    assert_eq!(sample(&scrape(&admin), metric), stale as f64);
    // Still used: the channel is served (rustls does not refuse for a stale list).
    let mut c = chan(&relay.addr, relay_pki.ca(), &branch).expect("a session");
    assert_code(&c.call(&msg("G-STALE-1", 5, "")).unwrap(), "0000");

    relay.signal("-HUP");
    assert!(logged_n(&relay, 1, &["reloaded TLS certificates"]));
    assert_eq!(lines_with(&relay, warning), 2, "{}", relay.stderr());

    // A current list: no warning at its reload, and the metric follows.
    let fresh = now() + 86400;
    lists.crl(2, fresh);
    relay.signal("-HUP");
    assert!(logged_n(&relay, 2, &["reloaded TLS certificates"]));
    assert_eq!(lines_with(&relay, warning), 2, "{}", relay.stderr());
    assert_eq!(sample(&scrape(&admin), metric), fresh as f64);
    assert_code(&c.call(&msg("G-STALE-2", 5, "")).unwrap(), "0000");
}
