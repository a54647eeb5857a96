//! The channel listener's TLS as the relay runs: the files, the configuration loaded from
//! them (swapped whole by a reload), and what the operator is told about them at start and
//! at each reload — the server certificate about to expire, a revocation list past its
//! nextUpdate — in the log and in the metrics.

use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use log::warn;

use super::handshake;
use super::tls::{self, ListenerTls, Loaded, TlsError};
use crate::metrics::Metrics;

/// A warning at start (and at each reload) when the server certificate expires this soon.
const EXPIRY_WARNING: Duration = Duration::from_secs(14 * 24 * 3600);

/// The channel listener's TLS: the files, and what new handshakes use.
pub(super) struct ListenerState {
    files: ListenerTls,
    metrics: Arc<Metrics>,
    current: RwLock<Arc<Loaded>>,
}

impl ListenerState {
    pub(super) fn load(
        files: ListenerTls,
        metrics: Arc<Metrics>,
    ) -> Result<ListenerState, TlsError> {
        let loaded = tls::load(&files)?;
        note(&files, &loaded, &metrics);
        Ok(ListenerState {
            files,
            metrics,
            current: RwLock::new(Arc::new(loaded)),
        })
    }

    /// The configuration new handshakes use, with its verifier.
    pub(super) fn current(&self) -> Arc<Loaded> {
        Arc::clone(&self.current.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Reads the files again and puts them in use; on any error the configuration in use
    /// stays. The new one is returned for checking the connections already open.
    pub(super) fn reload(&self) -> Result<Arc<Loaded>, TlsError> {
        let loaded = Arc::new(tls::load(&self.files)?);
        note(&self.files, &loaded, &self.metrics);
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::clone(&loaded);
        Ok(loaded)
    }
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// The gauges, and a warning for what needs the operator soon.
fn note(files: &ListenerTls, loaded: &Loaded, metrics: &Metrics) {
    note_expiry(files, loaded.not_after, metrics);
    if let (Some(crl), Some(due)) = (&files.client_crl, &loaded.crl) {
        metrics.client_crl(due.next_update);
        let Some(next) = due.next_update else {
            return;
        };
        let late = now().saturating_sub(next);
        if late > 0 {
            // rustls does not refuse a certificate for a stale list (and we keep it so:
            // refusing every channel because a publication is late would stop the bank),
            // so the operator must hear of it.
            warn!(
                "the revocation list --client-crl {} is past its nextUpdate ({}, {} h ago): \
                 it is still used, but a certificate revoked since it was issued is accepted; \
                 publish a current list, then send SIGHUP",
                crl.display(),
                utc(next),
                late / 3600
            );
        }
    }
}

/// A Unix time as the certificates print theirs.
fn utc(t: i64) -> String {
    x509_parser::time::ASN1Time::from_timestamp(t).map_or_else(|_| t.to_string(), |t| t.to_string())
}

/// The expiry gauge, and a warning if the certificate expires within `EXPIRY_WARNING`.
fn note_expiry(files: &ListenerTls, not_after: i64, metrics: &Metrics) {
    metrics.tls_listener(not_after, handshake::REASONS);
    let left = not_after.saturating_sub(now());
    let cert = files.cert.display();
    if left <= 0 {
        warn!("the TLS certificate --tls-cert {cert} has expired: renew it, then send SIGHUP");
    } else if left < EXPIRY_WARNING.as_secs() as i64 {
        warn!(
            "the TLS certificate --tls-cert {cert} expires in {} h: renew it, then send SIGHUP",
            left / 3600
        );
    }
}
