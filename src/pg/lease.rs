//! The lease: the bound every issued ID stays within, extended ahead of
//! need, written durably before it is raised in memory.
//!
//! A lease is written twice, both durable before the in-memory bound is
//! raised: to the lease file (crash restarts without WAL, `pg_upgrade`,
//! `pg_resetwal`) and to the WAL ([`crate::pg::wal`]: standbys, point-in-time
//! restores, crash recovery). With `snowflake_id.lease_sync = on` only the
//! lease worker extends the lease: it waits until the synchronous standbys
//! have flushed the record before raising the bound, while backends that
//! need more lease sleep on a condition variable, interruptibly. Past the
//! registry's grant no lease is written or raised ([`crate::pg::registry`]).
//!
//! Every write takes the extension's LWLock exclusively; no wait for a
//! standby happens while it is held.

use crate::core::config::Config;
use crate::core::generator::{lease_target, GenerateError, LEASE_WINDOW_MS};
use crate::core::instance::{remove_marker, SUCCESSOR_FILE_NAME};
use crate::core::lease::write_lease;
use crate::pg::lwlock::LockGuard;
use crate::pg::settings::{self, data_dir};
use crate::pg::state::{current_record, system_identifier, Shared};
use crate::pg::{registry, wal};
use pgrx::pg_sys;
use std::sync::atomic::Ordering;

/// `lease_sync`: how long a backend waits for an absent lease worker before
/// it gives up with an error (the worker restarts 5 s after a crash).
const WORKER_ABSENT_LIMIT_S: u32 = 15;

impl Shared {
    /// Extends the lease so that IDs up to `until_ms` are covered: the
    /// backend's way, called by the generator when a range needs more (its
    /// IDs beyond the lease from `from_ms`). Without `lease_sync` the
    /// backend writes the lease itself, under the lock (a caller that
    /// waited finds the work done); with it, it asks the lease worker and
    /// waits.
    pub fn extend_lease(
        &self,
        config: &Config,
        from_ms: u64,
        until_ms: u64,
    ) -> Result<(), GenerateError> {
        // The registry's fence first: past the grant no lease helps, and
        // below its floor the range belongs to no grant of this server
        // (even where another call has extended the lease over it).
        registry::range_within(from_ms, until_ms)?;
        // (false: lease_sync was turned off during the wait; written as
        // without it.)
        if settings::lease_sync() && self.wait_for_worker_lease(until_ms)? {
            return Ok(());
        }
        let guard = self.lock.exclusive();
        if self.generator.lease_until_ms.load(Ordering::Acquire) >= until_ms {
            return Ok(());
        }
        let target = registry::lease_within(
            until_ms,
            lease_target(&self.generator, &config.layout, until_ms),
        )?;
        let (target, _) = self.record_lease_locked(&guard, config, target)?;
        self.raise_lease(target);
        Ok(())
    }

