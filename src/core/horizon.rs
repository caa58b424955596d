//! The commit-safe read horizon: an ID below which every ID this server
//! issued inside a transaction belongs to a transaction that has ended.
//!
//! IDs are issued in insert order, transactions commit in another order: a
//! consumer that pages with `id > last_seen` can move past a row whose
//! transaction commits later, and never see it. The horizon is the smallest
//! ID any transaction still in progress may have issued, or, when none is,
//! the smallest ID the generator can issue next. Reading only below it (in a
//! statement that starts after the horizon was taken) misses nothing.
//!
//! Each backend owns a slot. Before the first ID of a top-level transaction
//! it publishes a *bound*: the smallest ID the generator can issue from then
//! on; every ID it then issues is at or above it. The slot is cleared when
//! the transaction has ended (after its commit became visible). A prepared
//! transaction's bound moves to a table of its own before the backend lets
//! go of it, and stays there until `COMMIT PREPARED` or `ROLLBACK PREPARED`.
//!
//! Why the bound comes first, and the reader reads the generator first:
//! all operations are sequentially consistent. A reader takes the
//! generator's next ID `n`, then the slots. For an ID `x` issued by a
//! transaction still in progress, either the reader saw its slot (`bound <=
//! x`), or it read that slot before the bound was published, hence before
//! `x` was issued, hence `n` was taken before `x` was issued and `n <= x`.
//! Either way the horizon is at most `x`. Publishing after issuing would
//! break this: the reader could take `n` after `x` and miss the slot.
//! (`tests::horizon_never_passes_an_unfinished_id` runs the protocol
//! against threads, and shows that the wrong order is caught.)
//!
//! Only the first ID of a transaction touches the slot; the ID's own
//! compare-and-swap is unchanged.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// A slot with no bound.
pub const EMPTY: u64 = u64::MAX;

/// One backend's bound, on a cache line of its own: a backend writes it
/// twice per transaction that issues IDs, and no other backend writes it.
#[repr(C, align(64))]
#[derive(Debug)]
pub struct Slot(AtomicU64);

impl Default for Slot {
    fn default() -> Self {
        Slot(AtomicU64::new(EMPTY))
    }
}

