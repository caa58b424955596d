//! The read horizon's place in shared memory and its transaction hooks
//! (the protocol and why it is safe: [`crate::core::horizon`]).
//!
//! One [`Slot`] per backend, indexed by the backend's place in PostgreSQL's
//! array of processes (a parallel worker uses its leader's: the leader's
//! transaction outlives it), and a table of the bounds of prepared
//! transactions, guarded by the tranche's second LWLock (two-phase commit
//! is rare; the slots take no lock). The table is kept in a file too
//! ([`PREPARED_FILE_NAME`]): prepared transactions outlive a restart.
//!
//! The transaction callback ([`xact`]), registered in the postmaster and inherited by
//! every backend (it also adds the backend's issued IDs to the shared
//! counter, and costs a few loads for a transaction that issued nothing),
//! clears the backend's slot once its transaction has ended
//! (PostgreSQL calls it after the commit became visible), and moves the
//! bound of a transaction being prepared into the table. A transaction
//! prepared without having issued an ID gets an entry too, with no bound
//! ([`EMPTY`]): it holds nothing back, and the horizon must know that it is
//! not a transaction whose bound was lost (Citus prepares one on every
//! worker for each distributed write, logical replication with
//! `two_phase`, any `PREPARE TRANSACTION`). That entry is kept in memory
//! and goes into the file only when the file is written anyway, so that
//! such a PREPARE costs no extra fsync; after a restart, one still open is
//! unknown again, and the horizon refuses until it ends (the safe side).
//! An entry goes when its transaction is no longer in progress: removed by
//! the next horizon or PREPARE that sees it.

use crate::core::config::Config;
use crate::core::generator::SharedState;
use crate::core::horizon::{self, read_prepared, write_prepared, Slot, EMPTY, PREPARED_FILE_NAME};
use crate::pg::errors::{raise, Error};
use crate::pg::lwlock::Lock;
use crate::pg::registry;
use crate::pg::settings::data_dir;
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::ffi::CStr;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

pub mod xact;

const SHMEM_NAME: &CStr = c"snowflake_id horizon";
/// Slots beyond `MaxBackends` for the auxiliary processes, which sit
/// between the backends and the prepared transactions in PostgreSQL's
/// array (never more than 38 up to 18); an index past the slots is
/// refused, never written.
const AUX_MARGIN: usize = 64;

/// A prepared transaction's bound (`xid` 0: a free entry).
#[repr(C)]
struct PreparedEntry {
    xid: AtomicU32,
    bound: AtomicU64,
}

#[repr(C)]
struct Header {
    slot_count: usize,
    prepared_capacity: usize,
    lock: Lock,
}

// Process-local, like all of a PostgreSQL process's globals: a server
// process is single-threaded. HEADER is set by `attach` in the postmaster's
// shared memory startup hook and inherited by every child on fork, then
// only read; PUBLISHED and PREPARING_XID describe this backend's own
// transaction and are touched only by it (its issuing path and its
// transaction callback).
static mut HEADER: *mut Header = std::ptr::null_mut();
/// This backend published a bound for its current transaction.
static mut PUBLISHED: bool = false;
/// The transaction this backend is preparing, once its bound is in the
/// table (removed again if the PREPARE fails).
static mut PREPARING_XID: u32 = 0;

fn max_prepared_transactions() -> usize {
    // SAFETY: the name is a 'static C string; with missing_ok = false,
    // GetConfigOption returns a NUL-terminated string (for an integer setting,
    // in a static buffer of guc.c, valid until its next call) or raises an
    // ERROR; the text is parsed into a number at once. Called in the request
    // and startup hooks, single-threaded.
    unsafe {
        let value = pg_sys::GetConfigOption(c"max_prepared_transactions".as_ptr(), false, false);
        if value.is_null() {
            return 0;
        }
        CStr::from_ptr(value)
            .to_str()
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }
}

fn sizes() -> (usize, usize) {
    // SAFETY: MaxBackends is a plain int global, set by InitializeMaxBackends
    // before the shmem_request hook runs (PostgreSQL 15 and later) and never
    // changed after; read in this single-threaded process.
    let slots = unsafe { pg_sys::MaxBackends } as usize + AUX_MARGIN;
    (slots, max_prepared_transactions())
}

