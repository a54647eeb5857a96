//! A deterministic simulator of the relay's decisions (issue 41): `engine` with the real SQL
//! on SQLite (`hold`), a scripted core (`core`), and a seeded scheduler (`sched`) that
//! interleaves channels' sends and resends, request crashes, late answers, requests still on
//! their way, resolve and reprocess, and, when asked, two operators settling by hand
//! (`operator`) and purge with hours passing, at every ledger access and core step (`run`),
//! on a clock of the run's own that the ledger's SQL reads (`clock`); `check` judges each run
//! against the core's journal. One seed is one run, replayed exactly.

pub mod check;
pub mod clock;
pub mod core;
pub mod hold;
pub mod operator;
pub mod run;
pub mod sched;

pub use run::{Outcome, Plan, run};

/// Keeps the crashes a run makes on purpose out of stderr (every other panic is printed).
pub fn quiet_crashes() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !info.payload().is::<sched::Crash>() {
            default(info);
        }
    }));
}
