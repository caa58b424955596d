//! The custom WAL resource manager of the lease records (PostgreSQL 15
//! and later), modelled on PostgreSQL's `src/test/modules/test_custom_rmgrs`:
//! redo, and the descriptions `pg_walinspect` shows. Why the lease is in the
//! WAL: [`crate::pg::wal`].
//!
//! # Redo
//! Runs in the startup process. It raises the generator's floor (not the
//! durable lease bound: the first ID after promotion still writes a lease of
//! its own, on the new timeline), writes the record into the local lease
//! file so that a restarted standby keeps it, and is idempotent (redo
//! restarts from the last restart point and replays records twice). It never
//! raises an ERROR, which would stop the standby: a record it cannot use is
//! reported as a WARNING and the server refuses to issue IDs after promotion
//! until an operator looks ([`crate::pg::state::Blocked::ReplayFailed`], [`crate::pg::replay`]).
//! What a record changes is decided by the pure
//! [`crate::core::lease_wal::plan_replay`].
//!
//! # The resource manager id
//! [`RMGR_ID`] is 128, `RM_EXPERIMENTAL_ID`: PostgreSQL keeps 128 for
//! extensions in development and 129..255 for extensions that registered
//! an id on <https://wiki.postgresql.org/wiki/CustomWALResourceManagers>.
//! Two preloaded libraries with the same id stop the server at start with
//! PostgreSQL's message "custom resource manager ... has the same ID". To
//! move to a registered id: register one on the wiki page, change
//! [`RMGR_ID`], and upgrade every server of the replication group while no
//! WAL written under the old id is still needed (after a checkpoint on the
//! primary and every standby's restart point past it, with no archived WAL
//! of the old id left to restore): a record with an id no loaded library
//! registered stops redo.

use crate::core::lease::LeaseRecord;
use crate::core::lease_wal;
use crate::core::lease_wal::XLOG_LEASE;
use crate::pg::wal::RMGR_ID;
use crate::pg::{settings, state};
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::ffi::{c_char, CStr, CString};

/// The name `pg_walinspect` shows in `resource_manager`, and PostgreSQL in
/// its log when the library registers it.
const RMGR_NAME: &CStr = c"snowflake_id";

/// Registers the resource manager. Called from `_PG_init` while preloading
/// (PostgreSQL refuses it at any other time); every process forked by the
/// postmaster inherits it, the startup process included.
pub fn register() {
    let mut rmgr = pg_sys::RmgrData {
        rm_name: RMGR_NAME.as_ptr(),
        rm_redo: Some(redo),
        rm_desc: Some(desc),
        rm_identify: Some(identify),
        ..Default::default()
    };
    // PostgreSQL copies the struct into its table.
    // SAFETY: called from `_PG_init` while preloading, in the postmaster
    // before any child is forked (PostgreSQL raises an ERROR at any other
    // time). `rmgr` is a valid RmgrData that outlives the call, which copies
    // it into RmgrTable; its name is a 'static C string and its callbacks are
    // this library's functions, which stay loaded for the process's life.
    unsafe { pg_sys::RegisterCustomRmgr(RMGR_ID, &raw mut rmgr) };
}

/// The record's info (without PostgreSQL's bits) and main data.
///
/// # Safety
/// `record` is the reader PostgreSQL passes to a resource manager, with a
/// decoded record.
unsafe fn info_and_data<'a>(record: *mut pg_sys::XLogReaderState) -> (u8, &'a [u8]) {
    // SAFETY: per this function's contract `record` is the reader PostgreSQL
    // hands a resource manager, whose `record` is the decoded record being
    // replayed or described: non-null, with `main_data_len` bytes at
    // `main_data` (an empty slice when there are none). Relies on: callers
    // keep the slice no longer than the callback (the decoded record is reused
    // after it).
    unsafe {
        let decoded = (*record).record;
        let info = (*decoded).header.xl_info & !(pg_sys::XLR_INFO_MASK as u8);
        let len = (*decoded).main_data_len as usize;
        let data = if len == 0 || (*decoded).main_data.is_null() {
            &[][..]
        } else {
            std::slice::from_raw_parts((*decoded).main_data.cast::<u8>(), len)
        };
        (info, data)
    }
}

