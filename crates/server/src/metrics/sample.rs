//! Sampling the ledger into the gauges: rows by state, the oldest UNKNOWN and FAILED rows'
//! ages, the GUIDs that need an operator, the rows at reprocess's attempt cap and the
//! settlement requests waiting for a second person (`RequestGauges`), each a query (a count
//! or a `min`, never rows), read by a `Sampler` thread every `SAMPLE_INTERVAL` against the
//! relay's `Thresholds`, not per scrape.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use log::warn;
use prometheus::{Gauge, IntGauge, Registry};

use ledger::settle_request::Undecided;
use ledger::state::State;
use ledger::store::{DEFAULT_MAX_INQUIRIES, Store};

use super::Metrics;
use crate::every::Every;

pub use ledger::store::DEFAULT_MAX_ATTEMPTS;

/// What the sampler counts against: the relay's `--max-inquiries` and `--max-attempts`, set
/// as resolve's and reprocess's are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Thresholds {
    /// A GUID still in doubt with this many failed inquiries needs an operator.
    pub max_inquiries: u32,
    /// A FAILED/E902 row with this many attempts is at reprocess's cap.
    pub max_attempts: i64,
}

impl Default for Thresholds {
    fn default() -> Thresholds {
        Thresholds {
            max_inquiries: DEFAULT_MAX_INQUIRIES,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
        }
    }
}

/// The settlement requests still undecided (contract §12), as last sampled.
pub struct RequestGauges {
    pub pending: IntGauge,
    pub oldest_pending: Gauge,
    pub expired: IntGauge,
}

impl RequestGauges {
    /// The gauges, registered with `r`.
    pub fn new(r: &Registry) -> RequestGauges {
        let int = |name: &str, help: &str| super::reg(r, IntGauge::new(name, help).expect("valid"));
        RequestGauges {
            pending: int(
                "txrelay_settle_requests_pending",
                "Settlement requests waiting for a second person (inspect requests lists \
                 them), sampled every 10 s.",
            ),
            oldest_pending: super::reg(
                r,
                Gauge::new(
                    "txrelay_settle_requests_oldest_pending_age_seconds",
                    "Seconds since the oldest pending settlement request was made (0: none), \
                     sampled every 10 s.",
                )
                .expect("valid gauge"),
            ),
            expired: int(
                "txrelay_settle_requests_expired",
                "Settlement requests past their expiry and undecided: no longer approvable, \
                 the GUID still in doubt (close with inspect reject, ask again); sampled \
                 every 10 s.",
            ),
        }
    }

    fn set(&self, u: &Undecided) {
        self.pending.set(u.pending.min(i64::MAX as u64) as i64);
        self.oldest_pending
            .set(u.oldest_pending_secs.unwrap_or(0.0).max(0.0));
        self.expired.set(u.expired.min(i64::MAX as u64) as i64);
    }
}

/// How often the sampler reads rows by state and the oldest UNKNOWN row's age.
pub const SAMPLE_INTERVAL: Duration = Duration::from_secs(10);

impl Metrics {
    /// Reads rows by state, the oldest UNKNOWN and FAILED rows' ages, the GUIDs that need an
    /// operator and the rows at the attempt cap (by `limits`) from `store` into the gauges;
    /// none of them if any query fails.
    pub fn sample(&self, store: &dyn Store, limits: &Thresholds) -> ledger::error::Result<()> {
        let sampled = (|| {
            Ok(Sample {
                counts: store.count_by_state()?,
                oldest_unknown: store.oldest_age_secs(State::Unknown)?,
                oldest_failed: store.oldest_age_secs(State::Failed)?,
                needs_operator: store
                    .needs_operator_first(limits.max_inquiries, 0)
                    .map(|c| c.total)?,
                at_attempt_cap: store
                    .at_attempt_cap(limits.max_attempts, 0)
                    .map(|c| c.total)?,
                requests: store.undecided_settle_requests()?,
            })
        })();
        let sample = match sampled {
            Ok(s) => s,
            Err(e) => {
                self.sample_errors.inc();
                return Err(e);
            }
        };
        let _whole = self.one_sample();
        let counts = sample.counts;
        for state in State::ALL {
            // Every state, so that one with no row is 0, not missing.
            let n = counts
                .iter()
                .find(|(s, _)| *s == state)
                .map_or(0, |(_, n)| *n);
            self.rows.with_label_values(&[state.as_str()]).set(n);
        }
        self.oldest_unknown
            .set(sample.oldest_unknown.unwrap_or(0.0).max(0.0));
        self.oldest_failed
            .set(sample.oldest_failed.unwrap_or(0.0).max(0.0));
        self.needs_operator.set(sample.needs_operator);
        self.at_attempt_cap.set(sample.at_attempt_cap);
        self.settle_requests.set(&sample.requests);
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        self.sampled_at.set(now.as_secs_f64());
        Ok(())
    }
}

/// One sample's readings, all taken before any gauge is set.
struct Sample {
    counts: Vec<(State, i64)>,
    oldest_unknown: Option<f64>,
    oldest_failed: Option<f64>,
    needs_operator: i64,
    at_attempt_cap: i64,
    requests: Undecided,
}

/// The thread that samples the ledger every `SAMPLE_INTERVAL` (at once when started); it
/// stops when this is dropped.
pub struct Sampler {
    _thread: Every,
}

impl Sampler {
    pub fn start(
        store: std::sync::Arc<dyn Store>,
        metrics: std::sync::Arc<Metrics>,
        every: Duration,
        limits: Thresholds,
    ) -> std::io::Result<Sampler> {
        Every::start("metrics-sampler", every, move || {
            if let Err(e) = metrics.sample(store.as_ref(), &limits) {
                warn!("cannot sample the ledger for metrics: {e}");
            }
        })
        .map(|thread| Sampler { _thread: thread })
    }
}
