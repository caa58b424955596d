//! The pure generator (`core::generator::issue`) from 1 to 16 threads at
//! once, without PostgreSQL: how issuing scales with the callers sharing
//! one state, the way backends share the server's generator.
//!
//! Each thread issues single IDs, as fast as it can, for a fixed time; all
//! start together behind a barrier. Printed per thread count: IDs per
//! second in all, and the time one call took on average in each thread.
//! The drift limit is a year, so nothing sleeps: this measures the taking
//! of IDs, not the throttle (the layout's own limit is 4,096,000 IDs/s).
//!
//!   cargo bench --bench threads                   1, 2, 4, 8, 16 threads, 1 s each
//!   cargo bench --bench threads -- 1,16 500       those counts, 500 ms each
//!   cargo bench --bench threads -- 1,16 500 200   and 200 steps of other work between calls
//!
//! The other work stands for what a backend does between two calls (the
//! executor, a row of `generate_series`: a few hundred nanoseconds): a
//! chain of dependent multiplications, about a nanosecond a step. Without
//! it, a thread that owns the generator's cache line issues several IDs
//! before another takes the line, which no backend does.
//!
//! bench/many_core.sh runs the compiled program on a machine with more
//! cores (a two-core machine shows only what two cores can).

use snowflake_id::core::generator::{issue, DriftPolicy, SharedState};
use snowflake_id::core::layout::IdLayout;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

#[path = "clock.rs"]
mod clock;
use clock::clock;

const POLICY: DriftPolicy = DriftPolicy {
    max_drift_ms: 365 * 86_400_000,
};

/// IDs issued in all by `threads` threads in `run`, each doing `work`
/// steps of other work between calls, and the mean time of one call and
/// its work in a thread.
fn measure(threads: usize, run: Duration, work: u64) -> (f64, f64) {
    let state = Arc::new(SharedState::default());
    state.resume_after_lease(&IdLayout::default(), None);
    let stop = Arc::new(AtomicBool::new(false));
    let issued = Arc::new(AtomicU64::new(0));
    let start = Arc::new(Barrier::new(threads + 1));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let (state, stop, issued, start) =
                (state.clone(), stop.clone(), issued.clone(), start.clone());
            std::thread::spawn(move || {
                let layout = IdLayout::default();
                let mut env = clock();
                let mut n = 0u64;
                let mut other = 1u64;
                start.wait();
                while !stop.load(Ordering::Relaxed) {
                    // 64 calls between looks at the stop flag.
                    for _ in 0..64 {
                        match issue(&state, &layout, POLICY, 1, &mut env) {
                            Ok(r) => black_box(r.first_pair),
                            Err(e) => panic!("{e}"),
                        };
                        for _ in 0..work {
                            other = black_box(other.wrapping_mul(6364136223846793005) | 1);
                        }
                    }
                    n += 64;
                }
                issued.fetch_add(n, Ordering::Relaxed);
            })
        })
        .collect();
    start.wait();
    let began = Instant::now();
    std::thread::sleep(run);
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        if h.join().is_err() {
            eprintln!("a thread failed");
            std::process::exit(1);
        }
    }
    let secs = began.elapsed().as_secs_f64();
    let total = issued.load(Ordering::Relaxed) as f64;
    (total / secs, secs * 1e9 * threads as f64 / total)
}

fn main() {
    // cargo bench passes --bench; anything else is ours.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let counts: Vec<usize> = args
        .first()
        .map(|a| a.split(',').filter_map(|n| n.parse().ok()).collect())
        .unwrap_or_else(|| vec![1, 2, 4, 8, 16]);
    let run = Duration::from_millis(args.get(1).and_then(|a| a.parse().ok()).unwrap_or(1000));
    let work = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(0);
    println!("| threads | IDs/s in all | ns per call in a thread |");
    println!("|---|---|---|");
    for threads in counts {
        let (rate, ns) = measure(threads, run, work);
        println!("| {threads} | {:.1}M | {ns:.0} |", rate / 1e6);
    }
}
