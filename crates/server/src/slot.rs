//! The open channel connections and their limits: a connection holds a [`Slot`] while it
//! is served, counted against `--max-connections`, and per source IP until its TLS
//! handshake names a channel, then per channel (`--max-connections-per-peer`,
//! `--max-connections-per-channel`); refusals are counted and logged, rate-limited.

use std::collections::HashMap;
use std::fmt;
use std::net::{IpAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use log_limit::conn_warn;

use crate::Shared;
use crate::registry::Entry;

/// The open channel connections, kept so that a shutdown can wake the threads that sit in
/// `read`, and counted per peer.
#[derive(Default)]
pub(crate) struct Conns {
    next_id: u64,
    pub(crate) open: HashMap<u64, Arc<Entry>>,
    pub(crate) per_peer: HashMap<PeerKey, usize>,
}

/// What the per-peer limit counts a connection under: its source IP until its TLS
/// handshake names a channel, then that channel (one concentrator's IP may carry several).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum PeerKey {
    Ip(IpAddr),
    Channel(String),
}

impl fmt::Display for PeerKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PeerKey::Ip(ip) => ip.fmt(f),
            PeerKey::Channel(c) => write!(f, "channel:{c}"),
        }
    }
}

/// A connection's place among the open ones; gives it back when dropped.
pub(crate) struct Slot {
    pub(crate) shared: Arc<Shared>,
    id: u64,
    peer: PeerKey,
    pub(crate) stream: Arc<Entry>,
}

impl Slot {
    /// Registers `stream`, or refuses it (it is then closed) when the relay is stopping or a
    /// limit is reached; refusals are counted in the log.
    pub(crate) fn take(shared: &Arc<Shared>, peer: IpAddr, stream: TcpStream) -> Option<Slot> {
        let mut conns = shared.conns();
        if shared.stopping() {
            return None;
        }
        let max = shared.config.max_connections;
        if conns.open.len() >= max {
            drop(conns);
            shared
                .metrics
                .connections_refused
                .with_label_values(&["max_connections"])
                .inc();
            let n = shared.refused.fetch_add(1, Ordering::Relaxed) + 1;
            conn_warn!("connection limit {max} reached: closed a new connection ({n} so far)");
            return None;
        }
        let peer = PeerKey::Ip(peer);
        let per_peer = conns.per_peer.get(&peer).copied().unwrap_or(0);
        let max_peer = shared.config.max_connections_per_peer;
        if per_peer >= max_peer {
            drop(conns);
            shared
                .metrics
                .connections_refused
                .with_label_values(&["max_connections_per_peer"])
                .inc();
            let n = shared.refused_peer.fetch_add(1, Ordering::Relaxed) + 1;
            conn_warn!(
                "per-peer connection limit {max_peer} reached for {peer}: closed a new \
                 connection ({n} so far)"
            );
            return None;
        }
        let stream = Arc::new(Entry::new(stream));
        conns.next_id += 1;
        let id = conns.next_id;
        conns.open.insert(id, Arc::clone(&stream));
        *conns.per_peer.entry(peer.clone()).or_default() += 1;
        shared.metrics.connections_open.inc();
        Some(Slot {
            shared: Arc::clone(shared),
            id,
            peer,
            stream,
        })
    }

    /// Counts this connection, from now on, under `channel` instead of its source IP; or
    /// the limit (a `connections_refused` label) that `channel` has reached.
    pub(crate) fn bind_channel(&mut self, channel: &str) -> Result<(), (&'static str, usize)> {
        let key = PeerKey::Channel(channel.to_string());
        let config = &self.shared.config;
        let mut conns = self.shared.conns();
        let n = conns.per_peer.get(&key).copied().unwrap_or(0);
        if let Some(max) = config.max_connections_per_channel
            && n >= max
        {
            return Err(("max_connections_per_channel", max));
        }
        if n >= config.max_connections_per_peer {
            return Err(("max_connections_per_peer", config.max_connections_per_peer));
        }
        release(&mut conns.per_peer, &self.peer);
        *conns.per_peer.entry(key.clone()).or_default() += 1;
        self.peer = key;
        Ok(())
    }
}

/// One connection fewer under `key`.
fn release(per_peer: &mut HashMap<PeerKey, usize>, key: &PeerKey) {
    if let Some(n) = per_peer.get_mut(key) {
        *n -= 1;
        if *n == 0 {
            per_peer.remove(key);
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut conns = self.shared.conns();
        conns.open.remove(&self.id);
        release(&mut conns.per_peer, &self.peer);
        drop(conns);
        self.shared.metrics.connections_open.dec();
        self.shared.conn_ended.notify_all();
    }
}
