//! The relay's metrics, in one place: what `relay --admin` serves at `GET /metrics` in the
//! Prometheus text format (0.0.4), through the `prometheus` crate (sync, no runtime).
//!
//! **One set per relay, made by its start (`Relay::start`) and handed to what counts.** The
//! decisions (`engine`) report through the `Events` port, which [`Metrics`] implements
//! (`events`); the ledger's commits and the core client's connections through the observer
//! hooks those crates offer (`observers`); the server's own parts hold an `Arc<Metrics>`.
//! No global: a test makes its own set and asserts on its own run. Recording is a few atomic
//! operations; nothing is printed. The batch tools never link this: their `--metrics-file`
//! carries their run's summary instead (`cli`).
//!
//! Rows by state, the ages of the oldest UNKNOWN and FAILED rows, the GUIDs that need an
//! operator and the rows at reprocess's attempt cap cost a query each (a count or a `min`,
//! never rows), so they are not read per scrape: a `Sampler` thread reads them every
//! `SAMPLE_INTERVAL` through the `Store`, against the `Thresholds` the relay was given.
//!
//! Also here: what the process is (`txrelay_build_info`, with the commit `cli`'s build script
//! found) and what it uses (the `process_*` families of the prometheus crate's process
//! collector, on Linux).

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Mutex, MutexGuard, Once};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use prometheus::{
    Gauge, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts, Registry, TextEncoder,
};

use ledger::state::State;
pub use ledger::store::DEFAULT_MAX_INQUIRIES;

/// The `channel` label (and log field) of an anonymous channel's requests.
pub const ANONYMOUS: &str = "-";

/// The content type of `encode`'s output.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Core calls: half a millisecond to the 30 s the relay allows a call at most.
const CORE_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];
/// Ledger commits: a tenth of a millisecond (no fsync) to the 5 s busy timeout and beyond.
const COMMIT_BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0,
];
/// Statements per commit, up to the group commit's cap (1024).
const BATCH_BUCKETS: &[f64] = &[
    1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0,
];

/// Every metric the relay exports. README "Metrics" lists them with their meaning.
pub struct Metrics {
    registry: Registry,
    /// Requests answered, by the 4-character result code of the reply.
    pub requests: IntCounterVec,
    /// POSTs to the core, by outcome: seconds from the call to its classified result.
    pub core_call: HistogramVec,
    /// Seconds per ledger commit (SQLite: a group-commit transaction; PostgreSQL: one
    /// autocommitted write).
    pub commit: Histogram,
    /// Statements per ledger commit (PostgreSQL: always 1).
    pub commit_batch: Histogram,
    /// PostgreSQL commits whose wait for the synchronous standby was cancelled: not durable.
    pub commits_not_replicated: IntCounter,
    /// Channel connections open now.
    pub connections_open: IntGauge,
    /// Channel connections closed at once, by the limit that refused them.
    pub connections_refused: IntCounterVec,
    /// Requests answered, by the connection's channel identity (`-`: anonymous).
    pub channel_requests: IntCounterVec,
    /// Requests answered, by the door they came through (`tcp`: frames, `http`: §9).
    pub door_requests: IntCounterVec,
    /// Answers of the HTTP channel API (CONTRACT §9), by HTTP status and result code (`-`
    /// for the problems that carry none: 404, 405, 411, 413, 415, a bad head).
    pub http_responses: IntCounterVec,
    /// TLS handshakes on the channel listener that did not end in a session, by reason.
    pub tls_refused: IntCounterVec,
    /// Seconds until the channel listener's certificate expires (negative: expired);
    /// exported only when the listener speaks TLS, computed at each scrape.
    tls_cert_expiry: Gauge,
    tls_not_after: AtomicI64,
    tls_on: Once,
    /// With `--client-crl`: the earliest nextUpdate of its lists (Unix seconds; +Inf when
    /// none has one), again at each reload.
    client_crl_next_update: Gauge,
    crl_on: Once,
    /// Connections to the core open now (in use, idle in the keep-alive pool, or held by a
    /// late-reply waiter).
    pub core_connections: IntGauge,
    /// Rows by state, as last sampled.
    pub rows: IntGaugeVec,
    /// Seconds since the oldest UNKNOWN row last changed, as last sampled (0: none).
    pub oldest_unknown: Gauge,
    /// Seconds since the oldest FAILED row last changed, as last sampled (0: none).
    pub oldest_failed: Gauge,
    /// GUIDs still in doubt that resolve has given up on, as last sampled.
    pub needs_operator: IntGauge,
    /// FAILED/E902 rows at reprocess's attempt cap, as last sampled.
    pub at_attempt_cap: IntGauge,
    /// Settlement requests waiting for a second person, and expired undecided.
    pub settle_requests: sample::RequestGauges,
    /// When the ledger was last sampled (Unix seconds).
    pub sampled_at: Gauge,
    /// Held while a sample sets its gauges and while a scrape gathers: a scrape shows one
    /// sample whole (the registry gathers family by family, not in one snapshot).
    sampling: Mutex<()>,
    /// Samples that failed (the ledger did not answer).
    pub sample_errors: IntCounter,
    /// Late replies (`late`): calls handed to a waiter, dropped for lack of room, answers
    /// that came, UNKNOWN rows they settled; and waiters now.
    pub late_adopted: IntCounter,
    pub late_dropped: IntCounter,
    pub late_arrived: IntCounter,
    pub late_settled: IntCounter,
    pub late_waiting: IntGauge,
    /// Results of an earlier attempt, booked or of unknown outcome, that came back after a
    /// later attempt had claimed the GUID: the core may have booked it twice.
    pub possible_double_bookings: IntCounter,
    /// Recovery mode (`recovery`): 1 while the ledger is marked recovering; the inquiries it
    /// made before a claim, by outcome.
    pub ledger_recovering: IntGauge,
    pub recovery_inquiries: IntCounterVec,
    /// 1, labelled with the version and the commit.
    pub build_info: IntGaugeVec,
    /// What the relay's inquiry at start found at its core (`core_probe`).
    pub core_start_probe: IntGaugeVec,
}

