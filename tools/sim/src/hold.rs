//! The ledger as the simulator holds it: the real SQLite `Store` (its SQL, its guarded
//! statements) over one connection, with a yield point before each read and write, so that
//! the scheduler can interleave actors between any two ledger steps; a run may have the
//! ledger refuse some writes, as a ledger locked past its busy timeout does.

use std::sync::{Arc, Mutex, MutexGuard};

use ledger::error::LedgerError;
use ledger::sqlite::{Hold, Ledger};
use ledger::store::Durability;

use crate::sched::Sched;

pub struct SimHold {
    ledger: Mutex<Ledger>,
    sched: Arc<Sched>,
}

impl SimHold {
    pub fn new(ledger: Ledger, sched: Arc<Sched>) -> SimHold {
        SimHold {
            ledger: Mutex::new(ledger),
            sched,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Ledger> {
        self.ledger.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Who the ledger's triggers see acting from now on (`txrelay_identity()`, which the
    /// ledger gives a tool's connection from the system's identity): one of the simulator's
    /// two operators.
    pub fn act_as(&self, who: &'static str) {
        self.lock()
            .connection()
            .create_scalar_function(
                ledger::settle_request::SQLITE_IDENTITY_FUNCTION,
                0,
                rusqlite::functions::FunctionFlags::SQLITE_UTF8,
                move |_| Ok(who),
            )
            .expect("an identity for the ledger's triggers");
    }
}

impl Hold for SimHold {
    fn write_with<R: Send + 'static>(
        &self,
        f: impl FnOnce(&Ledger) -> ledger::error::Result<R> + Send + 'static,
    ) -> ledger::error::Result<R> {
        self.sched.pause();
        if self.sched.refuses_write() {
            return Err(LedgerError::Unavailable(
                "the simulator's ledger refuses this write".into(),
            ));
        }
        f(&self.lock())
    }

    fn read_with<R>(
        &self,
        f: impl FnOnce(&Ledger) -> ledger::error::Result<R>,
    ) -> ledger::error::Result<R> {
        self.sched.pause();
        f(&self.lock())
    }

    fn durabilities(&self) -> ledger::error::Result<Vec<Durability>> {
        Ok(vec![self.lock().durability()?])
    }
}
