//! What a started relay says about itself, in four INFO lines before `listening on`: which
//! ledger (a PostgreSQL URL with its password masked), which core and how long a call may
//! take, where it listens (frames, HTTP, admin; TLS on the channels or not), and its limits.
//! An operator reading the log of a relay that answers E902 for everything should not need
//! the unit file to learn which core it was pointed at. Then the core is probed once
//! (`core_probe`).

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use ledger::db::Db;
use log::info;

use super::Relay;
use crate::core_probe::{self, Found};

impl Relay {
    /// Logs the ledger (`db`), the core, the listeners and the limits this relay runs with.
    pub fn log_start(&self, db: &Db) {
        for line in self.start_lines(db) {
            info!("{line}");
        }
    }

    /// Asks the core once about a GUID never sent (`core_probe`): a warning and the metric
    /// say so unless the answer is the core's JSON 404. Takes at most the core call's
    /// deadline (connect + read timeout).
    pub fn probe_core(&self) -> Found {
        core_probe::probe(
            &self.shared.core,
            &self.shared.metrics,
            &self.shared.config.core_url,
        )
    }

    /// The lines of `log_start`.
    fn start_lines(&self, db: &Db) -> Vec<String> {
        let c = &self.shared.config;
        let kind = match db {
            Db::Sqlite(_) => "SQLite",
            Db::Postgres(_) => "PostgreSQL",
        };
        let late = if c.late_reply.is_zero() {
            "late replies off".to_string()
        } else {
            format!(
                "late replies awaited {} ms, at most {} at once",
                c.late_reply.as_millis(),
                c.max_late_replies
            )
        };
        let core_tls = if c.core_tls.is_empty() {
            "TLS files: none".to_string()
        } else {
            format!(
                "--core-ca {}, --core-cert {}",
                shown(c.core_tls.ca.as_deref()),
                shown(c.core_tls.cert.as_deref())
            )
        };
        let channel_tls = match &c.tls {
            None => "channel TLS off".to_string(),
            Some(t) => format!(
                "channel TLS on (certificate {}, client CA {}, CRL {})",
                t.cert.display(),
                shown(t.client_ca.as_deref()),
                shown(t.client_crl.as_deref())
            ),
        };
        let per_channel = c
            .max_connections_per_channel
            .map_or_else(|| "no limit".to_string(), |n| n.to_string());
        vec![
            format!("start: ledger {db} ({kind})"),
            format!(
                "start: core {} (connect timeout {} ms, read timeout {} ms; {late}; {core_tls})",
                c.core_url,
                c.connect_timeout.as_millis(),
                c.read_timeout.as_millis()
            ),
            format!(
                "start: listening: frames on {}, HTTP {}, admin {}; {channel_tls}",
                self.local_addr()
                    .map_or_else(|e| e.to_string(), |a| a.to_string()),
                addr(self.http_addr()),
                addr(self.admin_addr())
            ),
            format!(
                "start: limits: {} connections, {} per peer, {per_channel} per channel (mutual \
                 TLS); frame timeout {} ms, idle timeout {}",
                c.max_connections,
                c.max_connections_per_peer,
                c.frame_timeout.as_millis(),
                secs(c.idle_timeout)
            ),
        ]
    }
}

/// A listener's address (`on ADDR`), or `off`.
fn addr(a: Option<SocketAddr>) -> String {
    a.map_or_else(|| "off".to_string(), |a| format!("on {a}"))
}

/// A file flag's path, or `none`.
fn shown(p: Option<&Path>) -> String {
    p.map_or_else(|| "none".to_string(), |p| p.display().to_string())
}

fn secs(d: Duration) -> String {
    format!("{} s", d.as_secs())
}