/// Registers `metric` with `registry` and hands it back.
fn reg<M: prometheus::core::Collector + Clone + 'static>(registry: &Registry, metric: M) -> M {
    registry
        .register(Box::new(metric.clone()))
        .expect("metric names are unique and valid");
    metric
}

impl Metrics {
    /// A new set, its own registry, `txrelay_build_info` labelled with `commit` (the relay
    /// passes `cli::COMMIT`; a test, its own set for its own run).
    pub fn new(commit: &str) -> Metrics {
        let r = Registry::new();
        let counter =
            |name: &str, help: &str| reg(&r, IntCounter::new(name, help).expect("valid counter"));
        let counter_vec = |name: &str, help: &str, label: &str| {
            reg(
                &r,
                IntCounterVec::new(Opts::new(name, help), &[label]).expect("valid counter"),
            )
        };
        let gauge = |name: &str, help: &str| reg(&r, IntGauge::new(name, help).expect("valid"));
        let histogram = |name: &str, help: &str, buckets: &[f64]| {
            reg(
                &r,
                Histogram::with_opts(HistogramOpts::new(name, help).buckets(buckets.to_vec()))
                    .expect("valid histogram"),
            )
        };
        let m = Metrics {
            requests: counter_vec(
                "txrelay_requests_total",
                "Requests answered, by the reply's 4-character result code.",
                "code",
            ),
            core_call: reg(
                &r,
                HistogramVec::new(
                    HistogramOpts::new(
                        "txrelay_core_call_duration_seconds",
                        "POSTs of a transfer to the core, by outcome \
                         (booked, rejected, not_sent, unknown).",
                    )
                    .buckets(CORE_BUCKETS.to_vec()),
                    &["outcome"],
                )
                .expect("valid histogram"),
            ),
            commit: histogram(
                "txrelay_ledger_commit_duration_seconds",
                "Ledger commits: a group commit on SQLite, one write on PostgreSQL.",
                COMMIT_BUCKETS,
            ),
            commit_batch: histogram(
                "txrelay_ledger_commit_batch_size",
                "Statements per ledger commit (1 on PostgreSQL).",
                BATCH_BUCKETS,
            ),
            commits_not_replicated: counter(
                "txrelay_ledger_commits_not_replicated_total",
                "PostgreSQL commits whose wait for the synchronous standby was cancelled, \
                 taken as not written (a claim E905, a result E901).",
            ),
            connections_open: gauge("txrelay_connections_open", "Channel connections open now."),
            connections_refused: counter_vec(
                "txrelay_connections_refused_total",
                "Channel connections closed at once, by the limit reached \
                 (max_connections, max_connections_per_peer).",
                "limit",
            ),
            channel_requests: counter_vec(
                "txrelay_channel_requests_total",
                "Requests answered, by the channel identity of the connection (its client \
                 certificate's CN; \"-\" for an anonymous channel).",
                "channel",
            ),
            door_requests: counter_vec(
                "txrelay_door_requests_total",
                "Transfer requests answered, by door (tcp: frames, http: the HTTP API).",
                "door",
            ),
            http_responses: reg(
                &r,
                IntCounterVec::new(
                    Opts::new(
                        "txrelay_http_responses_total",
                        "Answers of the HTTP channel API, by HTTP status and result code \
                         (\"-\": none).",
                    ),
                    &["status", "code"],
                )
                .expect("valid counter"),
            ),
            tls_refused: counter_vec(
                "txrelay_tls_handshakes_refused_total",
                "TLS handshakes on the channel listener refused or abandoned, by reason \
                 (no_certificate, unknown_ca, expired, bad_subject, timeout, ...).",
                "reason",
            ),
            tls_cert_expiry: Gauge::new(
                "txrelay_tls_cert_expiry_seconds",
                "Seconds until the channel listener's TLS certificate expires (negative: \
                 expired).",
            )
            .expect("valid gauge"),
            tls_not_after: AtomicI64::new(0),
            tls_on: Once::new(),
            client_crl_next_update: Gauge::new(
                "txrelay_client_crl_next_update_seconds",
                "When the client revocation list (--client-crl) is due to be replaced: its \
                 nextUpdate, Unix seconds (the earliest of several lists).",
            )
            .expect("valid gauge"),
            crl_on: Once::new(),
            core_connections: gauge(
                "txrelay_core_connections",
                "Connections to the core open now: in a call, idle in the keep-alive pool, \
                 or awaiting a late reply.",
            ),
            rows: reg(
                &r,
                IntGaugeVec::new(
                    Opts::new(
                        "txrelay_ledger_rows",
                        "Ledger rows by state, sampled every 10 s.",
                    ),
                    &["state"],
                )
                .expect("valid gauge"),
            ),
            oldest_unknown: reg(
                &r,
                Gauge::new(
                    "txrelay_ledger_oldest_unknown_age_seconds",
                    "Seconds since the oldest UNKNOWN row last changed (0: no UNKNOWN row), \
                     sampled every 10 s.",
                )
                .expect("valid gauge"),
            ),
            oldest_failed: reg(
                &r,
                Gauge::new(
                    "txrelay_ledger_oldest_failed_age_seconds",
                    "Seconds since the oldest FAILED row last changed (0: no FAILED row), \
                     sampled every 10 s.",
                )
                .expect("valid gauge"),
            ),
            needs_operator: gauge(
                "txrelay_ledger_needs_operator",
                "GUIDs still in doubt (UNKNOWN or SENT) with at least --max-inquiries failed \
                 inquiries: resolve no longer asks, an operator must settle them (inspect \
                 summary lists them); sampled every 10 s.",
            ),
            at_attempt_cap: gauge(
                "txrelay_ledger_failed_at_attempt_cap",
                "FAILED/E902 rows with at least --max-attempts attempts: reprocess no longer \
                 resends them (inspect summary lists them); sampled every 10 s.",
            ),
            settle_requests: sample::RequestGauges::new(&r),
            sampled_at: reg(
                &r,
                Gauge::new(
                    "txrelay_ledger_sampled_timestamp_seconds",
                    "When the ledger's rows were last sampled, Unix time.",
                )
                .expect("valid gauge"),
            ),
            sample_errors: counter(
                "txrelay_ledger_sample_errors_total",
                "Samples of the ledger's rows that failed.",
            ),
            late_adopted: counter(
                "txrelay_late_replies_adopted_total",
                "Calls given up at the read timeout and handed to a late-reply waiter.",
            ),
            late_dropped: counter(
                "txrelay_late_replies_dropped_total",
                "Calls given up at the read timeout and not awaited: --max-late-replies \
                 were already waiting.",
            ),
            late_arrived: counter(
                "txrelay_late_replies_arrived_total",
                "Late answers that came from the core, whatever they said.",
            ),
            late_settled: counter(
                "txrelay_late_replies_settled_total",
                "UNKNOWN rows a late answer settled DONE.",
            ),
            late_waiting: gauge(
                "txrelay_late_replies_waiting",
                "Calls awaiting a late reply now.",
            ),
            possible_double_bookings: counter(
                "txrelay_possible_double_bookings_total",
                "Results of an earlier attempt (booked, or of unknown outcome) that came \
                 back after a later attempt had claimed the GUID: the core may have booked \
                 it twice. Each is in the GUID's history with its booking; alert above 0.",
            ),
            ledger_recovering: gauge(
                "txrelay_ledger_recovering",
                "1 while the ledger is marked recovering (contract §11), else 0.",
            ),
            recovery_inquiries: counter_vec(
                "txrelay_recovery_inquiries_total",
                "Inquiries made in recovery mode before a claim, by outcome (booked, \
                 not_found, other_amount, error).",
                "outcome",
            ),
            build_info: reg(
                &r,
                IntGaugeVec::new(
                    Opts::new(
                        "txrelay_build_info",
                        "1, labelled with the relay's version and the commit it was built \
                         from (unknown: built outside a git checkout).",
                    ),
                    &["version", "commit"],
                )
                .expect("valid gauge"),
            ),
            core_start_probe: crate::core_probe::gauge(&r),
            sampling: Mutex::new(()),
            registry: r,
        };
        m.build_info
            .with_label_values(&[env!("CARGO_PKG_VERSION"), commit])
            .set(1);
        // CPU, memory, descriptors, threads, start time: `process_*`, read from /proc at
        // each scrape.
        #[cfg(target_os = "linux")]
        m.registry
            .register(Box::new(
                prometheus::process_collector::ProcessCollector::for_self(),
            ))
            .expect("the process collector's names are unique");
        for state in State::ALL {
            // Every state, so that one with no row is 0, not missing.
            m.rows.with_label_values(&[state.as_str()]).set(0);
        }
        // The relay's own codes exist from the start, so that a rate over them is defined
        // before the first of each (business codes appear when the core first sends them).
        for code in [
            wire::OK,
            wire::E_MALFORMED,
            wire::E_UNKNOWN,
            wire::E_NOT_SENT,
            wire::E_IN_FLIGHT,
            wire::E_GUID_REUSED,
            wire::E_LEDGER,
        ] {
            m.requests
                .with_label_values(&[&String::from_utf8_lossy(&code)]);
        }
        // Every outcome of a core call (`Outcome::label`) too: an alert on the rate of
        // `not_sent` must see the 0 before the first E902 of an outage, not a new series.
        for outcome in ["booked", "rejected", "not_sent", "unknown"] {
            m.core_call.with_label_values(&[outcome]);
        }
        for door in ["tcp", "http"] {
            m.door_requests.with_label_values(&[door]);
        }
        for limit in ["max_connections", "max_connections_per_peer"] {
            m.connections_refused.with_label_values(&[limit]);
        }
        for outcome in crate::recovery::INQUIRY_OUTCOMES {
            m.recovery_inquiries.with_label_values(&[outcome]);
        }
        m
    }

