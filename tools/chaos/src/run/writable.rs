//! With a ledger the run does not own (`--db`): whether some host of its URL takes writes,
//! looked at every 100 ms and kept as the database's outages, as the run keeps those of a
//! server it stops itself. So that a tool run that met a failover's gap, and a relay start
//! that found no writable host, are judged as during the run's own restarts.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::Context;

use crate::tools::Outages;

/// Watches `url` until `stop`; a detached thread (it ends with the run's process at worst).
/// Says on stdout when a gap began and ended (`t=` from `start`, as the run's other lines).
pub fn watch(
    url: &str,
    outages: Outages,
    start: Instant,
    stop: Arc<AtomicBool>,
) -> anyhow::Result<()> {
    let mut config: postgres::Config = url.parse().context("the ledger's --db")?;
    config.connect_timeout(Duration::from_secs(1));
    thread::Builder::new()
        .name("writable".into())
        .spawn(move || {
            // A gap begins, as far as anyone can tell, just after the last look that found a
            // writable host, and ends when a look finds one again.
            let mut last_up = Instant::now();
            while !stop.load(Ordering::Relaxed) {
                let up = config
                    .connect(postgres::NoTls)
                    .and_then(|mut c| c.simple_query("SELECT 1"))
                    .is_ok();
                let t = |i: Instant| i.duration_since(start).as_secs_f64();
                match (up, outages.is_down()) {
                    (false, false) => {
                        outages.down(last_up);
                        println!(
                            "chaos: no writable database host since t={:.2}s",
                            t(last_up)
                        );
                    }
                    (true, true) => {
                        outages.up(Instant::now());
                        println!(
                            "chaos: a writable database host again at t={:.2}s",
                            t(Instant::now())
                        );
                    }
                    _ => {}
                }
                if up {
                    last_up = Instant::now();
                }
                thread::sleep(Duration::from_millis(100));
            }
        })
        .context("cannot start the writability watch")?;
    Ok(())
}