fn layout_size(slots: usize, prepared: usize) -> usize {
    slots_offset()
        + slots * std::mem::size_of::<Slot>()
        + prepared * std::mem::size_of::<PreparedEntry>()
}

const fn slots_offset() -> usize {
    // The header, rounded up to a slot's alignment.
    std::mem::size_of::<Header>().div_ceil(64) * 64
}

/// Shared memory to request (from the request hook): the slots and the
/// table.
pub fn request_size() -> usize {
    let (slots, prepared) = sizes();
    layout_size(slots, prepared)
}

/// Creates or finds the horizon's shared memory (in the startup hook, under
/// `AddinShmemInitLock`); at creation, the bounds of prepared transactions
/// are read back from their file.
///
/// # Safety
/// Called once per process from the shared memory startup hook.
pub unsafe fn attach(lock: Lock) {
    // SAFETY: per this function's contract, called from the shared memory
    // startup hook under AddinShmemInitLock, single-threaded, before any other
    // process uses the horizon. ShmemInitStruct returns a block of
    // layout_size(slots, prepared) bytes aligned to PG_CACHE_LINE_SIZE (or
    // raises an ERROR): the header, the `slots` Slots at slots_offset() (a
    // multiple of their 64-byte alignment) and the `prepared` entries right
    // after them fit it exactly, and all are written before anything reads
    // them (`take(prepared)` keeps the file's entries inside). sizes() gives
    // the numbers the request hook reserved: both settings change only at a
    // restart. HEADER is written before any child is forked.
    unsafe {
        let (slots, prepared) = sizes();
        let mut found = false;
        let base = pg_sys::ShmemInitStruct(
            SHMEM_NAME.as_ptr(),
            layout_size(slots, prepared),
            &mut found,
        )
        .cast::<u8>();
        let header = base.cast::<Header>();
        if !found {
            header.write(Header {
                slot_count: slots,
                prepared_capacity: prepared,
                lock,
            });
            let slot_base = base.add(slots_offset()).cast::<Slot>();
            for i in 0..slots {
                slot_base.add(i).write(Slot::default());
            }
            let entries = slot_base.add(slots).cast::<PreparedEntry>();
            for i in 0..prepared {
                entries.add(i).write(PreparedEntry {
                    xid: AtomicU32::new(0),
                    bound: AtomicU64::new(EMPTY),
                });
            }
            match read_prepared(&data_dir()) {
                Ok(kept) => {
                    if kept.len() > prepared {
                        warning!(
                            "snowflake_id: \"{PREPARED_FILE_NAME}\" holds {} bounds, more than max_prepared_transactions ({prepared}); snowflake_horizon() refuses while a prepared transaction it lost is open",
                            kept.len()
                        );
                    }
                    for (i, (xid, bound)) in kept.into_iter().take(prepared).enumerate() {
                        (*entries.add(i)).bound.store(bound, Ordering::SeqCst);
                        (*entries.add(i)).xid.store(xid, Ordering::SeqCst);
                    }
                }
                Err(e) => warning!(
                    "snowflake_id: could not read \"{PREPARED_FILE_NAME}\" ({e}): snowflake_horizon() refuses while a transaction prepared before this start is open"
                ),
            }
        }
        HEADER = header;
    }
}

fn header() -> Option<&'static Header> {
    // SAFETY: HEADER is written only by `attach` in the startup hook, before
    // any child is forked, and only read afterwards (single-threaded process);
    // it is null or points to the header in shared memory, which lives as long
    // as the process.
    unsafe { HEADER.as_ref() }
}

fn slots(header: &Header) -> &'static [Slot] {
    // SAFETY: relies on: `header` being the header `attach` created (callers
    // get it from `header()` or HEADER; nothing else makes a Header), followed
    // at slots_offset() by `slot_count` initialised, 64-byte aligned Slots in
    // the same shared memory block, which lives as long as the process. Slots
    // are atomics, so shared references to them from many processes are fine.
    unsafe {
        let base = (header as *const Header)
            .cast::<u8>()
            .add(slots_offset())
            .cast::<Slot>();
        std::slice::from_raw_parts(base, header.slot_count)
    }
}