    /// The lease worker's extension. It writes when a backend asked for
    /// more than the lease covers, or when IDs are being issued (`active`)
    /// and less than half a window is left ahead of the generator's own
    /// time; then a full window ahead of what is needed. With `lease_sync`
    /// it raises the bound only once the synchronous standbys have flushed
    /// the record. Returns whether it raised the lease.
    pub fn extend_lease_ahead(&self, config: &Config, active: bool) -> Result<bool, GenerateError> {
        // What must be covered (ms since the epoch), or `None` when the
        // lease is enough.
        let needed = || {
            let lease = self.generator.lease_until_ms.load(Ordering::Acquire);
            let time = self.generator.last_time_ms(&config.layout);
            let requested = self.lease_requested.load(Ordering::Acquire);
            let running_out = active && lease.saturating_sub(time) < LEASE_WINDOW_MS / 2;
            // (A call at the time field's end may leave the pair one past
            // the last, with no ID there: no lease beyond the field.)
            (running_out || requested > lease)
                .then_some(requested.max(time).min(config.layout.max_time_ms()))
        };
        // Before a successor's floor is applied (by the first backend out
        // of recovery) a lease would record the predecessor's limit on this
        // server's new timeline, and a standby of this one would take it
        // for this server's word.
        if needed().is_none() || self.successor_pending.load(Ordering::Acquire) {
            return Ok(false);
        }
        let sync = settings::lease_sync();
        let written = {
            let guard = self.lock.exclusive();
            // Within the registry's grant: past it there is nothing to write
            // (backends report the grant's end themselves).
            needed()
                .and_then(|needed| {
                    registry::lease_within(
                        needed,
                        lease_target(&self.generator, &config.layout, needed),
                    )
                    .ok()
                })
                .map(|target| {
                    let written = self.record_lease_locked(&guard, config, target);
                    if let (false, Ok((target, _))) = (sync, &written) {
                        self.raise_lease(*target);
                    }
                    written
                })
        };
        let (target, end) = match written {
            None => return Ok(false),
            Some(Err(e)) => {
                self.worker_failures.fetch_add(1, Ordering::AcqRel);
                self.wake_waiters();
                return Err(e);
            }
            Some(Ok(written)) => written,
        };
        if sync {
            // Outside the lock: this wait can last as long as a standby is
            // away, and ends at shutdown without confirmation.
            if !wal::wait_for_sync_standbys(end) {
                return Ok(false);
            }
            self.raise_lease(target);
        }
        self.wake_waiters();
        Ok(true)
    }

    /// `lease_sync`: asks the lease worker for a lease up to `until_ms` and
    /// sleeps until it is there (`true`), or until `lease_sync` is turned
    /// off (`false`). Interruptible: a cancel or `statement_timeout` ends
    /// the wait with PostgreSQL's error.
    fn wait_for_worker_lease(&self, until_ms: u64) -> Result<bool, GenerateError> {
        self.lease_requested.fetch_max(until_ms, Ordering::AcqRel);
        let failures = self.worker_failures.load(Ordering::Acquire);
        let cv = self.lease_raised.get();
        // SAFETY: `cv` is this struct's condition variable in shared memory,
        // initialised by ConditionVariableInit when the struct was created; called
        // in a backend (it has a PGPROC). The sleep is cancelled below, or by
        // AbortTransaction's ConditionVariableCancelSleep when an ERROR (a cancel)
        // ends the wait. C writes the variable through `cv`: it lives in an
        // UnsafeCell, which allows writes through a shared reference, and C
        // serialises them with the variable's own spinlock.
        unsafe { pg_sys::ConditionVariablePrepareToSleep(cv) };
        // Seconds in a row without a lease worker to ask.
        let mut without_worker = 0;
        let result = loop {
            if self.generator.lease_until_ms.load(Ordering::Acquire) >= until_ms {
                break Ok(true);
            }
            if self.worker_failures.load(Ordering::Acquire) != failures {
                break Err(GenerateError::Lease(
                    "the lease worker could not extend the lease (the server log says why)".into(),
                ));
            }
            let latch = self.worker_latch.load(Ordering::Acquire);
            if latch.is_null() {
                without_worker += 1;
                // It restarts 5 s after a crash; longer means it cannot run.
                if without_worker > WORKER_ABSENT_LIMIT_S {
                    break Err(GenerateError::Lease(format!(
                        "snowflake_id.lease_sync is on but the lease worker (\"snowflake_id lease\") has not been running for {WORKER_ABSENT_LIMIT_S} s; check max_worker_processes and the server log"
                    )));
                }
            } else {
                without_worker = 0;
                // SAFETY: a non-null `latch` is the lease worker's MyLatch, the latch of
                // its PGPROC in shared memory, which outlives the worker: should it have
                // exited meanwhile, the wake-up reaches at worst the PGPROC's next owner.
                unsafe { pg_sys::SetLatch(latch) };
            }
            // Wakes up every second to wake the worker again, should it
            // have restarted meanwhile (and at once on a reload's signal).
            // SAFETY: the sleep on `cv` was prepared above; called in a backend, where
            // pgrx's FFI guard turns an interrupt's ERROR into a Rust panic.
            unsafe {
                pg_sys::ConditionVariableTimedSleep(cv, 1000, pg_sys::PG_WAIT_EXTENSION);
            }
            // lease_sync turned off while a standby never confirms: the
            // worker is stuck in its wait, and a backend reads a reload
            // only between statements; this wait reads it now, so that the
            // operator's way out works without cancelling every session.
            // SAFETY: ConfigReloadPending is a sig_atomic_t global that the SIGHUP
            // handler sets in this same single-threaded process; volatile accesses are
            // how PostgreSQL itself reads and clears it, and ProcessConfigFile is how
            // it applies the reload (here inside a statement, not at PostgresMain's
            // idle point).
            unsafe {
                if std::ptr::read_volatile(&raw const pg_sys::ConfigReloadPending) != 0 {
                    std::ptr::write_volatile(&raw mut pg_sys::ConfigReloadPending, 0);
                    pg_sys::ProcessConfigFile(pg_sys::GucContext::PGC_SIGHUP);
                }
            }
            if !settings::lease_sync() {
                break Ok(false);
            }
        };
        // SAFETY: ends the sleep prepared above; no argument, no precondition.
        unsafe { pg_sys::ConditionVariableCancelSleep() };
        result
    }

