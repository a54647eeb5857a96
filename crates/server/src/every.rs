//! A background thread that runs one task every so often until its owner is dropped: the
//! metrics sampler, the recovery mark's watcher. Dropping stops the thread at once (the wait
//! is on a channel, not a sleep) and joins it.

use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::Duration;

/// The thread, running until dropped.
pub struct Every {
    stop: Option<Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Every {
    /// Starts a thread `name` that runs `task` now and then every `period`.
    pub fn start(
        name: &str,
        period: Duration,
        mut task: impl FnMut() + Send + 'static,
    ) -> std::io::Result<Every> {
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(name.into())
            .stack_size(256 * 1024)
            .spawn(move || {
                loop {
                    task();
                    match stopped.recv_timeout(period) {
                        Err(RecvTimeoutError::Timeout) => {}
                        _ => return,
                    }
                }
            })?;
        Ok(Every {
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// No thread at all (an owner that never runs its task).
    pub fn never() -> Every {
        Every {
            stop: None,
            thread: None,
        }
    }
}

impl Drop for Every {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