/// The record as a lease, or why it is not one.
fn lease_of(info: u8, data: &[u8]) -> Result<LeaseRecord, String> {
    if info != XLOG_LEASE {
        return Err(format!("unknown snowflake_id WAL record type 0x{info:02x}"));
    }
    lease_wal::decode(data)
}

#[pg_guard]
unsafe extern "C-unwind" fn redo(record: *mut pg_sys::XLogReaderState) {
    // SAFETY: PostgreSQL calls rm_redo with the reader of the record being
    // replayed, decoded; `data` is used only within this call.
    let (info, data) = unsafe { info_and_data(record) };
    let (Some(shared), Some(config)) = (state::shared(), settings::config()) else {
        return;
    };
    match lease_of(info, data) {
        Ok(mut lease) => {
            let mut timeline: pg_sys::TimeLineID = 0;
            // SAFETY: called in the startup process during redo, where
            // XLogRecoveryCtl exists; the function takes its spinlock and
            // writes the timeline of the record being replayed through the
            // pointer, a local of this frame.
            unsafe { pg_sys::GetCurrentReplayRecPtr(&mut timeline) };
            lease.timeline = (timeline > 0).then_some(timeline);
            shared.replay_lease(config, &lease)
        }
        Err(reason) => shared.replay_failed(&format!(
            "a lease record in the WAL cannot be used: {reason}"
        )),
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn desc(buf: pg_sys::StringInfo, record: *mut pg_sys::XLogReaderState) {
    // SAFETY: PostgreSQL calls rm_desc with the reader of the record being
    // described, decoded; `data` is used only within this call.
    let (info, data) = unsafe { info_and_data(record) };
    let text = match lease_of(info, data) {
        Ok(lease) => lease_wal::describe(&lease),
        Err(reason) => format!("invalid: {reason}"),
    };
    // The text is made of numbers and words: no NUL inside.
    if let Ok(text) = CString::new(text) {
        // SAFETY: `buf` is the StringInfo PostgreSQL passed to rm_desc for
        // this call, and `text` is a NUL-terminated CString that outlives it.
        unsafe { pg_sys::appendStringInfoString(buf, text.as_ptr()) };
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn identify(info: u8) -> *const c_char {
    if info & !(pg_sys::XLR_INFO_MASK as u8) == XLOG_LEASE {
        c"LEASE".as_ptr()
    } else {
        std::ptr::null()
    }
}

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    // Runs inside a server started by `cargo pgrx test` with the library
    // preloaded and `snowflake_id.node_id = 42` (see `crate::pg_test`).
    use crate::test_support::one;
    use pgrx::prelude::*;

    #[pg_test]
    fn the_resource_manager_is_registered() {
        assert!(one::<bool>(
            "SELECT rm_id = 128 AND NOT rm_builtin FROM pg_get_wal_resource_managers() WHERE rm_name = 'snowflake_id'"
        ));
    }

    #[pg_test]
    fn a_lease_extension_writes_the_wal() {
        // Once the clock is past the lease (earlier tests may have pushed
        // it seconds ahead with batches), the next ID must extend it: a
        // record in the WAL. Tests run concurrently, and while others issue
        // IDs the lease worker keeps the lease ahead, so this call rarely
        // extends it itself: attempts for as long as the rest of the suite
        // may run (at least 0.3 s each), until one sees its own.
        let seen = (0..40).any(|_| {
            Spi::run(
                "SELECT pg_sleep(coalesce(greatest(0, extract(epoch FROM lease_until - clock_timestamp())), 0) + 0.3)
                 FROM snowflake_stats()",
            )
            .unwrap();
            let writes: i64 = one("SELECT lease_writes FROM snowflake_stats()");
            let before: String = one("SELECT pg_current_wal_insert_lsn()::text");
            Spi::run("SELECT snowflake_next()").unwrap();
            one::<i64>("SELECT lease_writes FROM snowflake_stats()") > writes
                && one::<bool>(&format!("SELECT pg_current_wal_insert_lsn() > '{before}'"))
        });
        assert!(seen, "no ID after the lease ran out wrote a lease record");
    }
}
