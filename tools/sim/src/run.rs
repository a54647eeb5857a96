//! One run of the simulator for one seed: a fresh SQLite ledger, the scripted core, channels
//! that send and resend a few GUIDs (some shared), resolve and reprocess running alongside,
//! late answers and requests still on their way delivered at random steps, requests crashing
//! at random yield points; then the end of the run settles what is left (every request on
//! its way landed, resolve with `--stale-sent`, reprocess) and `check` judges it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use core_api::PendingAnswer;
use engine::batch::{self, ResolveSettings};
use engine::events::Events;
use engine::transfer;
use ledger::store::Store;
use wire::Transfer;

use crate::check::{self, Answered, Verdict};
use crate::clock::{Clock, START_MS};
use crate::core::{REACH_MS, SimCore};
use crate::hold::SimHold;
use crate::sched::{Crash, Kind, Sched};
use engine::clock::Clock as _;

/// How a run is made.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    pub seed: u64,
    pub channels: usize,
    pub guids: usize,
    /// Resolve's `--min-age` is long enough that no request of a call given up on can still
    /// reach the core ([`MIN_AGE_SECS`], the core's [`REACH_MS`] and a second more); `false`
    /// drops that assumption (`--min-age 0`).
    pub timing: bool,
    /// One chance in this of a request crashing at each of its yield points.
    pub crash_one_in: u32,
    /// One chance in this that the ledger refuses an actor's write (0: never): claims
    /// answered E905, results retried on the run's clock for their record window, batch
    /// writes failed.
    pub refuse_write_one_in: u32,
    /// Two operators settle GUIDs by hand alongside (`operator`: a request and its
    /// approval, as `inspect settle` and `approve`).
    pub operators: bool,
    /// purge runs alongside with this retention (`purge --days`), while hours pass between
    /// requests and channels send a GUID only within [`RESEND_HORIZON_MS`] of its first send
    /// (`None`: no purge, no such hours, no horizon). A retention shorter than the horizon
    /// (0 days) deletes rows whose GUIDs may still be sent: the negative control.
    pub purge_days: Option<u64>,
}

impl Plan {
    pub fn new(seed: u64) -> Plan {
        Plan {
            seed,
            channels: 3,
            guids: 6,
            timing: true,
            crash_one_in: 40,
            refuse_write_one_in: 0,
            operators: false,
            purge_days: None,
        }
    }
}

/// Resolve's `--min-age` in the runs: the longest a request stays on its way, and the second
/// the ledger's timestamps round away.
pub const MIN_AGE_SECS: u64 = (REACH_MS as u64).div_ceil(1000) + 1;

/// `--stale-sent` at the end of a run (nothing is being sent then).
const STALE_SENT_SECS: u64 = 60;

/// With purge, a channel sends a GUID only within this of the GUID's first send (a bank's
/// channels give up resending after some horizon; purge's retention must be longer, docs:
/// operating.md). Half of purge's one day, less what a request can take on top.
pub const RESEND_HORIZON_MS: i64 = 12 * HOUR_MS;

/// A late call the relay would wait on: its answer to come, its attempt and request.
type LateCall = (Box<dyn PendingAnswer>, i64, Vec<u8>);

/// The run's clock as the engine reads it (`Events::clock`): an instant as far from the
/// origin as the run's clock is from its start, and a pause that moves the run's clock on and
/// gives the turn away (a request may crash there, as at any yield point).
struct EngineClock {
    sched: Arc<Sched>,
    origin: Instant,
}

impl engine::clock::Clock for EngineClock {
    fn now(&self) -> Instant {
        let ms = self.sched.clock().now_ms() - START_MS;
        self.origin + Duration::from_millis(ms.max(0) as u64)
    }
    fn sleep(&self, d: Duration) {
        self.sched.clock().advance(d.as_millis() as i64);
        self.sched.pause();
    }
}

/// The late calls, kept for the late-answer actor, each with the relay's life it began in
/// (a crash ends its waiter: its answer is never read); the engine's clock.
struct SimEvents {
    sched: Arc<Sched>,
    late: Mutex<Vec<(LateCall, u64)>>,
    clock: EngineClock,
}

impl Events for SimEvents {
    fn clock(&self) -> &dyn engine::clock::Clock {
        &self.clock
    }

    fn keeps_late_calls(&self) -> bool {
        true
    }

    fn late_call(&self, call: Box<dyn PendingAnswer>, attempt: i64, msg: Vec<u8>) {
        let epoch = self.sched.epoch();
        self.late
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(((call, attempt, msg), epoch));
    }
}

impl SimEvents {
    fn take(&self, k: Option<u64>) -> Vec<LateCall> {
        let now = self.sched.epoch();
        let mut late = self.late.lock().unwrap_or_else(|e| e.into_inner());
        // The waiters of a relay that died are gone with it: their answers are never read.
        late.retain(|(_, epoch)| *epoch == now);
        let taken = match k {
            None => std::mem::take(&mut *late),
            Some(_) if late.is_empty() => Vec::new(),
            Some(k) => {
                let n = late.len() as u64;
                vec![late.remove((k % n) as usize)]
            }
        };
        taken.into_iter().map(|(call, _)| call).collect()
    }

