//! The generator's [`Environment`] inside PostgreSQL: the wall clock, an
//! interruptible sleep, the lease writer and the clock-step warning.

use crate::core::config::Config;
use crate::core::generator::{Environment, GenerateError, SharedState};
use crate::errors;
use crate::shmem::Shared;
use pgrx::{pg_sys, PgSqlErrorCode};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// The wall clock in milliseconds since 1970 (`clock_gettime`, through the
/// vDSO: no system call).
pub fn unix_now_ms() -> i64 {
    match SystemTime::now().duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_millis() as i64,
        Err(e) => -(e.duration().as_millis() as i64),
    }
}

pub struct ServerEnv<'a> {
    pub config: &'a Config,
    pub shared: &'a Shared,
}

impl ServerEnv<'_> {
    pub fn now_ms(&self) -> i64 {
        unix_now_ms() - self.config.epoch_unix_ms
    }
}

impl Environment for ServerEnv<'_> {
    fn now_ms(&mut self) -> i64 {
        ServerEnv::now_ms(self)
    }

    /// Sleeps on the process latch, so that a cancel, `statement_timeout`
    /// or server shutdown ends the wait at once.
    fn sleep_ms(&mut self, ms: u64) -> u64 {
        let start = Instant::now();
        unsafe {
            pg_sys::WaitLatch(
                pg_sys::MyLatch,
                (pg_sys::WL_LATCH_SET | pg_sys::WL_TIMEOUT | pg_sys::WL_EXIT_ON_PM_DEATH) as i32,
                ms.clamp(1, i32::MAX as u64) as _,
                pg_sys::PG_WAIT_EXTENSION,
            );
            pg_sys::ResetLatch(pg_sys::MyLatch);
        }
        pg_sys::check_for_interrupts!();
        start.elapsed().as_micros() as u64
    }

    fn extend_lease(&mut self, _state: &SharedState, until_ms: u64) -> Result<(), GenerateError> {
        self.shared.extend_lease(self.config, until_ms)
    }

    fn clock_stepped_back(&mut self, step_ms: u64) {
        errors::warn(
            PgSqlErrorCode::ERRCODE_WARNING,
            format!("the system clock stepped back by {step_ms} ms; IDs continue from the last issued one"),
            format!(
                "IDs stay unique and ordered while the step is within snowflake_id.max_clock_drift ({} ms); check the time source (NTP) of this server.",
                crate::guc::max_clock_drift_ms()
            ),
        );
    }
}
