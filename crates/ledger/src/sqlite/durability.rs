//! How durable a commit is: `synchronous=FULL` (WAL synced at every commit), always, in every
//! release build. The power-loss run's negative control (issue 43, `tools/powerloss`) needs a
//! ledger that is *not*, to show that the run sees what a lost commit does: in a debug build
//! only, `TXRELAY_TEST_UNSAFE_SYNCHRONOUS_NORMAL=1` makes it `synchronous=NORMAL` (the WAL
//! synced only at checkpoints), and says so on stderr. It exists only in a debug build with the
//! `unsafe-test-switches` feature (which tools/powerloss turns on): a release build, or a
//! debug build of the relay alone, has no such switch — the code is compiled out, whatever the
//! environment says.

/// The pragma to set and the value `PRAGMA synchronous` must then read.
pub(super) fn wanted() -> (&'static str, i64) {
    if unsafe_normal() {
        ("synchronous=NORMAL", 1)
    } else {
        ("synchronous=FULL", 2)
    }
}

/// The test switch's variable (not even named in a build without the switch).
#[cfg(any(test, all(debug_assertions, feature = "unsafe-test-switches")))]
pub const UNSAFE_NORMAL_ENV: &str = "TXRELAY_TEST_UNSAFE_SYNCHRONOUS_NORMAL";

#[cfg(all(debug_assertions, feature = "unsafe-test-switches"))]
fn unsafe_normal() -> bool {
    static SAID: std::sync::Once = std::sync::Once::new();
    let on = std::env::var(UNSAFE_NORMAL_ENV).is_ok_and(|v| v == "1");
    if on {
        SAID.call_once(|| {
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
                "ledger: UNSAFE TEST SWITCH {UNSAFE_NORMAL_ENV}=1: synchronous=NORMAL, a power \
                 cut loses acknowledged commits (debug build only)"
            );
        });
    }
    on
}

#[cfg(not(all(debug_assertions, feature = "unsafe-test-switches")))]
fn unsafe_normal() -> bool {
    false
}

#[cfg(test)]
mod tests {
    #[test]
    fn full_unless_the_debug_switch_is_set() {
        // The variable is not set in the test runner (a test that set it would race others).
        if std::env::var_os(super::UNSAFE_NORMAL_ENV).is_none() {
            assert_eq!(super::wanted(), ("synchronous=FULL", 2));
        }
    }
}
