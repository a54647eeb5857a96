//! systemd's notification protocol (sd_notify(3)) for the relay's `Type=notify` unit:
//! `READY=1` once the listener is bound and the ledger checked (when `listening on` is
//! printed), `WATCHDOG=1` from a thread at half the interval systemd asked for
//! (`WatchdogSec=`, given as `WATCHDOG_USEC`), and `STOPPING=1` when a signal starts the
//! shutdown. Started by anything else (no `NOTIFY_SOCKET`), every call does nothing.

use std::thread;
use std::time::Duration;

use log::{info, warn};
use sd_notify::NotifyState;

/// The relay serves: tells systemd, and starts the watchdog pings if it asked for them.
pub fn ready() {
    notify(&[NotifyState::Ready]);
    let mut usec = 0;
    // `false`: the variables stay set; the relay starts no child that could inherit them.
    if sd_notify::watchdog_enabled(false, &mut usec) && usec > 0 {
        let every = Duration::from_micros(usec) / 2;
        info!(
            "systemd watchdog: WATCHDOG=1 every {} ms",
            every.as_millis()
        );
        thread::spawn(move || {
            loop {
                notify(&[NotifyState::Watchdog]);
                thread::sleep(every);
            }
        });
    }
}

/// The relay stops accepting and finishes what is in flight.
pub fn stopping() {
    notify(&[NotifyState::Stopping]);
}

/// One notification; a socket that cannot be written is one warning, never an error: the
/// relay serves whether or not systemd hears it.
fn notify(state: &[NotifyState]) {
    if let Err(e) = sd_notify::notify(false, state) {
        warn!("cannot notify systemd ({state:?}): {e}");
    }
}
