//! The hosts of a multi-host URL (`postgres://…@h1:p1,h2:p2,h3:p3/db?target_session_attrs=
//! read-write`, contract §7), each tried on its own.
//!
//! The client library tries the hosts of one configuration in order, and bounds only the
//! socket's connect by `connect_timeout`: a host that accepts the connection and then says
//! nothing (a frozen server: the kernel still accepts and acknowledges) holds the attempt
//! until the caller's deadline, and the hosts after it are never tried. So the pool connects
//! to one host at a time, each with a configuration of its own ([`Hosts::of`]): it starts
//! with the host that last gave it a connection, starts the next when one fails, or when one
//! has not answered within its share of the deadline (then both race: the first session set
//! up wins), until every host was tried or the deadline passed.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use postgres::config::Host;

use crate::error::LedgerError;

/// One configuration per host of a URL, and which host last gave a connection.
pub(super) struct Hosts {
    configs: Vec<postgres::Config>,
    preferred: AtomicUsize,
}

impl Hosts {
    /// `config` cut into one configuration per host (a URL with one host: itself).
    pub(super) fn of(config: &postgres::Config) -> Hosts {
        let n = config.get_hosts().len();
        let configs = if n <= 1 {
            vec![config.clone()]
        } else {
            (0..n).map(|i| single_host(config, i)).collect()
        };
        Hosts {
            configs,
            preferred: AtomicUsize::new(0),
        }
    }

    /// The hosts in the order to try them: the one that last gave a connection first, then
    /// the others as the URL lists them.
    pub(super) fn order(&self) -> Vec<usize> {
        let first = self.preferred.load(Ordering::Relaxed);
        std::iter::once(first)
            .chain((0..self.configs.len()).filter(|&i| i != first))
            .collect()
    }

    /// Host `i`'s configuration.
    pub(super) fn config(&self, i: usize) -> &postgres::Config {
        &self.configs[i]
    }

    /// Host `i` gave a connection: it is tried first next time.
    pub(super) fn worked(&self, i: usize) {
        self.preferred.store(i, Ordering::Relaxed);
    }

    /// Why no host gave a connection (`failures`: each host's error): that error with one
    /// host; with several, each one's, named by its host.
    pub(super) fn none_connected(&self, mut failures: Vec<(usize, LedgerError)>) -> LedgerError {
        if failures.len() == 1 {
            return failures.remove(0).1;
        }
        failures.sort_by_key(|(i, _)| *i);
        let each: Vec<String> = failures
            .iter()
            .map(|(i, e)| format!("{}: {e}", host_name(&self.configs[*i])))
            .collect();
        LedgerError::Unavailable(format!(
            "no host of the database URL gave a connection ({})",
            each.join("; ")
        ))
    }

    /// How long a host that has not answered is waited for alone, before the next one is
    /// started beside it: an equal share of `deadline` (all of it with one host).
    pub(super) fn stagger(&self, deadline: Duration) -> Duration {
        deadline / u32::try_from(self.configs.len()).unwrap_or(u32::MAX).max(1)
    }
}

/// `host:port` of a one-host configuration, as errors name it (no password in it).
fn host_name(config: &postgres::Config) -> String {
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(h)) => h.clone(),
        #[cfg(unix)]
        Some(Host::Unix(p)) => p.display().to_string(),
        None => "?".into(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    format!("{host}:{port}")
}