    fn wake_waiters(&self) {
        // SAFETY: `lease_raised` is the condition variable initialised with the
        // struct in shared memory, in an UnsafeCell (C writes it through this
        // pointer); ConditionVariableBroadcast takes its spinlock itself, from
        // any process attached to shared memory.
        unsafe { pg_sys::ConditionVariableBroadcast(self.lease_raised.get()) };
    }

    /// The lease worker announces itself (its latch), or its exit (null).
    pub fn set_worker_latch(&self, latch: *mut pg_sys::Latch) {
        self.worker_latch.store(latch, Ordering::Release);
    }

    /// Writes the lease up to `target_ms` (or the file's lease, if larger) to
    /// the lease file and to the WAL (flushed), without raising the
    /// in-memory bound. Returns the lease written (ms since the epoch) and
    /// the end of the WAL record. `held` is the caller's proof that it holds
    /// the generator's lock exclusively.
    pub(super) fn record_lease_locked(
        &self,
        held: &LockGuard,
        config: &Config,
        target_ms: u64,
    ) -> Result<(u64, pg_sys::XLogRecPtr), GenerateError> {
        // The guarded fields below are written on the strength of this.
        assert!(
            held.holds_exclusively(&self.lock),
            "snowflake_id: a lease write without the generator's lock"
        );
        let mut record = current_record(config, target_ms);
        // How far ahead of this server's clock its IDs may run under this
        // lease: what a successor that never sees a later lease must assume
        // (crate::pg::accept). The setting, an allowance in force, or the
        // drift IDs already have, whichever is largest.
        let drift_now = self.drift_now_ms(config);
        record.drift_limit_ms = Some(
            self.generator
                .drift_in_force_ms(settings::drift_policy(), drift_now)
                .max(drift_now.max(0) as u64),
        );
        // SAFETY: no argument; leases are written only out of recovery, where
        // it reads the timeline WAL is inserted on from shared memory.
        record.timeline = Some(unsafe { pg_sys::GetWALInsertionTimeLine() });
        // Never below what the file already holds under this configuration:
        // with lease_sync just switched, the worker may have written a
        // larger lease that is not raised in memory yet.
        // SAFETY: `held` holds self.lock exclusively (checked above) for the whole
        // call; the field is copied out at once.
        if let Some(persisted) = unsafe { self.guarded() }.persisted {
            if persisted.differences(&record).is_empty() {
                record.lease_until_unix_ms = record
                    .lease_until_unix_ms
                    .max(persisted.lease_until_unix_ms);
            }
        }
        write_lease(&data_dir(), &record, system_identifier()).map_err(|e| {
            self.lease_failures.fetch_add(1, Ordering::Relaxed);
            GenerateError::Lease(e.to_string())
        })?;
        // SAFETY: `held` holds self.lock exclusively (checked above); the
        // reference lives for this one assignment.
        unsafe { self.guarded() }.persisted = Some(record);
        let end = wal::log_lease(&record);
        self.successor_floor_durable(record.lease_until_ms());
        self.generator
            .counters
            .lease_writes
            .fetch_add(1, Ordering::Relaxed);
        self.lease_written_unix_ms
            .store(crate::pg::clock::unix_now_ms(), Ordering::Relaxed);
        Ok((record.lease_until_ms(), end))
    }

