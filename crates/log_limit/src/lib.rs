//! Repeated warnings, rate-limited. A storm of one kind of warning — every transfer answered
//! E905 while the ledger's disk is full, E902 while the core is down, a refused handshake
//! each time a misconfigured channel reconnects — writes at most a few lines per interval,
//! then one line saying how many of that kind were left out. A full disk once wrote 105,904
//! lines (17 MB) in 15 s from two connections: the log took what little space was left, and
//! the line that said why scrolled away. The exact counts are where they always were, in the
//! metrics (`txrelay_requests_total{code="E905"}`, …); the log says what is happening, not
//! how often.
//!
//! Each call site of [`warn_limited!`] has a [`Limiter`] of its own (a static the macro
//! declares), so that one storm never hides another kind of warning. The per-request access
//! lines (INFO) are not limited: they are the record of what each channel was told.
//!
//! What was left out is counted in one line when the next warning of that kind is let
//! through, or, once a storm has stopped, by a background thread (`log-limit`, started by
//! the first warning left out) when the interval is over; [`flush_all`] writes what is
//! pending at once, for a process that is ending.

#[doc(hidden)]
pub use log;

use std::sync::{Mutex, MutexGuard, Once};
use std::thread;
use std::time::{Duration, Instant};

/// How many lines of one kind may be written per interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    pub interval: Duration,
    pub burst: u32,
}

/// Warnings a request can cause (E905, E902, E901, a result that cannot be recorded): one
/// line a second of each kind. Every request's code and GUID are in its access line anyway.
pub const PER_REQUEST: Policy = Policy {
    interval: Duration::from_secs(1),
    burst: 1,
};

/// Warnings a connection can cause (a refused TLS handshake, a connection limit reached, an
/// accept that failed): ten lines per ten seconds of each kind, so that an operator trying
/// a channel's certificates by hand still sees every refusal, while a channel reconnecting
/// in a loop does not flood the log.
pub const PER_CONNECTION: Policy = Policy {
    interval: Duration::from_secs(10),
    burst: 10,
};

/// How often the background thread looks for counts to write once a storm has stopped.
const FLUSH_TICK: Duration = Duration::from_millis(250);

/// Writes `log::warn!($($arg)+)` unless more than `$policy` allows of this call site have
/// been written in the current interval; `$kind` names the warning in the line that counts
/// those left out (say `"ledger errors (E905)"`).
#[macro_export]
macro_rules! warn_limited {
    ($policy:expr, $kind:literal, $($arg:tt)+) => {{
        static LIMITER: $crate::Limiter =
            $crate::Limiter::new(module_path!(), $kind, $policy);
        if LIMITER.admit() {
            $crate::log::warn!($($arg)+);
        }
    }};
}

/// `warn_limited!` by [`PER_CONNECTION`] for a warning a connection can cause, its format
/// string (inline arguments only) naming it in the line that counts those left out.
#[macro_export]
macro_rules! conn_warn {
    ($fmt:literal) => {
        $crate::warn_limited!($crate::PER_CONNECTION, $fmt, $fmt)
    };
}

/// One kind of warning's limit: how many passed in the current interval, how many were left
/// out.
pub struct Limiter {
    /// The log target of the call site, so that the count line is filed with the warnings.
    target: &'static str,
    kind: &'static str,
    policy: Policy,
    window: Mutex<Window>,
}

impl Limiter {
    pub const fn new(target: &'static str, kind: &'static str, policy: Policy) -> Limiter {
        Limiter {
            target,
            kind,
            policy,
            window: Mutex::new(Window::new()),
        }
    }

    /// Whether this warning may be written now. When it opens a new interval after one that
    /// left warnings out, their count is written first.
    pub fn admit(&'static self) -> bool {
        let verdict = self.window().admit(self.policy, Instant::now());
        match verdict {
            Verdict::Pass(left_out) => {
                if let Some(left_out) = left_out {
                    self.say(left_out);
                }
                true
            }
            Verdict::LeftOut { first } => {
                if first {
                    watch(self);
                }
                false
            }
        }
    }

    /// The window, even if a holder panicked (it only counts).
    fn window(&self) -> MutexGuard<'_, Window> {
        self.window.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The line that counts the warnings left out.
    fn say(&self, l: LeftOut) {
        let (n, kind) = (l.count, self.kind);
        log::warn!(target: self.target, suppressed = n, kind;
            "suppressed {n} similar warning(s) in the last {:.1} s: {kind} (at most {} logged \
             per {} s; the metrics count every one)",
            l.over.as_secs_f64(),
            self.policy.burst,
            self.policy.interval.as_secs()
        );
    }
}

/// The current interval of one limiter.
#[derive(Debug)]
struct Window {
    /// When the interval began (`None`: no warning since the last one ended).
    opened: Option<Instant>,
    passed: u32,
    left_out: u64,
    /// Whether the background thread knows this limiter (it is told once).
    watched: bool,
}

/// Warnings left out: how many, over how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct LeftOut {
    count: u64,
    over: Duration,
}

#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    /// Write it, after the count of an interval that has ended, if it left any out.
    Pass(Option<LeftOut>),
    /// Leave it out; `first`: the first ever left out by this limiter.
    LeftOut { first: bool },
}

impl Window {
    const fn new() -> Window {
        Window {
            opened: None,
            passed: 0,
            left_out: 0,
            watched: false,
        }
    }

