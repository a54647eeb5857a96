//! A COMMIT whose wait for the synchronous standby was cut short is not a commit (contract
//! §7, v1.3).
//!
//! With a synchronous standby, a COMMIT is written on the primary first and then waits until
//! the standby has it. `pg_cancel_backend` (an operator, a pooler, a timeout on the server)
//! ends that wait early, and PostgreSQL then answers the COMMIT as a success, with nothing
//! but a WARNING ("canceling wait for synchronous replication due to user request", detail
//! "The transaction has already committed locally, but might not have been replicated to
//! the standby"). Such a row is on the primary alone and is lost in a failover: a claim
//! taken as won would call the core, and after the failover the channel's resend would be
//! claimed and booked again.
//!
//! So every pooled session gets a notice callback that raises a flag of its own when that
//! warning comes, and the pool looks at the flag after each operation (every COMMIT,
//! explicit or autocommitted, ends one): an operation that met it fails with
//! `LedgerError::NotReplicated`, whatever it returned, and its connection is closed, so no
//! later operation runs on a session whose commits are in doubt. The warning arrives before
//! the COMMIT's own answer on the same connection, and the blocking client runs the
//! callback as it reads it, so the flag is up by the time the operation returns.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use postgres::error::{DbError, Severity};

use crate::error::LedgerError;

/// The server function that ends the wait and warns: reported in the notice's `R` field,
/// which, unlike the message, is never translated (`lc_messages`).
const ROUTINE: &str = "SyncRepWaitForLSN";

/// The English message's words, for a server that does not report the routine.
const MESSAGE: &str = "wait for synchronous replication";

/// One session's flag: raised by its notice callback, taken by the pool after each
/// operation.
#[derive(Debug, Clone, Default)]
pub struct Watch(Arc<AtomicBool>);

impl Watch {
    /// Whether a COMMIT of the operation that just ran was cut short; lowers the flag.
    pub fn take(&self) -> bool {
        self.0.swap(false, Ordering::SeqCst)
    }
}

/// Installs the notice callback on `config` and gives the session's flag. Other notices are
/// logged at INFO, as the client does by default.
pub fn watch(config: &mut postgres::Config) -> Watch {
    let flag = Watch::default();
    let raised = Arc::clone(&flag.0);
    config.notice_callback(move |notice: DbError| {
        if is_cut_short_wait(&notice) {
            raised.store(true, Ordering::SeqCst);
        } else {
            log::info!("{}: {}", notice.severity(), notice.message());
        }
    });
    flag
}

/// Whether `notice` is PostgreSQL's warning that a COMMIT's wait for synchronous replication
/// was cancelled (SQLSTATE 01000, by `pg_cancel_backend`) or ended because the session is
/// being terminated (57P01): either way, committed on the primary alone.
fn is_cut_short_wait(notice: &DbError) -> bool {
    let warning = notice.parsed_severity() == Some(Severity::Warning)
        || (notice.parsed_severity().is_none() && notice.severity() == "WARNING");
    warning && names_the_wait(notice.routine(), notice.message())
}

/// The routine if the server reported it (the sure sign), else the English message.
fn names_the_wait(routine: Option<&str>, message: &str) -> bool {
    match routine {
        Some(r) => r == ROUTINE,
        None => message.contains(MESSAGE),
    }
}

/// What an operation whose COMMIT was cut short fails with, and reports: one commit not
/// replicated (`observe`), for the metrics and the log.
pub fn not_replicated(what: &'static str) -> LedgerError {
    crate::observe::not_replicated(what);
    LedgerError::NotReplicated { what }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_warning_is_known_by_its_routine_whatever_the_language() {
        let cancel = "canceling wait for synchronous replication due to user request";
        assert!(names_the_wait(Some(ROUTINE), cancel));
        // A server with lc_messages = 'de_DE': the routine still says it.
        assert!(names_the_wait(
            Some(ROUTINE),
            "breche Warten auf synchrone Replikation ab"
        ));
        // Terminated rather than cancelled: the same routine, another message.
        assert!(names_the_wait(
            Some(ROUTINE),
            "canceling the wait for synchronous replication and terminating connection due \
             to administrator command"
        ));
        assert!(names_the_wait(None, cancel));
    }

    #[test]
    fn other_warnings_are_not_it() {
        assert!(!names_the_wait(
            Some("ProcessUtilitySlow"),
            "there is no transaction in progress"
        ));
        assert!(!names_the_wait(
            None,
            "there is already a transaction in progress"
        ));
        // The routine decides when there is one, even if a message quotes the words.
        assert!(!names_the_wait(
            Some("exec_simple_query"),
            "canceling wait for synchronous replication"
        ));
    }

    #[test]
    fn the_flag_is_taken_once() {
        let w = Watch::default();
        assert!(!w.take());
        w.0.store(true, Ordering::SeqCst);
        assert!(w.take());
        assert!(!w.take(), "taken: lowered");
    }

    #[test]
    fn the_error_says_what_was_not_written_and_why() {
        let e = not_replicated("claiming");
        let text = e.to_string();
        assert!(text.contains("claiming"), "{text}");
        assert!(text.contains("synchronous standby"), "{text}");
        assert!(text.contains("not replicated"), "{text}");
    }
}
