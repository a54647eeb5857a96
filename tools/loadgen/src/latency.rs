//! Latency percentiles from every sample (microseconds, sorted once at the end): exact,
//! and small enough for any run this tool makes.

use serde_json::{Value, json};

#[derive(Default)]
pub struct Latencies {
    micros: Vec<u32>,
}

impl Latencies {
    pub fn record(&mut self, d: std::time::Duration) {
        self.micros
            .push(u32::try_from(d.as_micros()).unwrap_or(u32::MAX));
    }

    pub fn merge(&mut self, other: Latencies) {
        self.micros.extend(other.micros);
    }

    /// `{p50,p90,p99,p999,max}` in milliseconds (nearest rank), zeros when empty.
    pub fn summary(mut self) -> Value {
        self.micros.sort_unstable();
        let v = &self.micros;
        let at = |p: f64| -> f64 {
            if v.is_empty() {
                return 0.0;
            }
            let rank = ((p * v.len() as f64).ceil() as usize).clamp(1, v.len());
            ms(v[rank - 1])
        };
        json!({
            "p50": at(0.50),
            "p90": at(0.90),
            "p99": at(0.99),
            "p999": at(0.999),
            "max": v.last().map_or(0.0, |&m| ms(m)),
        })
    }
}

/// `v` rounded to one decimal (for throughput figures).
pub fn round1(v: f64) -> f64 {
    (v * 10.0).round() / 10.0
}

/// `v` rounded to three decimals (for seconds and milliseconds).
pub fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

/// Microseconds as milliseconds with three decimals.
fn ms(micros: u32) -> f64 {
    f64::from(micros) / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn nearest_rank_percentiles() {
        let mut l = Latencies::default();
        for i in 1..=1000u64 {
            l.record(Duration::from_micros(i * 1000));
        }
        let s = l.summary();
        assert_eq!(s["p50"], 500.0);
        assert_eq!(s["p90"], 900.0);
        assert_eq!(s["p99"], 990.0);
        assert_eq!(s["p999"], 999.0);
        assert_eq!(s["max"], 1000.0);
        assert_eq!(Latencies::default().summary()["p99"], 0.0);
    }
}
