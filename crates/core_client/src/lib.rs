//! The HTTP client to the core (contract §3) and the classification of its failures.
//!
//! The whole safety of the relay rests on one split: `NotSent` only where the request
//! provably never left this process (the name did not resolve, the socket could not be
//! created or connected: see `pre_send`), and `Unknown` for everything else, because the
//! core may have booked it. The client is in `client`, what its answers and failures mean in
//! `outcome` (both re-exported here). Also here: its TLS settings (`tls`), the marking of
//! failures before any byte was sent (`pre_send`), the capture of a call given up at its read
//! timeout for a late reply (`capture`), what it reports about its connections
//! (`observe`), and the client as the decisions' port to the core (`port`: `core_api::Core`).

pub mod capture;
mod client;
pub mod observe;
mod outcome;
mod port;
pub mod pre_send;
pub mod tls;

pub use client::{BadCoreUrl, CoreClient, DEFAULT_PARALLEL, MAX_IDLE, transfer_json};
pub use outcome::{Inquiry, InquiryDetail, Ours, Outcome, outcome_of};