    fn settle(&self, store: &dyn Store, k: Option<u64>) {
        for (call, attempt, msg) in self.take(k) {
            let guid = call.guid().to_string();
            if let Some(outcome) = call.wait(self.clock.now()) {
                engine::late::settle(store, self, &guid, outcome, attempt, &msg);
            }
        }
    }
}

/// What the actors share.
#[derive(Clone)]
struct World {
    sched: Arc<Sched>,
    store: Arc<dyn Store>,
    core: Arc<SimCore>,
    events: Arc<SimEvents>,
    answered: Arc<Mutex<Vec<Answered>>>,
    channels_done: Arc<AtomicUsize>,
    channels: usize,
    /// With purge: when each GUID was first sent (the run's clock, ms), for the horizon.
    first_sent: Option<Arc<Mutex<HashMap<String, i64>>>>,
    /// Rows purge deleted.
    purged: Arc<AtomicUsize>,
}

impl World {
    /// Whether every channel has ended.
    fn all_sent(&self) -> bool {
        self.channels_done.load(Ordering::SeqCst) == self.channels
    }

    /// An actor that does `step` at random moments while the channels send.
    fn alongside(&self, step: impl Fn(&World) + Send + 'static) -> std::thread::JoinHandle<()> {
        let w = self.clone();
        self.sched.spawn(Kind::Other, move || {
            while !w.all_sent() {
                w.sched.pause();
                step(&w);
            }
        })
    }

    /// A channel: each of `guids` sent, then resent after a timeout on its side.
    fn channel(&self, guids: Vec<String>) {
        // Counted however the channel ends, so that the other actors stop with it.
        let _done = Done(Arc::clone(&self.channels_done));
        let s = &self.sched;
        for guid in guids {
            let msg = request(&guid);
            for _ in 0..=s.below(3) {
                if !self.within_horizon(&guid) {
                    break; // the channel gave up on it
                }
                let sent = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    s.begin_request();
                    let (store, core) = (self.store.as_ref(), self.core.as_ref());
                    let h = transfer::handle(store, core, self.events.as_ref(), None, &msg);
                    s.end_request();
                    h
                }));
                match sent {
                    Ok(h) => self.answered.lock().unwrap().push(Answered {
                        detail: h.detail.map(str::to_string),
                        guid: guid.clone(),
                        reply: h.reply,
                    }),
                    Err(p) if p.is::<Crash>() => {} // no answer: the channel resends
                    Err(p) => std::panic::resume_unwind(p),
                }
                // Between two requests the relay may die too: nothing is lost.
                let _ = std::panic::catch_unwind(|| s.pause());
            }
        }
    }
}

impl World {
    /// Whether a channel may still send `guid` now: always without purge; with it, within
    /// [`RESEND_HORIZON_MS`] of its first send. Checked in the same turn as the request
    /// begins, so that no hours pass in between (`time_passes`).
    fn within_horizon(&self, guid: &str) -> bool {
        let Some(first_sent) = &self.first_sent else {
            return true;
        };
        let now = self.sched.clock().now_ms();
        let mut first = first_sent.lock().unwrap_or_else(|e| e.into_inner());
        now <= *first.entry(guid.to_string()).or_insert(now) + RESEND_HORIZON_MS
    }

    /// With purge: hours pass (1 to 24), only while no request to the relay is under way and
    /// nothing is on its way to the core (a request takes moments, and the core's reach is
    /// bounded: the protocol's timing assumption); or purge runs, as its timer does.
    fn purge_or_time_passes(&self, days: u64) {
        match self.sched.below(3) {
            0 if self.sched.requests_in_progress() == 0 && self.core.in_flight() == 0 => {
                let hours = 1 + self.sched.below(24) as i64;
                self.sched.clock().advance(hours * HOUR_MS);
            }
            1 => {
                if let Ok(sum) = batch::purge(self.store.as_ref(), days, None) {
                    self.purged.fetch_add(sum.deleted, Ordering::SeqCst);
                }
            }
            _ => {}
        }
    }
}

/// Counts a channel as done when it ends.
struct Done(Arc<AtomicUsize>);

