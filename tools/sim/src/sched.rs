//! The seeded scheduler: every actor (a channel, resolve, reprocess, the core's late answers)
//! is a thread, but only the one holding the turn runs. At each yield point — every ledger
//! access (`hold`) and every step of a core call (`core`) — the actor gives the turn back and
//! the scheduler's random generator picks who runs next, so that one seed is one
//! interleaving, replayed exactly. At a yield point inside a relay's request the relay may
//! also crash: that request unwinds where it stands, and so does every other request the
//! relay was serving, at its next yield point (a new relay *epoch* begins; the late-reply
//! waiters of the old one are gone too, `run`).

use std::cell::Cell;
use std::collections::BTreeSet;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::{JoinHandle, Thread};

use crate::clock::Clock;

/// The most the run's clock moves on at one yield point, in milliseconds (drawn from
/// 0..=this each time).
pub const STEP_MS: u64 = 200;

/// How long an outage of the ledger lasts on the run's clock (`Sched::refuses_write`).
pub const OUTAGE_MS: i64 = 15_000;

/// The panic payload of a crash.
pub struct Crash;

/// What an actor is: only a relay's request can crash mid-way (the batch tools' runs and the
/// core's answers are not the relay's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Request,
    Other,
}

struct State {
    rng: fastrand::Rng,
    turn: Option<usize>,
    live: BTreeSet<usize>,
    kinds: Vec<Kind>,
    /// Each actor's thread, once it runs: the one given the turn is woken alone (one
    /// condition variable for all woke every actor at every yield point).
    threads: Vec<Option<Thread>>,
    /// One chance in this of a crash at each yield point of a request (0: never).
    crash_one_in: u32,
    /// One chance in this that the ledger refuses an actor's write (0: never).
    refuse_write_one_in: u32,
    /// Until then (the run's clock, ms) the ledger refuses every write: an outage.
    refuse_until_ms: i64,
    /// The relay's lives: a crash begins the next one.
    epoch: u64,
    /// Requests to the relay begun and neither answered nor unwound by a crash.
    requests: usize,
    pub crashes: u64,
    pub steps: u64,
    pub refused: u64,
}

pub struct Sched {
    state: Mutex<State>,
    clock: Clock,
}

thread_local! {
    static ME: Cell<Option<usize>> = const { Cell::new(None) };
    /// The relay's life the calling actor's request began in (`None`: not in a request).
    static IN_REQUEST: Cell<Option<u64>> = const { Cell::new(None) };
}

impl Sched {
    pub fn new(seed: u64, crash_one_in: u32, refuse_write_one_in: u32) -> Arc<Sched> {
        Arc::new(Sched {
            state: Mutex::new(State {
                rng: fastrand::Rng::with_seed(seed),
                turn: None,
                live: BTreeSet::new(),
                kinds: Vec::new(),
                threads: Vec::new(),
                crash_one_in,
                refuse_write_one_in,
                refuse_until_ms: 0,
                epoch: 0,
                requests: 0,
                crashes: 0,
                steps: 0,
                refused: 0,
            }),
            clock: Clock::default(),
        })
    }

    /// The run's clock (the ledger's SQL reads it on every thread of the run).
    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A random number from the run's generator, drawn by whoever holds the turn.
    pub fn below(&self, n: u64) -> u64 {
        self.lock().rng.u64(0..n.max(1))
    }

    /// Registers an actor of `kind` running `f` once the scheduler gives it the turn.
    pub fn spawn(
        self: &Arc<Self>,
        kind: Kind,
        f: impl FnOnce() + Send + 'static,
    ) -> JoinHandle<()> {
        let id = {
            let mut s = self.lock();
            s.kinds.push(kind);
            s.threads.push(None);
            let id = s.kinds.len() - 1;
            s.live.insert(id);
            id
        };
        let sched = Arc::clone(self);
        std::thread::Builder::new()
            .stack_size(512 * 1024)
            .spawn(move || {
                ME.with(|me| me.set(Some(id)));
                sched.clock.enter();
                sched.lock().threads[id] = Some(std::thread::current());
                sched.wait_turn(id);
                let ran = catch_unwind(AssertUnwindSafe(f));
                if let Err(payload) = ran
                    && !payload.is::<Crash>()
                {
                    sched.finish(id);
                    std::panic::resume_unwind(payload);
                }
                sched.finish(id);
            })
            .expect("a thread")
    }

