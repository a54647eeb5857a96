//! What the test tools (`coresim`'s tests, `chan`, `chaos`, `loadgen`) and the end-to-end
//! tests share, written once: the channel client (`channel`), an HTTP client for the core
//! simulator (`core_http`), a channel's side of the relay's HTTP door (`http_channel`), finding and spawning the workspace's binaries (`spawn`), the
//! processes a test starts, killed when dropped, or run to their end (`process`), temp
//! ledgers (`temp_ledger`), free ports (`net`), throwaway PostgreSQL servers (`pg`), a TCP
//! proxy that fails the way a network does (`proxy`) and, for TLS tests, a server
//! configuration (`tls`), a channel's TLS client (`tls_client`) and throwaway certificate authorities (`pki`).

pub mod channel;
pub mod core_http;
pub mod http_channel;
pub mod net;
#[cfg(feature = "ledger")]
pub mod pg;
#[cfg(feature = "pki")]
pub mod pki;
#[cfg(feature = "ledger")]
pub mod probes;
pub mod process;
pub mod proxy;
#[cfg(feature = "ledger")]
pub mod second_person;
pub mod spawn;
#[cfg(feature = "ledger")]
pub mod temp_ledger;
#[cfg(feature = "tls")]
pub mod tls;
#[cfg(feature = "tls")]
pub mod tls_client;

pub use channel::Chan;
pub use core_http::CoreHttp;
pub use net::{dead_url, free_port};
pub use spawn::{bin, spawn_listening};
#[cfg(feature = "ledger")]
pub use temp_ledger::TempLedger;
