//! The generator's [`Environment`] inside PostgreSQL: the wall clock, an
//! interruptible sleep, the lease writer and the clock-step warning.

use crate::core::config::Config;
use crate::core::generator::{Environment, GenerateError, SharedState};
use crate::errors;
use crate::shmem::Shared;
use pgrx::{pg_sys, PgSqlErrorCode};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// The wall clock in microseconds since 1970 (`clock_gettime`, through the
/// vDSO: no system call).
pub fn unix_now_us() -> i64 {
    match SystemTime::now().duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_micros() as i64,
        Err(e) => -(e.duration().as_micros() as i64),
    }
}

/// The wall clock in milliseconds since 1970.
pub fn unix_now_ms() -> i64 {
    unix_now_us().div_euclid(1000)
}

pub struct ServerEnv<'a> {
    pub config: &'a Config,
    pub shared: &'a Shared,
    /// The last reading handed to the generator (ms since the epoch).
    pub last_now_ms: i64,
}

impl<'a> ServerEnv<'a> {
    pub fn new(config: &'a Config, shared: &'a Shared) -> Self {
        ServerEnv {
            config,
            shared,
            last_now_ms: 0,
        }
    }

    pub fn now_ms(&self) -> i64 {
        unix_now_ms() - self.config.epoch_unix_ms
    }
}

/// Sub-millisecond sleeps are done with `pg_usleep`, which is not
/// interruptible, but never for longer than this.
const SHORT_SLEEP_US: i64 = 1_500;

impl Environment for ServerEnv<'_> {
    fn now_ms(&mut self) -> i64 {
        self.last_now_ms = ServerEnv::now_ms(self);
        self.last_now_ms
    }

    /// Sleeps until the wall clock reaches `ms` milliseconds after the last
    /// reading, to the microsecond: the reading was rounded down, so a
    /// plain `ms`-long sleep would overshoot by up to a millisecond and keep
    /// a throttled burst below the layout's rate. Long waits sleep on the
    /// process latch, so that a cancel, `statement_timeout` or server
    /// shutdown ends them at once; interrupts are checked after every sleep.
    fn sleep_ms(&mut self, ms: u64) -> u64 {
        let start = Instant::now();
        let target_us =
            (self.config.epoch_unix_ms + self.last_now_ms).saturating_add(ms as i64) * 1000;
        loop {
            let remaining_us = target_us - unix_now_us();
            if remaining_us <= 0 {
                break;
            }
            unsafe {
                if remaining_us > SHORT_SLEEP_US {
                    pg_sys::WaitLatch(
                        pg_sys::MyLatch,
                        (pg_sys::WL_LATCH_SET | pg_sys::WL_TIMEOUT | pg_sys::WL_EXIT_ON_PM_DEATH)
                            as i32,
                        ((remaining_us - SHORT_SLEEP_US / 2) / 1000).clamp(1, i32::MAX as i64) as _,
                        pg_sys::PG_WAIT_EXTENSION,
                    );
                    pg_sys::ResetLatch(pg_sys::MyLatch);
                } else {
                    pg_sys::pg_usleep(remaining_us as _);
                }
            }
            pg_sys::check_for_interrupts!();
        }
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
