//! What the core client reports about its connections, for whoever keeps metrics (the
//! relay's `txrelay_core_connections`): a transport opened, a transport closed. Nothing here
//! knows a metrics library; without an observer the reports go nowhere.

use std::sync::OnceLock;

/// Called with +1 when a transport to the core is made and -1 when it is dropped.
pub type ConnectionObserver = Box<dyn Fn(i64) + Send + Sync>;

static OBSERVER: OnceLock<ConnectionObserver> = OnceLock::new();

/// Sets the observer, once per process (later calls are ignored).
pub fn on_connection(f: ConnectionObserver) {
    let _ = OBSERVER.set(f);
}

pub(crate) fn connection_opened() {
    if let Some(f) = OBSERVER.get() {
        f(1);
    }
}

pub(crate) fn connection_closed() {
    if let Some(f) = OBSERVER.get() {
        f(-1);
    }
}
