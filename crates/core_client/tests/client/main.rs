//! The core client against tiny servers, through its public API only: each failure shape of
//! a POST, inquiries, and TLS.

mod inquiry;
mod post;
mod tls;
mod util;