    fn admit(&mut self, policy: Policy, now: Instant) -> Verdict {
        let open = self
            .opened
            .is_some_and(|t| now.saturating_duration_since(t) < policy.interval);
        if !open {
            let ended = self.close(now);
            self.opened = Some(now);
            self.passed = 1;
            return Verdict::Pass(ended);
        }
        if self.passed < policy.burst {
            self.passed += 1;
            return Verdict::Pass(None);
        }
        self.left_out += 1;
        Verdict::LeftOut {
            first: !std::mem::replace(&mut self.watched, true),
        }
    }

    /// Ends the interval; what it left out, if anything.
    fn close(&mut self, now: Instant) -> Option<LeftOut> {
        let count = std::mem::take(&mut self.left_out);
        let opened = self.opened.take()?;
        (count > 0).then(|| LeftOut {
            count,
            over: now.saturating_duration_since(opened),
        })
    }

    /// Ends the interval if it is over and left warnings out (`all`: even if not over).
    fn due(&mut self, policy: Policy, now: Instant, all: bool) -> Option<LeftOut> {
        let over = self
            .opened
            .is_some_and(|t| now.saturating_duration_since(t) >= policy.interval);
        if self.left_out > 0 && (over || all) {
            self.close(now)
        } else {
            None
        }
    }
}

/// The limiters that have left warnings out, for the background thread.
static WATCHED: Mutex<Vec<&'static Limiter>> = Mutex::new(Vec::new());
static WATCHER: Once = Once::new();

fn watched() -> MutexGuard<'static, Vec<&'static Limiter>> {
    WATCHED.lock().unwrap_or_else(|e| e.into_inner())
}

/// Hands `limiter` to the background thread, started the first time. If the thread cannot
/// start, a count is written only when the next warning of its kind passes.
fn watch(limiter: &'static Limiter) {
    watched().push(limiter);
    WATCHER.call_once(|| {
        let _ = thread::Builder::new()
            .name("log-limit".into())
            .stack_size(64 * 1024)
            .spawn(|| {
                loop {
                    thread::sleep(FLUSH_TICK);
                    flush(false);
                }
            });
    });
}

/// Writes the count of every limiter's warnings left out so far, whether or not its
/// interval is over: for a process that is about to end.
pub fn flush_all() {
    flush(true);
}

fn flush(all: bool) {
    let now = Instant::now();
    // Copied out, so that no log line is written under the list's lock.
    let limiters: Vec<&'static Limiter> = watched().clone();
    for l in limiters {
        let due = l.window().due(l.policy, now, all);
        if let Some(left_out) = due {
            l.say(left_out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Policy = Policy {
        interval: Duration::from_secs(1),
        burst: 1,
    };

    fn ms(t0: Instant, n: u64) -> Instant {
        t0 + Duration::from_millis(n)
    }

    #[test]
    fn one_line_per_interval_then_the_count_of_those_left_out() {
        let mut w = Window::new();
        let t0 = Instant::now();
        assert_eq!(w.admit(SECOND, t0), Verdict::Pass(None));
        assert_eq!(w.admit(SECOND, ms(t0, 1)), Verdict::LeftOut { first: true });
        for i in 2..1000 {
            assert_eq!(
                w.admit(SECOND, ms(t0, i)),
                Verdict::LeftOut { first: false }
            );
        }
        // The next interval's first warning passes, after the count of the last one.
        assert_eq!(
            w.admit(SECOND, ms(t0, 1000)),
            Verdict::Pass(Some(LeftOut {
                count: 999,
                over: Duration::from_secs(1)
            }))
        );
        // A quiet interval after that: nothing to count.
        assert_eq!(w.admit(SECOND, ms(t0, 2500)), Verdict::Pass(None));
    }

    #[test]
    fn a_burst_passes_whole() {
        let policy = Policy {
            interval: Duration::from_secs(10),
            burst: 3,
        };
        let mut w = Window::new();
        let t0 = Instant::now();
        let verdicts: Vec<bool> = (0..5)
            .map(|i| matches!(w.admit(policy, ms(t0, i)), Verdict::Pass(_)))
            .collect();
        assert_eq!(verdicts, [true, true, true, false, false]);
    }

    #[test]
    fn a_storm_that_stopped_is_counted_once_its_interval_is_over() {
        let mut w = Window::new();
        let t0 = Instant::now();
        w.admit(SECOND, t0);
        w.admit(SECOND, ms(t0, 10));
        w.admit(SECOND, ms(t0, 20));
        assert_eq!(w.due(SECOND, ms(t0, 500), false), None, "not over yet");
        let due = w.due(SECOND, ms(t0, 1200), false);
        assert_eq!(
            due,
            Some(LeftOut {
                count: 2,
                over: Duration::from_millis(1200)
            })
        );
        assert_eq!(w.due(SECOND, ms(t0, 5000), false), None, "counted once");
        // The next warning opens a new interval, with nothing to count.
        assert_eq!(w.admit(SECOND, ms(t0, 5000)), Verdict::Pass(None));
    }

    #[test]
    fn flush_all_counts_an_interval_that_is_not_over() {
        let mut w = Window::new();
        let t0 = Instant::now();
        w.admit(SECOND, t0);
        w.admit(SECOND, ms(t0, 10));
        assert_eq!(
            w.due(SECOND, ms(t0, 100), true),
            Some(LeftOut {
                count: 1,
                over: Duration::from_millis(100)
            })
        );
    }

    #[test]
    fn every_call_site_has_its_own_limit() {
        fn site_a() -> bool {
            static L: Limiter = Limiter::new("t", "a", SECOND);
            L.admit()
        }
        fn site_b() -> bool {
            static L: Limiter = Limiter::new("t", "b", SECOND);
            L.admit()
        }
        assert!(site_a());
        assert!(site_b(), "a's storm does not hide b");
        assert!(!site_a());
        assert!(!site_b());
    }
}
