//! The read horizon's transaction callback: at the end of every
//! transaction it clears the backend's slot (and adds the backend's issued
//! IDs to the shared counter); at PREPARE it moves the transaction's bound
//! into the table of prepared transactions, and takes it out again if the
//! PREPARE fails. Why that keeps the horizon safe: [`super`].

use super::{
    entries, forget_prepared, free_entries, header, in_progress, kept_entries, own_slot, Header,
};
use super::{HEADER, PREPARING_XID, PUBLISHED};
use crate::core::horizon::{write_prepared, Slot, EMPTY};
use crate::pg::errors::{raise, Error};
use crate::pg::issued;
use crate::pg::settings::data_dir;
use crate::pg::state;
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::sync::atomic::Ordering;

/// PREPARE TRANSACTION: the bound moves into the table (and its file)
/// before the slot is cleared, so a horizon always sees one of the two. A
/// transaction that issued no ID (`bound` [`EMPTY`]) gets an entry without
/// a bound, in memory only (see [`super`]'s comment).
unsafe fn keep_prepared(header: &Header, bound: u64) {
    // SAFETY: called only from the transaction callback at PRE_PREPARE, in the
    // backend whose transaction is being prepared (this function's contract);
    // GetTopTransactionIdIfAny reads this backend's transaction state.
    let xid = unsafe { pg_sys::GetTopTransactionIdIfAny() }.into_inner();
    if xid == 0 || header.prepared_capacity == 0 {
        // No transaction id: nothing written, no row to protect. No room
        // at all: prepared transactions are disabled, and PostgreSQL
        // refuses this one right after.
        return;
    }
    // (TransactionIdIsInProgress, called by free_entries under this lock,
    // takes ProcArrayLock after it: an order nothing reverses.)
    let guard = header.lock.exclusive();
    // Entries of prepared transactions that ended make room first.
    let freed_bound = free_entries(header, |old| !in_progress(old));
    let Some(free) = entries(header)
        .iter()
        .find(|e| e.xid.load(Ordering::SeqCst) == 0)
    else {
        drop(guard);
        if bound == EMPTY {
            // No room for a transaction without IDs: the horizon will
            // refuse while it is open (the safe side). (The table has room
            // for max_prepared_transactions, which PostgreSQL enforces too.)
            return;
        }
        raise(Error::HorizonPreparedFull {
            capacity: header.prepared_capacity,
        })
    };
    free.bound.store(bound, Ordering::SeqCst);
    free.xid.store(xid, Ordering::SeqCst);
    // SAFETY: PREPARING_XID is process-local (see its declaration in [`super`]); a plain write.
    unsafe { PREPARING_XID = xid };
    let written = if bound != EMPTY || freed_bound {
        write_prepared(&data_dir(), &kept_entries(header))
    } else {
        Ok(())
    };
    drop(guard);
    if let Err(e) = written {
        // Before PREPARE is durable: failing it keeps the promise.
        raise(Error::HorizonPreparedUnwritable(e.to_string()));
    }
}

/// Registers the transaction callback (in `_PG_init`, while preloading:
/// every backend inherits it).
pub fn register() {
    // SAFETY: called from `_PG_init` while preloading, in the postmaster
    // before any child is forked (each inherits the callback list);
    // `transaction_event` has XactCallback's signature and never dereferences
    // the null argument.
    unsafe { pg_sys::RegisterXactCallback(Some(transaction_event), std::ptr::null_mut()) }
}

/// This process's slot, found once ([`own_slot`] when `MyProc` is set;
/// a process keeps its place in the array while `MyProc` is set, and no
/// transaction ends after it is unset at exit).
///
/// Process-local (a PostgreSQL process is single-threaded): null in the
/// postmaster, which has no `MyProc`, so every child starts with null and
/// sets it for itself.
static mut OWN_SLOT: *const Slot = std::ptr::null();

#[inline(always)]
fn own_slot_cached(header: &Header) -> Option<&'static Slot> {
    // SAFETY: MyProc and OWN_SLOT are process-local globals (single-threaded);
    // MyProc is checked for null, and OWN_SLOT is null or this process's slot
    // in shared memory, which outlives the process. Relies on: a process
    // keeping its place in the proc array while MyProc is set (see OWN_SLOT).
    unsafe {
        if pg_sys::MyProc.is_null() {
            return None;
        }
        if OWN_SLOT.is_null() {
            if let Some(slot) = own_slot(header) {
                OWN_SLOT = slot;
            }
        }
        OWN_SLOT.as_ref()
    }
}

