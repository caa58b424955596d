//! Criterion benchmark of the pure generator (`core::generator::issue`),
//! without PostgreSQL: one ID, and a batch of 4096, single-threaded and with
//! a second thread issuing IDs from the same state at the same time.
//!
//! The clock is the real wall clock (`SystemTime`, as in the server), so a
//! call costs what it costs inside a backend minus pgrx and the executor.
//! The drift limit is set so high that the generator, which runs far above
//! the layout's 4,096,000 IDs/s here, borrows milliseconds instead of
//! sleeping: this measures the hot path, not the throttle.
//!
//!   cargo bench --bench core              (bench/run.sh runs it too)

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use snowflake_id::core::generator::{issue, DriftPolicy, Environment, SharedState};
use snowflake_id::core::layout::IdLayout;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[path = "clock.rs"]
mod clock;
use clock::{clock, Clock};

/// No throttling: the generator may run a year ahead of the clock.
const POLICY: DriftPolicy = DriftPolicy {
    max_drift_ms: 365 * 86_400_000,
};

fn fresh() -> Arc<SharedState> {
    let s = Arc::new(SharedState::default());
    s.resume_after_lease(&IdLayout::default(), None);
    s
}

fn issue_n(state: &SharedState, env: &mut Clock, n: u64) -> u64 {
    match issue(state, &IdLayout::default(), POLICY, n, env) {
        Ok(r) => r.first_pair,
        Err(e) => panic!("{e}"),
    }
}

/// Runs `iters` calls of `n` IDs on this thread, timed, while `others`
/// threads issue IDs from the same state as fast as they can.
fn contended(state: &Arc<SharedState>, others: usize, n: u64, iters: u64) -> Duration {
    let stop = Arc::new(AtomicBool::new(false));
    let ready = Arc::new(std::sync::Barrier::new(others + 1));
    let handles: Vec<_> = (0..others)
        .map(|_| {
            let (state, stop, ready) = (Arc::clone(state), Arc::clone(&stop), Arc::clone(&ready));
            std::thread::spawn(move || {
                let mut env = clock();
                ready.wait();
                while !stop.load(Ordering::Relaxed) {
                    black_box(issue_n(&state, &mut env, n));
                }
            })
        })
        .collect();
    ready.wait();
    let mut env = clock();
    let start = Instant::now();
    for _ in 0..iters {
        black_box(issue_n(state, &mut env, n));
    }
    let took = start.elapsed();
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        let _ = h.join();
    }
    took
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("issue");
    for (name, n) in [("one", 1u64), ("batch4096", 4096)] {
        g.throughput(Throughput::Elements(n));
        g.bench_function(format!("{name}/1thread"), |b| {
            let state = fresh();
            let mut env = clock();
            b.iter(|| black_box(issue_n(&state, &mut env, n)));
        });
        g.bench_function(format!("{name}/2threads"), |b| {
            let state = fresh();
            b.iter_custom(|iters| contended(&state, 1, n, iters));
        });
    }
    // The clock read alone, for reference: the part of a call that is not
    // the taking of the ID.
    g.throughput(Throughput::Elements(1));
    g.bench_function("clock_read", |b| {
        let mut env = clock();
        b.iter_batched(|| (), |_| black_box(env.now_ms()), BatchSize::SmallInput);
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
