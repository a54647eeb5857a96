//! The operator wrappers in `scripts/` end to end: each run as `bash scripts/X.sh` with its
//! settings in the environment, against the real binaries (`RELAY_BIN_DIR`), a temp ledger
//! and a core simulator. Asserts exit codes passed through, stdout untouched, stderr
//! timestamped, and the lock that keeps two runs of one wrapper apart.

mod installed;
mod locks;
mod passwords;
mod postinst;
mod runs;
mod settings;
mod tls;
mod wrappers;
