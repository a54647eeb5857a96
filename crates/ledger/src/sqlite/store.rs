//! The one SQLite `Store`, whatever holds the connections: each operation is one `Ledger`
//! method, run where the holder ([`Hold`]) runs writes or reads. One connection under a lock
//! (the batch tools, `inspect`) runs both on it; the relay's group commit
//! (`group_commit::GroupCommit`) submits writes to its writer thread and reads on its pool.

use std::sync::{Mutex, MutexGuard};

use super::Ledger;
use crate::error::Result;
use crate::page::{Counted, Cursor};
use crate::recovery::{LedgerEvent, Recovery};
use crate::settle_request::{Listed, SettleRequest, Undecided};
use crate::state::{HistoryRow, Row, State};
use crate::store::{
    Durability, Inquiries, InquiryRecord, Recovering, Reports, Retention, Settling, Transfers,
    health_read_back,
};

/// Where an SQLite store's statements run.
pub trait Hold: Send + Sync {
    /// Runs the write `f` where this holder's writes run, and returns what it came to.
    fn write_with<R: Send + 'static>(
        &self,
        f: impl FnOnce(&Ledger) -> Result<R> + Send + 'static,
    ) -> Result<R>;
    /// Runs the read `f` on a connection this holder reads with.
    fn read_with<R>(&self, f: impl FnOnce(&Ledger) -> Result<R>) -> Result<R>;
    /// The durability settings of every connection this holder writes or reads with.
    fn durabilities(&self) -> Result<Vec<Durability>>;
}

/// One connection, shared under a lock: the batch tools' and `inspect`'s store.
impl Hold for Mutex<Ledger> {
    fn write_with<R: Send + 'static>(
        &self,
        f: impl FnOnce(&Ledger) -> Result<R> + Send + 'static,
    ) -> Result<R> {
        f(&lock(self))
    }
    fn read_with<R>(&self, f: impl FnOnce(&Ledger) -> Result<R>) -> Result<R> {
        f(&lock(self))
    }
    fn durabilities(&self) -> Result<Vec<Durability>> {
        Ok(vec![lock(self).durability()?])
    }
}

fn lock(l: &Mutex<Ledger>) -> MutexGuard<'_, Ledger> {
    l.lock().unwrap_or_else(|e| e.into_inner())
}

/// Every write owns its arguments: it may run on another thread (the group commit's writer).
impl<H: Hold> Transfers for H {
    fn read(&self, guid: &str) -> Result<Option<Row>> {
        self.read_with(|l| l.get(guid))
    }
}

impl<H: Hold> Inquiries for H {
    fn select_due(&self, state: State, min_age_secs: u64, max_inquiries: u32) -> Result<Vec<Row>> {
        self.read_with(|l| l.select_due(state, min_age_secs, max_inquiries))
    }
    fn needs_operator(&self, max_inquiries: u32) -> Result<Vec<InquiryRecord>> {
        self.read_with(|l| l.needs_operator(max_inquiries))
    }
    fn select_resendable(&self, max_attempts: i64, limit: Option<u64>) -> Result<Vec<Row>> {
        self.read_with(|l| l.select_resendable(max_attempts, limit))
    }
    fn recent_bookings(&self, limit: usize) -> Result<Vec<Row>> {
        self.read_with(|l| l.recent_bookings(limit))
    }
}

impl<H: Hold> Retention for H {
    fn select_purgeable(&self, days: u64) -> Result<Vec<Row>> {
        self.read_with(|l| l.select_purgeable(days))
    }
}

impl<H: Hold> Reports for H {
    fn all_rows(&self) -> Result<Vec<Row>> {
        self.read_with(|l| l.all_rows())
    }
    fn scan_for_reconcile(&self, f: &mut dyn FnMut(crate::reconcile::ReconcileRow)) -> Result<()> {
        self.read_with(|l| l.scan_for_reconcile(f))
    }
    fn state_page(
        &self,
        state: State,
        older_than_secs: Option<u64>,
        after: Option<&Cursor>,
        limit: u64,
    ) -> Result<Vec<(Cursor, Row)>> {
        self.read_with(|l| l.state_page(state, older_than_secs, after, limit))
    }
    fn row_age_secs(&self, guid: &str) -> Result<Option<f64>> {
        self.read_with(|l| l.row_age_secs(guid))
    }
    fn inquiry_record(&self, guid: &str) -> Result<Option<InquiryRecord>> {
        self.read_with(|l| l.inquiry_record(guid))
    }
    fn count_aged(&self, state: State, older_than_secs: Option<u64>) -> Result<i64> {
        self.read_with(|l| l.count_aged(state, older_than_secs))
    }
    fn at_attempt_cap(&self, max_attempts: i64, limit: u64) -> Result<Counted<Row>> {
        self.read_with(|l| l.at_attempt_cap(max_attempts, limit))
    }
    fn needs_operator_first(
        &self,
        max_inquiries: u32,
        limit: u64,
    ) -> Result<Counted<InquiryRecord>> {
        self.read_with(|l| l.needs_operator_first(max_inquiries, limit))
    }
    fn count_by_state(&self) -> Result<Vec<(State, i64)>> {
        self.read_with(|l| l.count_by_state())
    }
    fn history(&self, guid: &str) -> Result<Vec<HistoryRow>> {
        self.read_with(|l| l.history(guid))
    }
    fn oldest_age_secs(&self, state: State) -> Result<Option<f64>> {
        self.read_with(|l| l.oldest_age_secs(state))
    }
    /// Written where claims are written (the group commit: a commit like any claim's), read
    /// back where requests read.
    fn health_round_trip(&self) -> Result<()> {
        self.write_with(|l| l.touch_health())?;
        health_read_back(self.read_with(|l| l.read_health())?)
    }
    fn durability(&self) -> Result<Vec<Durability>> {
        self.durabilities()
    }
}

impl<H: Hold> Recovering for H {
    fn recovery(&self) -> Result<Option<Recovery>> {
        self.read_with(|l| l.recovery())
    }
    fn ledger_events(&self, limit: u64) -> Result<Vec<LedgerEvent>> {
        self.read_with(|l| l.events(limit))
    }
}

impl<H: Hold> Settling for H {
    fn settle_request(&self, id: i64) -> Result<Option<SettleRequest>> {
        self.read_with(|l| l.settle_request(id))
    }
    fn settle_requests(&self, which: Listed<'_>, limit: u64) -> Result<Vec<SettleRequest>> {
        self.read_with(|l| l.settle_requests(which, limit))
    }
    fn undecided_settle_requests(&self) -> Result<Undecided> {
        self.read_with(|l| l.undecided_settle_requests())
    }
    fn identity(&self) -> Result<String> {
        Ok(crate::identity::operator())
    }
}
