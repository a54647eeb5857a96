//! The one SQLite `Store`, whatever holds the connections: each operation is one `Ledger`
//! method, run where the holder ([`Hold`]) runs writes or reads. One connection under a lock
//! (the batch tools, `inspect`) runs both on it; the relay's group commit
//! (`group_commit::GroupCommit`) submits writes to its writer thread and reads on its pool.

use std::sync::{Mutex, MutexGuard};

use super::Ledger;
use crate::error::Result;
use crate::page::{Counted, Cursor};
use crate::recovery::{Booked, LedgerEvent, Recovery};
use crate::settle_request::{Decided, Listed, NewRequest, SettleRequest, Undecided};
use crate::state::{Change, Evidence, HistoryRow, Row, State};
use crate::store::{
    Durability, Inquiries, InquiryRecord, Probes, Recovering, Reports, Retention, Settling,
    Transfers, health_read_back,
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
    fn claim_new(
        &self,
        guid: &str,
        tx_code: &str,
        request: &[u8],
        channel: Option<&str>,
    ) -> Result<bool> {
        let (guid, tx_code, request) = (guid.to_string(), tx_code.to_string(), request.to_vec());
        let channel = channel.map(str::to_string);
        self.write_with(move |l| l.claim_new(&guid, &tx_code, &request, channel.as_deref()))
    }
    fn reclaim_failed(
        &self,
        guid: &str,
        request: &[u8],
        channel: Option<&str>,
    ) -> Result<Option<i64>> {
        let (guid, request) = (guid.to_string(), request.to_vec());
        let channel = channel.map(str::to_string);
        self.write_with(move |l| l.reclaim_failed(&guid, &request, channel.as_deref()))
    }
    fn transition(&self, change: &Change) -> Result<bool> {
        let change = change.clone();
        self.write_with(move |l| l.transition(&change))
    }
    fn record_evidence(&self, evidence: &Evidence) -> Result<()> {
        let evidence = evidence.clone();
        self.write_with(move |l| l.record_evidence(&evidence))
    }
}

impl<H: Hold> Inquiries for H {
    fn reclaim_for_resend(&self, guid: &str, max_attempts: i64) -> Result<Option<i64>> {
        let guid = guid.to_string();
        self.write_with(move |l| l.reclaim_for_resend(&guid, max_attempts))
    }
    fn select_due(&self, state: State, min_age_secs: u64, max_inquiries: u32) -> Result<Vec<Row>> {
        self.read_with(|l| l.select_due(state, min_age_secs, max_inquiries))
    }
    fn record_inquiry_failure(
        &self,
        guid: &str,
        error: &str,
        min_age_secs: u64,
    ) -> Result<InquiryRecord> {
        let (guid, error) = (guid.to_string(), error.to_string());
        self.write_with(move |l| l.record_inquiry_failure(&guid, &error, min_age_secs))
    }
    fn clear_inquiry(&self, guid: &str) -> Result<bool> {
        let guid = guid.to_string();
        self.write_with(move |l| l.clear_inquiry(&guid))
    }
    fn prune_inquiries(&self) -> Result<usize> {
        self.write_with(|l| l.prune_inquiries())
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
    fn purge_chunk(&self, days: u64, limit: usize) -> Result<usize> {
        self.write_with(move |l| l.purge_chunk(days, limit))
    }
    fn purge_history_chunk(&self, days: u64, tx_days: u64, limit: usize) -> Result<usize> {
        self.write_with(move |l| l.purge_history_chunk(days, tx_days, limit))
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
    fn begin_recovery(&self, since: &str, who: &str, detail: &str) -> Result<Recovery> {
        let (since, who, detail) = (since.to_string(), who.to_string(), detail.to_string());
        self.write_with(move |l| l.begin_recovery(&since, &who, &detail))
    }
    fn end_recovery(&self, who: &str, detail: &str) -> Result<Option<Recovery>> {
        let (who, detail) = (who.to_string(), detail.to_string());
        self.write_with(move |l| l.end_recovery(&who, &detail))
    }
    fn record_booked(&self, b: &Booked) -> Result<bool> {
        let b = b.clone();
        self.write_with(move |l| l.record_booked(&b))
    }
    fn record_ledger_event(&self, who: &str, event: &str, detail: &str) -> Result<()> {
        let (who, event, detail) = (who.to_string(), event.to_string(), detail.to_string());
        self.write_with(move |l| l.record_event(&who, &event, &detail))
    }
    fn ledger_events(&self, limit: u64) -> Result<Vec<LedgerEvent>> {
        self.read_with(|l| l.events(limit))
    }
}

impl<H: Hold> Settling for H {
    fn make_settle_request(&self, request: &NewRequest) -> Result<i64> {
        let request = request.clone();
        self.write_with(move |l| l.make_settle_request(&request))
    }
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
    fn approve_settle_request(&self, id: i64, why: Option<&str>) -> Result<Decided> {
        let why = why.map(str::to_string);
        self.write_with(move |l| l.approve_settle_request(id, why.as_deref()))
    }
    fn reject_settle_request(&self, id: i64, why: &str) -> Result<Decided> {
        let why = why.to_string();
        self.write_with(move |l| l.reject_settle_request(id, &why))
    }
}

impl<H: Hold> Probes for H {
    fn select_aged(&self, state: State, min_age_secs: u64) -> Result<Vec<Row>> {
        self.read_with(|l| l.select_aged(state, min_age_secs))
    }
    fn inquiry_records(&self) -> Result<Vec<InquiryRecord>> {
        self.read_with(|l| l.inquiry_records())
    }
}