impl Drop for Done {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// The request of GUID `i`: the same bytes at every resend.
fn request(guid: &str) -> Vec<u8> {
    wire::encode_request(&Transfer {
        guid: guid.to_string(),
        from_account: "00000000000001".into(),
        to_account: "00000000000002".into(),
        amount: 1500,
        memo: "sim".into(),
    })
    .expect("a valid request")
}

/// What one run came to.
pub struct Outcome {
    pub verdict: Verdict,
    pub crashes: u64,
    pub steps: u64,
    pub answers: usize,
    /// Writes the ledger refused.
    pub refused: u64,
    /// Rows purge deleted.
    pub purged: usize,
}

const HOUR_MS: i64 = 3_600_000;

/// Runs `plan` on a new ledger in a directory of its own under `dir`.
pub fn run(plan: Plan, dir: &std::path::Path) -> Outcome {
    let sched = Sched::new(plan.seed, plan.crash_one_in, plan.refuse_write_one_in);
    // This thread's SQL too reads the run's clock (opening the ledger, the end of the run).
    sched.clock().enter();
    let min_age = if plan.timing { MIN_AGE_SECS } else { 0 };
    // A ledger of its own, new, removed with the run.
    let own = tempfile::tempdir_in(dir).expect("a run's directory");
    let ledger = ledger::sqlite::Ledger::open(&own.path().join("sim.db")).expect("a ledger");
    let hold = Arc::new(SimHold::new(ledger, Arc::clone(&sched)));
    let store: Arc<dyn Store> = hold.clone();
    let core = Arc::new(SimCore::new(Arc::clone(&sched)));
    let events = Arc::new(SimEvents {
        sched: Arc::clone(&sched),
        late: Mutex::default(),
        clock: EngineClock {
            sched: Arc::clone(&sched),
            origin: Instant::now(),
        },
    });
    let w = World {
        sched: Arc::clone(&sched),
        store,
        core,
        events,
        answered: Arc::default(),
        channels_done: Arc::default(),
        channels: plan.channels,
        first_sent: plan.purge_days.map(|_| Arc::default()),
        purged: Arc::default(),
    };
    let guids: Vec<String> = (0..plan.guids)
        .map(|i| format!("S{:x}-{i}", plan.seed))
        .collect();

    let mut actors = Vec::new();
    for _ in 0..plan.channels {
        // Each channel sends a few GUIDs of the run's (some sent by two channels at once).
        let mine: Vec<String> = (0..3)
            .map(|_| guids[sched.below(plan.guids as u64) as usize].clone())
            .collect();
        let w = w.clone();
        actors.push(sched.spawn(Kind::Request, move || w.channel(mine)));
    }
    // resolve, as its timer runs it, with the plan's `--min-age`; reprocess likewise; the
    // core's requests on their way landing and its late answers coming.
    actors.push(w.alongside(move |w| {
        let settings = ResolveSettings::new(min_age).parallel(1);
        let _ = batch::resolve(w.store.as_ref(), w.core.as_ref(), &settings);
    }));
    actors.push(w.alongside(|w| {
        let _ = batch::reprocess(
            w.store.as_ref(),
            w.core.as_ref(),
            20,
            None,
            1,
            &w.events.clock,
        );
    }));
    actors.push(w.alongside(|w| match w.sched.below(3) {
        0 => w.core.deliver(w.sched.below(16) as usize),
        1 => w.events.settle(w.store.as_ref(), Some(w.sched.below(16))),
        _ => {}
    }));
    if plan.operators {
        actors.push(w.alongside(move |w| {
            if w.sched.below(4) == 0 {
                crate::operator::settle_one(&w.sched, &hold, w.store.as_ref(), &w.core, min_age);
            }
        }));
    }
    if let Some(days) = plan.purge_days {
        actors.push(w.alongside(move |w| w.purge_or_time_passes(days)));
    }
    let failed = sched.run(actors);

    // The end: nothing more on its way, then resolve and reprocess until all is settled.
    let World {
        store,
        core,
        events,
        answered,
        purged,
        ..
    } = w;
    // An hour on, every request on its way has landed; each round after that an hour more
    // (past any inquiry's back-off).
    core.settle_mode();
    let clock = sched.clock();
    clock.advance(HOUR_MS);
    while core.in_flight() > 0 {
        core.deliver(0);
    }
    events.settle(store.as_ref(), None);
    for _ in 0..20 {
        let settings = ResolveSettings::new(min_age)
            .stale_sent(Some(STALE_SENT_SECS))
            .parallel(1);
        let _ = batch::resolve(store.as_ref(), core.as_ref(), &settings);
        let _ = batch::reprocess(store.as_ref(), core.as_ref(), 100, None, 1, &events.clock);
        if check::all_settled(store.as_ref()) {
            break;
        }
        clock.advance(HOUR_MS);
    }
    let answers = answered.lock().unwrap().clone();
    if std::env::var_os("SIM_TRACE").is_some() {
        for a in &answers {
            eprintln!(
                "answer: {} {:?} {:?}",
                a.guid,
                String::from_utf8_lossy(&a.reply[36..]),
                a.detail
            );
        }
    }
    let mut verdict = check::check(store.as_ref(), &core.bookings(), &answers);
    if let Err(why) = failed {
        verdict
            .violations
            .insert(0, format!("an actor panicked: {why}"));
    }
    let (crashes, steps, refused) = sched.counts();
    Clock::leave();
    Outcome {
        verdict,
        crashes,
        steps,
        answers: answers.len(),
        refused,
        purged: purged.load(Ordering::SeqCst),
    }
}
