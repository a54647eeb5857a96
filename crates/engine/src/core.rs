//! The core as the decisions see it: the port (`Core`, `PendingAnswer`) and what a call came
//! to (`Outcome`, `Inquiry`, `InquiryDetail`), from `core_api`, below this crate and the HTTP
//! client alike. The client (`core_client::CoreClient`) is the one implementation the relay
//! and the tools use; tests script their own, so that `transfer`, `late`, recovery mode and
//! the batch tools are checked without a socket.

pub use core_api::{Core, Inquiry, InquiryDetail, Outcome, PendingAnswer};