    /// The lease worker's look at an allowance to run ahead of the drift
    /// limit (a successor's): once IDs are back within the limit, the lease
    /// is written again, unchanged but for the limit it records, so that a
    /// later successor does not start as far ahead as this one did (each
    /// takeover would add to the last). Returns whether it wrote.
    pub fn record_ended_allowance(&self, config: &Config) -> Result<bool, GenerateError> {
        let policy = settings::drift_policy();
        // (An allowance within the limit, as a restart leaves one, changes
        // nothing; it ends with the first call that settles.)
        if self.generator.ahead_allowance_ms.load(Ordering::Acquire) <= policy.max_drift_ms
            || self.successor_pending.load(Ordering::Acquire)
        {
            return Ok(false);
        }
        let guard = self.lock.exclusive();
        let drift_now = self.drift_now_ms(config);
        if self.generator.drift_in_force_ms(policy, drift_now) > policy.max_drift_ms {
            return Ok(false);
        }
        let lease = self.generator.lease_until_ms.load(Ordering::Acquire);
        if lease == 0 {
            return Ok(false);
        }
        self.record_lease_locked(&guard, config, lease)?;
        Ok(true)
    }

    /// How far the last pair is ahead of this server's clock (ms; negative
    /// when the clock has passed it).
    fn drift_now_ms(&self, config: &Config) -> i64 {
        self.generator.last_time_ms(&config.layout) as i64 - crate::pg::clock::now_ms(config)
    }

    /// A lease up to `lease_ms` is durable (file and WAL): once it covers
    /// the successor's floor, a crash no longer needs the successor's file
    /// to restart above the predecessor. The caller holds the lock.
    fn successor_floor_durable(&self, lease_ms: u64) {
        let floor = self.successor_floor_ms.load(Ordering::Acquire);
        if !self.successor_marker.load(Ordering::Acquire)
            || self.successor_pending.load(Ordering::Acquire)
            || floor == 0
            || lease_ms < floor
        {
            return;
        }
        match remove_marker(&data_dir(), SUCCESSOR_FILE_NAME) {
            Ok(()) => self.successor_marker.store(false, Ordering::Release),
            Err(e) => pgrx::warning!(
                "snowflake_id: could not remove \"{SUCCESSOR_FILE_NAME}\": {e} (a restart will start IDs ahead of the clock again)"
            ),
        }
    }

    /// Raises the in-memory bound every issued ID stays within: never past
    /// the registry's grant (the fence), whatever the lease file holds.
    pub(super) fn raise_lease(&self, target_ms: u64) {
        self.generator
            .lease_until_ms
            .fetch_max(target_ms.min(registry::lease_ceiling()), Ordering::AcqRel);
    }

    /// Runs `f` with the lease bound (ms since the epoch) under the lock
    /// that every lease extension takes: while it runs no backend raises
    /// the bound (the registry's release cuts the grant down to it).
    pub fn with_lease_lock<R>(&self, f: impl FnOnce(u64) -> R) -> R {
        let _guard = self.lock.exclusive();
        f(self.generator.lease_until_ms.load(Ordering::Acquire))
    }
}