/// The transaction callback. PostgreSQL calls it at every event of every
/// transaction of every backend, and nearly all of them issued no ID: a
/// commit or abort of such a transaction, and the events it does not need,
/// cost a few loads here (the issue of instruction counts measured the
/// guarded version at 130 instructions per transaction). This part does
/// nothing that can fail or unwind (loads, stores and one atomic add), so
/// it runs without pgrx's guard; the rest goes to [`transaction_event_guarded`].
/// It also adds the IDs this backend issued to the shared counter.
unsafe extern "C-unwind" fn transaction_event(
    event: pg_sys::XactEvent::Type,
    arg: *mut std::ffi::c_void,
) {
    use pg_sys::XactEvent::*;
    // SAFETY: PostgreSQL calls this callback in the backend whose transaction
    // has the event; HEADER, PUBLISHED and PREPARING_XID are process-local
    // (see their declarations in [`super`]), and HEADER is null or the header
    // in shared memory. This function has no pgrx guard: it relies on everything it calls outside
    // transaction_event_guarded (own_slot_cached, the slot's atomics,
    // flush_ids) neither raising an ERROR nor panicking, since a panic would
    // unwind into PostgreSQL's C frames.
    unsafe {
        let Some(header) = HEADER.as_ref() else {
            return;
        };
        match event {
            XACT_EVENT_COMMIT | XACT_EVENT_ABORT => {
                // (Its parallel workers may have published into it, so
                // the slot is read even when this backend published nothing;
                // a read, not a write, for the many that issued nothing.)
                if let Some(slot) = own_slot_cached(header) {
                    if slot.get() != EMPTY {
                        slot.clear();
                    }
                }
                PUBLISHED = false;
                flush_ids();
                if event == XACT_EVENT_ABORT && PREPARING_XID != 0 {
                    transaction_event_guarded(event, arg);
                }
            }
            // A parallel worker's end: the leader's transaction goes on.
            XACT_EVENT_PARALLEL_COMMIT | XACT_EVENT_PARALLEL_ABORT => {
                PUBLISHED = false;
                flush_ids();
            }
            XACT_EVENT_PRE_PREPARE | XACT_EVENT_PREPARE => {
                flush_ids();
                transaction_event_guarded(event, arg);
            }
            _ => {}
        }
    }
}

/// The IDs this backend issued, into the shared counter (cannot fail).
#[inline(always)]
fn flush_ids() {
    if let Some(shared) = state::shared() {
        issued::flush(&shared.generator.counters);
    }
}

/// The transaction events that take a lock, write a file or may fail: an
/// aborted PREPARE, and PREPARE itself.
#[pg_guard]
#[cold]
unsafe extern "C-unwind" fn transaction_event_guarded(
    event: pg_sys::XactEvent::Type,
    _arg: *mut std::ffi::c_void,
) {
    use pg_sys::XactEvent::*;
    let Some(header) = header() else { return };
    // SAFETY: called from `transaction_event`, in the backend whose
    // transaction has the event, with `header` from `header()`; PUBLISHED and
    // PREPARING_XID are process-local, and keep_prepared runs at PRE_PREPARE,
    // the only place it is meant for.
    unsafe {
        match event {
            XACT_EVENT_ABORT if PREPARING_XID != 0 => {
                // The PREPARE failed: its bound goes with it.
                let xid = PREPARING_XID;
                PREPARING_XID = 0;
                forget_prepared(header, |old| old == xid);
            }
            XACT_EVENT_PRE_PREPARE => {
                if let Some(slot) = own_slot(header) {
                    // (EMPTY when it issued no ID: an entry without a bound.)
                    keep_prepared(header, slot.get());
                    slot.clear();
                }
                PUBLISHED = false;
            }
            XACT_EVENT_PREPARE => {
                // (An ID issued after our PRE_PREPARE, by another library's
                // callback, would have left a bound: above the kept one.)
                if let Some(slot) = own_slot(header) {
                    slot.clear();
                }
                PREPARING_XID = 0;
                PUBLISHED = false;
            }
            _ => {}
        }
    }
}
