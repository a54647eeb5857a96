//! End-to-end tests of the relay on a PostgreSQL ledger whose server fails (contract §7,
//! issue 10 items 2 and 3): each test starts a private cluster (`testkit::pg::Server::own`),
//! a core simulator and a relay, then restarts the server (`restart`), freezes it (`hung`),
//! cuts or black-holes the network to it through a proxy (`network`), starts the relay while
//! it is down (`startup`), runs it over TLS (`tls`), cancels a claim's wait for a frozen
//! synchronous standby (`sync_cancel`), or kills the primary and promotes its standby, the
//! relay's URL listing both (`failover`).
//!
//! What every fault must leave true: each request is answered within the relay's own
//! deadline (`E905` or `0000`, never a hang), a GUID answered `E905` was never sent to the
//! core (and its row, if one was written, is `SENT` or `FAILED` and settles), no GUID is
//! booked twice, and service comes back by itself within a second or two of the server.
//!
//! Without PostgreSQL installed, each test prints one line and passes, unless
//! `REQUIRE_POSTGRES` is set. Timings are printed on stderr (`--nocapture` shows them).

mod util;

mod durability;
mod failover;
mod hung;
mod network;
mod restart;
mod startup;
mod sync_cancel;
mod tls;