impl Slot {
    /// Publishes `bound` unless the slot already holds one (a lower or
    /// equal one: bounds only grow with time). Returns whether it did.
    /// (Parallel workers publish into their leader's slot; the leader's
    /// transaction outlives them, and clears it.)
    pub fn publish(&self, bound: u64) -> bool {
        self.0
            .compare_exchange(EMPTY, bound, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    }

    /// Empties the slot: its transaction has ended.
    pub fn clear(&self) {
        self.0.store(EMPTY, Ordering::SeqCst);
    }

    /// Empties the slot and returns what it held.
    pub fn take(&self) -> u64 {
        self.0.swap(EMPTY, Ordering::SeqCst)
    }

    pub fn get(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// The horizon from the generator's next ID (read first) and the bounds of
/// the transactions in progress (read after it): the smallest of them.
pub fn horizon(next_id: u64, bounds: impl IntoIterator<Item = u64>) -> u64 {
    bounds.into_iter().fold(next_id, u64::min)
}

/// The file in the data directory that keeps the bounds of prepared
/// transactions across restarts (they outlive the server's shared memory).
pub const PREPARED_FILE_NAME: &str = "snowflake_id.prepared";

/// The prepared transactions' bounds as the file holds them: a line
/// `<xid> <bound>` each.
pub fn format_prepared(entries: &[(u32, u64)]) -> String {
    entries
        .iter()
        .map(|(xid, bound)| format!("{xid} {bound}\n"))
        .collect()
}

/// The inverse of [`format_prepared`]; `None` for a damaged file.
pub fn parse_prepared(text: &str) -> Option<Vec<(u32, u64)>> {
    text.lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            let (xid, bound) = line.trim().split_once(' ')?;
            Some((xid.parse().ok()?, bound.parse().ok()?))
        })
        .collect()
}

/// Writes the prepared transactions' bounds durably (temporary file, fsync,
/// rename, fsync of the directory); with none, removes the file.
pub fn write_prepared(dir: &Path, entries: &[(u32, u64)]) -> io::Result<()> {
    let path = dir.join(PREPARED_FILE_NAME);
    if entries.is_empty() {
        match fs::remove_file(&path) {
            Ok(()) => return File::open(dir)?.sync_all(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        }
    }
    let tmp = dir.join(format!("{PREPARED_FILE_NAME}.tmp"));
    let mut f = File::create(&tmp)?;
    f.write_all(format_prepared(entries).as_bytes())?;
    f.sync_all()?;
    drop(f);
    fs::rename(&tmp, &path)?;
    File::open(dir)?.sync_all()
}

/// Reads the prepared transactions' bounds: none without a file.
pub fn read_prepared(dir: &Path) -> io::Result<Vec<(u32, u64)>> {
    match fs::read_to_string(dir.join(PREPARED_FILE_NAME)) {
        Ok(text) => parse_prepared(&text).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{PREPARED_FILE_NAME} is damaged"),
            )
        }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    #[test]
    fn prepared_file_round_trips_and_refuses_damage() {
        let dir = std::env::temp_dir().join(format!("sf_prepared_{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        assert_eq!(read_prepared(&dir).unwrap(), vec![]);
        let entries = vec![(745, 250_000_000_000_000_000), (4_000_000_000, 7)];
        write_prepared(&dir, &entries).unwrap();
        assert_eq!(read_prepared(&dir).unwrap(), entries);
        write_prepared(&dir, &[]).unwrap();
        assert!(!dir.join(PREPARED_FILE_NAME).exists());
        assert_eq!(parse_prepared("12 34\n\n"), Some(vec![(12, 34)]));
        assert_eq!(parse_prepared("12\n"), None);
        assert_eq!(parse_prepared("12 -3\n"), None);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn empty_slots_leave_the_next_id() {
        let slots: Vec<Slot> = (0..4).map(|_| Slot::default()).collect();
        assert_eq!(horizon(100, slots.iter().map(Slot::get)), 100);
    }

    #[test]
    fn the_smallest_bound_wins_and_a_published_bound_stays() {
        let slots: Vec<Slot> = (0..3).map(|_| Slot::default()).collect();
        assert!(slots[1].publish(40));
        assert!(slots[2].publish(70));
        // A second publish in the same transaction (or by a parallel worker
        // into its leader's slot) keeps the first, lower bound.
        assert!(!slots[1].publish(90));
        assert_eq!(horizon(100, slots.iter().map(Slot::get)), 40);
        assert_eq!(slots[1].take(), 40);
        assert_eq!(horizon(100, slots.iter().map(Slot::get)), 70);
        slots[2].clear();
        assert_eq!(horizon(100, slots.iter().map(Slot::get)), 100);
        assert_eq!(std::mem::size_of::<Slot>(), 64);
    }

    /// Writers run the backend's protocol against a shared counter standing
    /// in for the generator: publish the bound (the counter's next value),
    /// issue one to three IDs (increments), end (clear the slot). Readers run
    /// the horizon's protocol (the counter first, then the slots) and raise
    /// a shared maximum to what they computed. Before it ends, a writer
    /// checks that no reader has yet computed a horizon above its first ID:
    /// one that did, while the transaction was unfinished, would let a
    /// consumer pass its row. `issue_then_publish` runs the wrong order
    /// (issue, then publish), which the check must catch.
    ///
    /// The readers run for 300 ms and until the writers have ended
    /// `min_rounds` transactions in all, whichever is later (at most a
    /// minute): on a busy machine the writers get little of the 300 ms, and
    /// a check of a fixed time would test less, or fail for it.
    fn run_protocol(writers: usize, issue_then_publish: bool, min_rounds: u64) -> (u64, u64) {
        let generator = Arc::new(AtomicU64::new(0));
        let rounds_done = Arc::new(AtomicU64::new(0));
        let slots: Arc<Vec<Slot>> = Arc::new((0..writers).map(|_| Slot::default()).collect());
        let latest_horizon = Arc::new(AtomicU64::new(0));
        let violations = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        for w in 0..writers {
            let (generator, slots, latest_horizon, violations, stop, rounds_done) = (
                generator.clone(),
                slots.clone(),
                latest_horizon.clone(),
                violations.clone(),
                stop.clone(),
                rounds_done.clone(),
            );
            threads.push(std::thread::spawn(move || {
                let mut round = 0u64;
                while !stop.load(Ordering::SeqCst) {
                    if !issue_then_publish {
                        slots[w].publish(generator.load(Ordering::SeqCst) + 1);
                    }
                    let first = generator.fetch_add(1, Ordering::SeqCst) + 1;
                    if issue_then_publish {
                        // (A backend can be descheduled between the two.)
                        std::thread::yield_now();
                        slots[w].publish(first);
                    }
                    for _ in 0..(round % 3) {
                        generator.fetch_add(1, Ordering::SeqCst);
                    }
                    if round.is_multiple_of(5) {
                        std::thread::yield_now();
                    }
                    if latest_horizon.load(Ordering::SeqCst) > first {
                        violations.fetch_add(1, Ordering::SeqCst);
                    }
                    slots[w].clear();
                    round += 1;
                    rounds_done.fetch_add(1, Ordering::SeqCst);
                }
                round
            }));
        }
        let start = std::time::Instant::now();
        let (least, most) = (
            std::time::Duration::from_millis(300),
            std::time::Duration::from_secs(60),
        );
        while (start.elapsed() < least || rounds_done.load(Ordering::SeqCst) < min_rounds)
            && start.elapsed() < most
        {
            let next = generator.load(Ordering::SeqCst) + 1;
            let h = horizon(next, slots.iter().map(Slot::get));
            latest_horizon.fetch_max(h, Ordering::SeqCst);
        }
        stop.store(true, Ordering::SeqCst);
        let rounds: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
        (violations.load(Ordering::SeqCst), rounds)
    }

    #[test]
    fn horizon_never_passes_an_unfinished_id() {
        let (violations, rounds) = run_protocol(4, false, 10_000);
        assert!(
            rounds >= 10_000,
            "the writers ran only {rounds} transactions in a minute"
        );
        assert_eq!(
            violations, 0,
            "a horizon passed the first ID of an unfinished transaction"
        );
    }

    #[test]
    fn publishing_after_issuing_is_caught() {
        // The check has teeth: with the wrong order, the reader computes a
        // horizon past an unfinished ID. (One writer: with several, another
        // one's bound usually holds the horizon down.) Up to 50 tries of
        // 300 ms: a busy machine gives a try few transactions, though it
        // also deschedules the writer between issuing and publishing more.
        let caught = (0..50).any(|_| run_protocol(1, true, 0).0 > 0);
        assert!(caught, "the wrong order was never caught");
    }
}
