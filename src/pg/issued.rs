//! The count of issued IDs (`snowflake_stats().ids_issued`), kept per
//! backend and added to the shared counter now and then: a locked
//! instruction per ID would cost the hot path more than the rest of the
//! counting.

use crate::core::generator::Counters;
use std::sync::atomic::{AtomicU64, Ordering};

/// IDs this backend issued that are not yet added to the shared
/// `ids_issued` counter. Only this backend touches it (a plain load and
/// store, no locked instruction).
static PENDING_IDS: AtomicU64 = AtomicU64::new(0);
/// A long statement's IDs show up in the statistics at least this often.
const FLUSH_EVERY: u64 = 1 << 16;

/// Adds this backend's pending count to `counters.ids_issued`: at the end
/// of every transaction (commit or abort, also of parallel workers, and
/// when a backend exits, which aborts its transaction: the transaction
/// callback of [`crate::pg::horizon::xact`]), every [`FLUSH_EVERY`] IDs, and when
/// `snowflake_stats()` runs. Cannot fail.
#[inline]
pub fn flush(counters: &Counters) {
    if PENDING_IDS.load(Ordering::Relaxed) > 0 {
        let pending = PENDING_IDS.swap(0, Ordering::Relaxed);
        counters.ids_issued.fetch_add(pending, Ordering::Relaxed);
    }
}

/// Counts `count` IDs issued by this backend, flushed every
/// [`FLUSH_EVERY`].
#[inline(always)]
pub fn count(counters: &Counters, count: u64) {
    let pending = PENDING_IDS.load(Ordering::Relaxed) + count;
    PENDING_IDS.store(pending, Ordering::Relaxed);
    if pending >= FLUSH_EVERY {
        flush(counters);
    }
}
