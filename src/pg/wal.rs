//! The lease in the WAL, the writing side: one record per lease extension,
//! and the wait for synchronous standbys of `snowflake_id.lease_sync`. The
//! records belong to a custom resource manager ([`crate::pg::rmgr`]).
//!
//! # Why
//! A standby copies the lease file once, at base-backup time. Without more,
//! a standby promoted a second after its primary died resumes after that old
//! file and its own clock, below the IDs the old primary issued in its last
//! seconds (a batch may run up to `max_clock_drift` ahead of the clock), and
//! under the same node id: duplicates. So every lease extension also writes
//! one small record to the WAL, flushed, *before* the in-memory lease is
//! raised ([`crate::pg::state::Shared`], [`crate::pg::lease`]). Every row that carries an ID under
//! that lease is written to the WAL after the record, so whoever replays the
//! WAL (a streaming or cascaded standby, a point-in-time restore, crash
//! recovery) has replayed a lease at or above every ID it holds.
//!
//! Redo, and the choice of the resource manager id, are in
//! [`crate::pg::rmgr`].

use crate::core::lease::LeaseRecord;
use crate::core::lease_wal::{self, RECORD_LEN, XLOG_LEASE};
use pgrx::pg_sys;

/// The resource manager id of the lease records: `RM_EXPERIMENTAL_ID`,
/// PostgreSQL's id for extensions in development ([`crate::pg::rmgr`] says
/// why, and how to move to a registered id).
pub const RMGR_ID: u8 = pg_sys::RM_EXPERIMENTAL_ID as u8;

/// Writes `record` to the WAL and flushes it; returns the end of the
/// record, for a wait for synchronous standbys. Must not run in recovery
/// (the callers issue IDs, which a server in recovery refuses first).
pub fn log_lease(record: &LeaseRecord) -> pg_sys::XLogRecPtr {
    let bytes = lease_wal::encode(record);
    // SAFETY: the WAL insertion protocol in one process: XLogBeginInsert,
    // one XLogRegisterData of `bytes`, which lives until XLogInsert has copied
    // it (the cast to *mut only matches older signatures: PostgreSQL never
    // writes through it), then XLogInsert for the resource manager registered
    // in `_PG_init`, and XLogFlush of the record's end. Relies on: not being in
    // recovery (see above; XLogBeginInsert raises an ERROR there, which pgrx's
    // FFI guard turns into a panic that releases the callers' LWLock guard).
    unsafe {
        pg_sys::XLogBeginInsert();
        #[cfg(feature = "pg15")]
        pg_sys::XLogRegisterData(bytes.as_ptr() as *mut std::ffi::c_char, RECORD_LEN as i32);
        #[cfg(any(feature = "pg16", feature = "pg17"))]
        pg_sys::XLogRegisterData(bytes.as_ptr() as *mut std::ffi::c_char, RECORD_LEN as u32);
        #[cfg(any(feature = "pg18", feature = "pg19"))]
        pg_sys::XLogRegisterData(bytes.as_ptr().cast(), RECORD_LEN as u32);
        let end = pg_sys::XLogInsert(RMGR_ID, XLOG_LEASE);
        pg_sys::XLogFlush(end);
        end
    }
}

/// `lease_sync`: waits until the synchronous standbys (those that
/// `synchronous_standby_names` makes synchronous) have flushed the WAL up
/// to `end`, the way a commit waits with `synchronous_commit = on`; at once
/// when none is configured (or `max_wal_senders` is 0). Returns whether they have: a wait that ended
/// for another reason (shutdown) returns `false`, and the caller must not
/// raise the lease. Called by the lease worker only, holding no LWLock.
pub fn wait_for_sync_standbys(end: pg_sys::XLogRecPtr) -> bool {
    // SAFETY: InterruptHoldoffCount is this process's global counter
    // (single-threaded), raised and lowered around the call as HOLD_INTERRUPTS
    // and RESUME_INTERRUPTS do; SyncRepWaitForLSN runs in the lease worker, a
    // process with a PGPROC, holding no LWLock. If it raised an ERROR, the
    // worker's error exit makes the counter moot.
    unsafe {
        // PostgreSQL requires interrupts held (HOLD_INTERRUPTS) around the
        // wait, as at commit: it checks ProcDiePending itself and ends the
        // wait at shutdown, and no interrupt may run between its queue's
        // clean-ups.
        pg_sys::InterruptHoldoffCount += 1;
        pg_sys::SyncRepWaitForLSN(end, false);
        pg_sys::InterruptHoldoffCount -= 1;
    }
    sync_standbys_have(end)
}

/// Whether the synchronous standbys have flushed the WAL up to `end`, or
/// none is configured.
fn sync_standbys_have(end: pg_sys::XLogRecPtr) -> bool {
    // SAFETY: SyncRepStandbyNames (a GUC's NUL-terminated string, null-checked)
    // and max_wal_senders are process-local globals; WalSndCtl is null
    // (checked) or PostgreSQL's struct in shared memory, which lives as long as
    // the process, and `lsn` has NUM_SYNC_REP_WAIT_MODE entries, of which
    // SYNC_REP_WAIT_FLUSH is one. The unlocked volatile read is discussed
    // below.
    unsafe {
        // No synchronous standby can exist without WAL senders: then
        // PostgreSQL's own commits wait for no one either.
        let names = pg_sys::SyncRepStandbyNames;
        if names.is_null() || *names == 0 || pg_sys::max_wal_senders == 0 {
            return true;
        }
        let ctl = pg_sys::WalSndCtl;
        if ctl.is_null() {
            return false;
        }
        // Written by the walsenders under SyncRepLock; an aligned 64-bit
        // read cannot tear, and a stale value only makes this say "not yet".
        let flushed =
            std::ptr::read_volatile(&raw const (*ctl).lsn[pg_sys::SYNC_REP_WAIT_FLUSH as usize]);
        flushed >= end
    }
}
