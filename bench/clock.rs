//! The clock both pure-core benchmarks run on (bench/core.rs and
//! bench/threads.rs): the real wall clock, as in the server, with the lease
//! kept in memory an hour ahead, so that the benchmarks measure issuing,
//! not the disk.

use snowflake_id::core::generator::{lease_target, Environment, GenerateError, SharedState};
use snowflake_id::core::layout::IdLayout;
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The wall clock in ms since a recent epoch; the lease lives in memory.
pub struct Clock {
    pub epoch_unix_ms: i64,
}

impl Environment for Clock {
    fn now_ms(&mut self) -> i64 {
        let us = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_micros() as i64)
            .unwrap_or(0);
        us.div_euclid(1000) - self.epoch_unix_ms
    }
    fn sleep_ms(&mut self, ms: u64) -> u64 {
        std::thread::sleep(Duration::from_millis(ms));
        ms * 1000
    }
    fn extend_lease(
        &mut self,
        state: &SharedState,
        _from_ms: u64,
        until_ms: u64,
    ) -> Result<(), GenerateError> {
        // A lease far ahead: the bench measures issuing, not the disk.
        let target = lease_target(state, &IdLayout::default(), until_ms) + 3_600_000;
        state.lease_until_ms.fetch_max(target, Ordering::AcqRel);
        Ok(())
    }
    fn clock_stepped_back(&mut self, _step_ms: u64) {}
}

/// The clock with the epoch 2025-01-01 00:00:00 UTC.
pub fn clock() -> Clock {
    Clock {
        epoch_unix_ms: 1_735_689_600_000,
    }
}
