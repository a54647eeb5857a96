//! The wrappers and TLS to the core: their settings reach the tools.

use testkit::pki::Pki;

use super::wrappers::{run_script, start_relay_sh};
use crate::relay::tls::https_core;
use crate::relay::tls_scene::path;
use crate::util::*;

/// The wrappers pass the TLS settings through (an empty one counts as unset), and relay.sh
/// takes an https:// core.
#[test]
fn the_wrappers_pass_the_tls_settings_through() {
    let pki = Pki::new("core CA");
    let core = https_core(&pki, None, &[]);
    let db = TempLedger::new();
    let relay = start_relay_sh(&[
        ("RELAY_DB", db.arg()),
        ("RELAY_LISTEN", "127.0.0.1:0"),
        ("RELAY_CORE", &core.url()),
        ("RELAY_CORE_CA", path(pki.ca())),
        ("RELAY_CORE_CERT", ""),
        ("RELAY_CORE_KEY", ""),
    ]);
    let m = msg("G-TLS-SH", 10, "");
    assert_code(&call(&relay.addr, &m), "0000");
    drop(relay);
    let missing = pki.dir().join("missing.pem");
    for (script, var) in [
        ("resolve.sh", "RESOLVE_CORE_CA"),
        ("reprocess.sh", "REPROCESS_CORE_CA"),
    ] {
        let env = [
            ("LEDGER_DB", db.arg()),
            ("CORE_URL", &*core.url()),
            (var, path(&missing)),
        ];
        let run = run_script(script, &[], &env);
        run.expect_code(EXIT_FATAL);
        assert!(run.stderr().contains("missing.pem"), "{}", run.stderr());
    }
    assert_eq!(core.bookings("G-TLS-SH"), 1);
}