/// The prepared transactions' table, right after the slots.
fn entries(header: &Header) -> &'static [PreparedEntry] {
    // SAFETY: relies on: `header` being the header `attach` created, whose
    // `prepared_capacity` initialised entries (atomics, 8-byte aligned) follow
    // its slots in the same shared memory block, which lives as long as the
    // process.
    unsafe {
        let base = slots(header).as_ptr_range().end.cast::<PreparedEntry>();
        std::slice::from_raw_parts(base, header.prepared_capacity)
    }
}

/// Whether a transaction (a prepared one included) is still in progress.
fn in_progress(xid: u32) -> bool {
    // SAFETY: TransactionIdIsInProgress takes the xid by value and reads the
    // proc array under its own lock; called in a backend, through pgrx's FFI
    // guard.
    unsafe { pg_sys::TransactionIdIsInProgress(pg_sys::TransactionId::from_inner(xid)) }
}

/// The index of a process in PostgreSQL's array of processes.
fn proc_index(proc: *mut pg_sys::PGPROC) -> Option<usize> {
    // SAFETY: ProcGlobal is a process-local global pointer, checked for null;
    // when set it points to PostgreSQL's PROC_HDR in shared memory. Relies on:
    // `proc` being null or an entry of ProcGlobal->allProcs (callers pass
    // MyProc or its lockGroupLeader, both entries of that array), as
    // offset_from requires both pointers in the same allocation.
    unsafe {
        if proc.is_null() || pg_sys::ProcGlobal.is_null() {
            return None;
        }
        usize::try_from(proc.offset_from((*pg_sys::ProcGlobal).allProcs)).ok()
    }
}

/// The slot this process publishes into: its own, or its parallel
/// leader's (a parallel worker's IDs belong to the leader's transaction).
fn publishing_slot(header: &Header) -> Option<&'static Slot> {
    // SAFETY: MyProc is this process's PGPROC in shared memory, checked for
    // null; its lockGroupLeader is written only by this process itself
    // (BecomeLockGroupLeader/Member), so this unlocked read races with nothing,
    // and is null or the leader's PGPROC, an entry of the same array.
    // `header` comes from `header()`.
    unsafe {
        if pg_sys::MyProc.is_null() {
            return None;
        }
        let leader = (*pg_sys::MyProc).lockGroupLeader;
        let owner = if leader.is_null() {
            pg_sys::MyProc
        } else {
            leader
        };
        proc_index(owner).and_then(|i| slots(header).get(i))
    }
}

/// The slot this process owns, the only one it ever clears. Never the
/// leader's: a parallel worker commits transactions of its own (the one
/// that connects it to the database, before its part of the query) while
/// its leader's transaction goes on.
fn own_slot(header: &Header) -> Option<&'static Slot> {
    // SAFETY: MyProc is a process-local global (null is checked by
    // proc_index); `header` comes from `header()`.
    unsafe { proc_index(pg_sys::MyProc).and_then(|i| slots(header).get(i)) }
}

/// Before the first ID of a transaction: publish the smallest ID the
/// generator can issue from now on. Called by every issuing path before
/// the generator's compare-and-swap; after the first, a local flag only.
#[inline(always)]
pub fn before_issue(config: &Config, generator: &SharedState) {
    // SAFETY: PUBLISHED is process-local (see above); a plain read.
    if unsafe { !PUBLISHED } {
        publish(config, generator);
    }
}

#[cold]
#[inline(never)]
fn publish(config: &Config, generator: &SharedState) {
    let Some(header) = header() else { return };
    let Some(slot) = publishing_slot(header) else {
        raise(Error::HorizonNoSlot)
    };
    // (Issuing checked the node id first.)
    slot.publish(next_id(
        config,
        generator,
        registry::node_id(config).unwrap_or(0),
    ));
    // SAFETY: PUBLISHED is process-local (see above); a plain write.
    unsafe { PUBLISHED = true };
}

/// The smallest ID the generator can issue after its last pair.
fn next_id(config: &Config, generator: &SharedState, node: u64) -> u64 {
    let layout = &config.layout;
    let pair = generator.pair.load(Ordering::SeqCst);
    layout.id_of_pair(pair.saturating_add(1).min(layout.max_pair()), node) as u64
}

