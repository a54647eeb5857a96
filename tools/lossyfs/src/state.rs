//! What the file system and the control socket share: the gate and the model, behind one
//! lock, and the three things the control socket does with them.

use std::io;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::gate::{Gate, Stats};
use crate::model::{DropReport, Mode, Tracker};

/// The gate and the model.
#[derive(Debug)]
pub struct State {
    pub gate: Gate,
    pub tracker: Tracker,
}

/// The state, shared between the FUSE thread and the control thread.
#[derive(Debug, Clone)]
pub struct Shared(Arc<Mutex<State>>);

impl Shared {
    pub fn new(state: State) -> Self {
        Self(Arc::new(Mutex::new(state)))
    }

    /// Locks the state. A panic while it was held leaves it as it was: it is still used.
    pub fn lock(&self) -> MutexGuard<'_, State> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn stats(&self) -> Stats {
        let state = self.lock();
        let tracker = &state.tracker;
        state
            .gate
            .stats(tracker.dirty_blocks(), tracker.dirty_entries())
    }

    pub fn freeze(&self) {
        self.lock().gate.freeze();
    }

    /// Freezes, then forgets what was not durable.
    pub fn drop_unsynced(&self, mode: Mode, seed: u64) -> io::Result<DropReport> {
        let mut state = self.lock();
        state.gate.freeze();
        state.tracker.drop_unsynced(mode, seed)
    }

    /// A clean end (unmounted without a drop): what happened stays, the trash goes.
    pub fn finish(&self) -> io::Result<()> {
        self.lock().tracker.clear_trash()
    }
}