    /// The channel listener speaks TLS: its refusals by reason exist from now on, and the
    /// certificate in use expires at `not_after` (Unix seconds; again at each reload).
    pub fn tls_listener(&self, not_after: i64, reasons: &[&str]) {
        self.tls_not_after.store(not_after, Ordering::Relaxed);
        self.tls_on.call_once(|| {
            self.registry
                .register(Box::new(self.tls_cert_expiry.clone()))
                .expect("registered once");
            for reason in reasons {
                self.tls_refused.with_label_values(&[reason]);
            }
        });
    }

    /// The client revocation lists in use are due to be replaced at `next_update` (Unix
    /// seconds; `None`: none of them says).
    pub fn client_crl(&self, next_update: Option<i64>) {
        self.crl_on.call_once(|| {
            self.registry
                .register(Box::new(self.client_crl_next_update.clone()))
                .expect("registered once");
        });
        self.client_crl_next_update
            .set(next_update.map_or(f64::INFINITY, |t| t as f64));
    }

    /// `sampling` held, even if a holder panicked (it guards only an order of writes).
    fn one_sample(&self) -> MutexGuard<'_, ()> {
        self.sampling.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Everything, in the Prometheus text format (`CONTENT_TYPE`).
    pub fn encode(&self) -> String {
        if self.tls_on.is_completed() {
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default()
                .as_secs_f64();
            self.tls_cert_expiry
                .set(self.tls_not_after.load(Ordering::Relaxed) as f64 - now);
        }
        let families = {
            let _whole = self.one_sample();
            self.registry.gather()
        };
        let mut out = String::new();
        TextEncoder::new()
            .encode_utf8(&families, &mut out)
            .expect("encoding into a String cannot fail");
        out
    }

    /// One answered request, on a connection of `channel` (`None`: anonymous).
    pub fn request(&self, code: &[u8], channel: Option<&str>, door: &str) {
        self.door_requests.with_label_values(&[door]).inc();
        let code = String::from_utf8_lossy(code);
        self.requests.with_label_values(&[code.as_ref()]).inc();
        self.channel_requests
            .with_label_values(&[channel.unwrap_or(ANONYMOUS)])
            .inc();
    }

    /// One POST to the core, and what it came to: `outcome` is its label (`booked`,
    /// `rejected`, `not_sent`, `unknown`: the core client's `Outcome::label`).
    pub fn core_call(&self, outcome: &str, took: Duration) {
        self.core_call
            .with_label_values(&[outcome])
            .observe(took.as_secs_f64());
    }

    /// One ledger commit of `statements` statements.
    pub fn commit(&self, statements: usize, took: Duration) {
        self.commit.observe(took.as_secs_f64());
        self.commit_batch.observe(statements as f64);
    }
}

mod sample;

pub use sample::{DEFAULT_MAX_ATTEMPTS, SAMPLE_INTERVAL, Sampler, Thresholds};

#[cfg(test)]
mod tests;