/// `snowflake_horizon()`: the generator's next ID first, then the slots,
/// then the prepared transactions still in progress.
pub fn horizon(config: &Config, generator: &SharedState) -> i64 {
    let Some(node) = registry::node_id(config) else {
        if registry::enabled() {
            registry::issuing_node();
        }
        raise(Error::NodeIdUnset {
            max_node: config.layout.max_node(),
        })
    };
    // SAFETY: RecoveryInProgress takes no argument and reads shared memory this
    // process is attached to.
    if unsafe { pg_sys::RecoveryInProgress() } {
        raise(Error::HorizonInRecovery);
    }
    let Some(header) = header() else {
        raise(Error::NotPreloaded)
    };
    // The prepared transactions, read before their bounds: a transaction
    // listed here wrote its bound before it was listed (PRE_PREPARE comes
    // first), so each must have one below unless it was prepared before
    // this server started and its bound was lost (a failover, a
    // point-in-time restore, an unreadable file).
    let prepared = prepared_transactions();
    let next = next_id(config, generator, node);
    let slot_min = horizon::horizon(next, slots(header).iter().map(Slot::get));
    let known = {
        let _guard = header.lock.shared();
        kept_entries(header)
    };
    let mut prepared_min = EMPTY;
    let mut ended = Vec::new();
    for &(xid, bound) in &known {
        if in_progress(xid) {
            prepared_min = prepared_min.min(bound);
        } else {
            ended.push(xid);
        }
    }
    if !ended.is_empty() {
        forget_prepared(header, |xid| ended.contains(&xid));
    }
    // Unknown: listed, without an entry, and still in progress. (Listed,
    // then committed and its entry freed by another backend before the
    // table was read: no longer in progress, and it holds nothing back. An
    // entry is freed only once its transaction has ended, and a transaction
    // id does not come back, so this check after the read is exact.)
    if let Some((xid, gid)) = prepared
        .into_iter()
        .find(|(xid, _)| !known.iter().any(|(k, _)| k == xid) && in_progress(*xid))
    {
        raise(Error::HorizonUnknownPrepared { xid, gid });
    }
    slot_min.min(prepared_min) as i64
}

/// `(xid, gid)` of every prepared transaction (`pg_prepared_xacts`).
fn prepared_transactions() -> Vec<(u32, String)> {
    Spi::connect(|client| {
        client
            .select(
                "SELECT transaction::text::bigint, gid FROM pg_catalog.pg_prepared_xacts",
                None,
                &[],
            )
            .unwrap_or_else(|e| raise(e))
            .filter_map(|row| {
                let xid = row.get::<i64>(1).ok()??;
                let gid = row.get::<String>(2).ok()??;
                Some((u32::try_from(xid).ok()?, gid))
            })
            .collect()
    })
}

/// Frees the entries whose transaction `gone` says has ended; returns
/// whether it freed one with a bound (the file must follow then; entries
/// without a bound need not leave it). The caller holds the lock
/// exclusively.
fn free_entries(header: &Header, gone: impl Fn(u32) -> bool) -> bool {
    let mut freed_bound = false;
    for entry in entries(header) {
        let xid = entry.xid.load(Ordering::SeqCst);
        if xid != 0 && gone(xid) {
            entry.xid.store(0, Ordering::SeqCst);
            freed_bound |= entry.bound.swap(EMPTY, Ordering::SeqCst) != EMPTY;
        }
    }
    freed_bound
}

/// Removes the bounds of prepared transactions that have ended, and keeps
/// the file in step.
fn forget_prepared(header: &Header, gone: impl Fn(u32) -> bool) {
    let written = {
        let _guard = header.lock.exclusive();
        // (Another backend may have removed them first.)
        if free_entries(header, gone) {
            write_prepared(&data_dir(), &kept_entries(header))
        } else {
            Ok(())
        }
    };
    // (The warning after the release: it may be sent to the client.)
    if let Err(e) = written {
        warning!("snowflake_id: could not write \"{PREPARED_FILE_NAME}\": {e}");
    }
}

fn kept_entries(header: &Header) -> Vec<(u32, u64)> {
    entries(header)
        .iter()
        .filter_map(|e| {
            let xid = e.xid.load(Ordering::SeqCst);
            (xid != 0).then(|| (xid, e.bound.load(Ordering::SeqCst)))
        })
        .collect()
}