/// `config` with only its `i`-th host (and that host's address and port); every other
/// setting as it is.
fn single_host(config: &postgres::Config, i: usize) -> postgres::Config {
    let mut c = postgres::Config::new();
    if let Some(user) = config.get_user() {
        c.user(user);
    }
    if let Some(password) = config.get_password() {
        c.password(password);
    }
    if let Some(dbname) = config.get_dbname() {
        c.dbname(dbname);
    }
    if let Some(options) = config.get_options() {
        c.options(options);
    }
    if let Some(name) = config.get_application_name() {
        c.application_name(name);
    }
    c.ssl_mode(config.get_ssl_mode())
        .ssl_negotiation(config.get_ssl_negotiation());
    match &config.get_hosts()[i] {
        Host::Tcp(h) => c.host(h),
        #[cfg(unix)]
        Host::Unix(p) => c.host_path(p),
    };
    if let Some(addr) = config.get_hostaddrs().get(i) {
        c.hostaddr(*addr);
    }
    // One port for every host, or one per host.
    let ports = config.get_ports();
    if let Some(port) = ports.get(i).or(ports.first().filter(|_| ports.len() == 1)) {
        c.port(*port);
    }
    if let Some(t) = config.get_connect_timeout() {
        c.connect_timeout(*t);
    }
    if let Some(t) = config.get_tcp_user_timeout() {
        c.tcp_user_timeout(*t);
    }
    c.keepalives(config.get_keepalives())
        .keepalives_idle(config.get_keepalives_idle());
    if let Some(t) = config.get_keepalives_interval() {
        c.keepalives_interval(t);
    }
    if let Some(n) = config.get_keepalives_retries() {
        c.keepalives_retries(n);
    }
    c.target_session_attrs(config.get_target_session_attrs())
        .channel_binding(config.get_channel_binding())
        .load_balance_hosts(config.get_load_balance_hosts());
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(url: &str) -> postgres::Config {
        url.parse().unwrap()
    }

    /// Every setting but the hosts is carried over: the configurations differ from the
    /// original, as the client library shows them, only in the host list.
    #[test]
    fn each_host_keeps_every_other_setting() {
        let url = "postgres://relay:s3cret@h1:5001,h2:5002,[::1]:5003/ledger?\
                   target_session_attrs=read-write&connect_timeout=3&application_name=a\
                   &options=-c%20search_path%3Dt1&keepalives_idle=40&sslmode=require\
                   &channel_binding=disable&tcp_user_timeout=7&keepalives=0";
        let all = parsed(url);
        let hosts = Hosts::of(&all);
        assert_eq!(hosts.order().len(), 3);
        let shown = |c: &postgres::Config| {
            let d = format!("{c:?}");
            // The host and port lists are the only fields allowed to differ.
            let cut = |s: &str, field: &str| {
                let from = s.find(field).unwrap();
                let to = from + s[from..].find(']').unwrap();
                format!("{}{}", &s[..from], &s[to..])
            };
            cut(&cut(&d, "host: ["), "port: [")
        };
        for (i, (host, port)) in [("h1", 5001), ("h2", 5002), ("::1", 5003)]
            .iter()
            .enumerate()
        {
            let one = hosts.config(i);
            assert_eq!(one.get_hosts(), [Host::Tcp(host.to_string())]);
            assert_eq!(one.get_ports(), [*port]);
            assert_eq!(one.get_password(), Some(&b"s3cret"[..]));
            assert_eq!(shown(one), shown(&all), "host {i}");
        }
    }

    #[test]
    fn one_port_serves_every_host_and_one_host_is_left_as_it_is() {
        let hosts = Hosts::of(&parsed("postgres://u@a,b:6000/d"));
        assert_eq!(hosts.config(1).get_ports(), [6000]);
        let hosts = Hosts::of(&parsed("postgres://u@a:1,b:2/d"));
        assert_eq!(hosts.config(0).get_ports(), [1]);
        let one = Hosts::of(&parsed("postgres://u@a:7/d"));
        assert_eq!(one.order(), [0]);
        assert_eq!(one.stagger(Duration::from_secs(5)), Duration::from_secs(5));
    }

    #[test]
    fn the_host_that_worked_is_tried_first_then_the_others_in_order() {
        let hosts = Hosts::of(&parsed("postgres://u@a:1,b:2,c:3/d"));
        assert_eq!(hosts.order(), [0, 1, 2]);
        hosts.worked(2);
        assert_eq!(hosts.order(), [2, 0, 1]);
        assert_eq!(
            hosts.stagger(Duration::from_secs(6)),
            Duration::from_secs(2)
        );
    }
}
