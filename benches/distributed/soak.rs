//! The soak at bench length (`cargo bench --bench distributed soak`; `make bench` runs it
//! as a section of its own): the driver of the short test (testkit/src/soak.rs) on a
//! cluster of the release build, one projector, two query-api and one mcp process over
//! the engines of `make up`. The read mix's maximum is measured first (closed loop,
//! `RECAP_BENCH_SOAK_WORKERS` threads, 20 s, on the stream's first minute already
//! projected); the soak offers half of it for `RECAP_BENCH_SOAK_MINUTES` (15) with
//! `RECAP_BENCH_SOAK_EVENTS_PER_SECOND` (50) produced throughout, the projector
//! restarted at a third of the run and a query-api at half. One row a minute; resident
//! memory drift after the warm-up (2 minutes) is printed against its 5% target.

use std::time::Duration;

use recap_testkit::cluster::Cluster;
use recap_testkit::soak;

use crate::env_usize;

pub fn soak() {
    let minutes = env_usize("RECAP_BENCH_SOAK_MINUTES", 15).max(2) as u64;
    let workers = env_usize("RECAP_BENCH_SOAK_WORKERS", 32).max(1);
    let duration = Duration::from_secs(minutes * 60);
    let mut plan = soak::Plan {
        duration,
        window: Duration::from_secs(60),
        warm_up: Duration::from_secs(120).min(duration / 4),
        rate: 0.0,
        workers,
        events_per_second: env_usize("RECAP_BENCH_SOAK_EVENTS_PER_SECOND", 50).max(1),
        lead: 60,
        projector_restart_at: duration / 3,
        query_api_restart_at: duration / 2,
        lag_bound: Duration::from_secs(60),
        seed: 7,
    };
    let mut cluster = Cluster::start(&soak::cluster_settings());
    let prepared = soak::prepare(&cluster, &plan);
    let max = soak::max_rate(&cluster, workers, 20);
    plan.rate = (max / 2.0).max(1.0);
    println!("soak of the distributed edition: the read mix answered at most {max:.0}/s ({workers} threads, closed loop, 20 s); soaking at half");
    let report = soak::run(&mut cluster, &plan, prepared);
    print!("{}", report.table());
    let failures = report.failures(10, None);
    let over: Vec<String> =
        report.drifts().iter().filter(|drift| drift.rss_percent > 5.0).map(|drift| format!("{} {:+.1}%", drift.role, drift.rss_percent)).collect();
    if !over.is_empty() {
        println!("  resident memory over the 5% target: {}", over.join(", "));
    }
    assert!(failures.is_empty(), "the soak failed:\n{}", failures.join("\n"));
    println!("  no read failed outside the restarts, the lag settled after each restart and reached zero once the events stopped, file descriptors stayed flat, the read model equals the reference fold");
}