    /// Gives the first turn and waits until every actor has finished.
    pub fn run(&self, actors: Vec<JoinHandle<()>>) -> Result<(), String> {
        self.lock().pass_turn();
        let mut failed = None;
        for a in actors {
            if let Err(e) = a.join() {
                let why = e
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "an actor panicked".into());
                failed.get_or_insert(why);
            }
        }
        failed.map_or(Ok(()), Err)
    }

    /// Waits for the turn (the calling thread is actor `id`): parked until the actor giving
    /// the turn wakes it (an unpark before the park is kept, so none is lost).
    fn wait_turn(&self, id: usize) {
        while self.lock().turn != Some(id) {
            std::thread::park();
        }
    }

    /// The relay's life now.
    pub fn epoch(&self) -> u64 {
        self.lock().epoch
    }

    /// The calling actor begins a request to the relay (until `end_request`).
    pub fn begin_request(&self) {
        let epoch = {
            let mut s = self.lock();
            s.requests += 1;
            s.epoch
        };
        IN_REQUEST.with(|r| r.set(Some(epoch)));
    }

    pub fn end_request(&self) {
        if IN_REQUEST.with(|r| r.take()).is_some() {
            self.lock().requests -= 1;
        }
    }

    /// How many requests to the relay are under way (begun, neither answered nor unwound).
    pub fn requests_in_progress(&self) -> usize {
        self.lock().requests
    }

    /// A yield point of the actor running now (none outside an actor: the end of a run).
    pub fn pause(&self) {
        let Some(id) = ME.with(Cell::get) else {
            return;
        };
        {
            let mut s = self.lock();
            s.steps += 1;
            let ms = s.rng.u64(0..=STEP_MS);
            self.clock.advance(ms as i64);
            if let Some(began) = IN_REQUEST.with(Cell::get)
                && s.kinds[id] == Kind::Request
            {
                let one_in = s.crash_one_in;
                // The relay died since this request began, or dies now.
                let died = began < s.epoch;
                if !died && one_in > 0 && s.rng.u32(0..one_in) == 0 {
                    s.epoch += 1;
                    s.crashes += 1;
                }
                if died || began < s.epoch {
                    s.requests -= 1;
                    drop(s);
                    IN_REQUEST.with(|r| r.set(None));
                    std::panic::panic_any(Crash);
                }
            }
            s.pass_turn();
        }
        self.wait_turn(id);
    }

    /// Whether the ledger refuses the write the running actor is about to make (as a ledger
    /// locked past its busy timeout does: nothing written). One refusal in eight begins an
    /// outage of [`OUTAGE_MS`] on the run's clock, in which every write is refused: longer
    /// than a result's record window, so that some results are never written. Never outside
    /// an actor (the end of a run settles everything).
    pub fn refuses_write(&self) -> bool {
        if ME.with(Cell::get).is_none() {
            return false;
        }
        let mut s = self.lock();
        let one_in = s.refuse_write_one_in;
        if one_in == 0 {
            return false;
        }
        let now = self.clock.now_ms();
        let refused = now < s.refuse_until_ms || s.rng.u32(0..one_in) == 0;
        if refused && now >= s.refuse_until_ms && s.rng.u32(0..8) == 0 {
            s.refuse_until_ms = now + OUTAGE_MS;
        }
        s.refused += u64::from(refused);
        refused
    }

    fn finish(&self, id: usize) {
        {
            let mut s = self.lock();
            s.live.remove(&id);
            s.pass_turn();
        }
    }

    /// Crashes, yield points and refused writes so far.
    pub fn counts(&self) -> (u64, u64, u64) {
        let s = self.lock();
        (s.crashes, s.steps, s.refused)
    }
}

impl State {
    /// Gives the turn to a live actor chosen by the generator (none left: nobody), and wakes
    /// it if its thread waits already (if not, it finds the turn its own when it starts).
    fn pass_turn(&mut self) {
        let n = self.live.len();
        self.turn = if n == 0 {
            None
        } else {
            let k = self.rng.usize(0..n);
            self.live.iter().nth(k).copied()
        };
        if let Some(t) = self.turn.and_then(|id| self.threads[id].as_ref()) {
            t.unpark();
        }
    }
}
