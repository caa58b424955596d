//! The lease as a WAL record, and what replaying one does.
//!
//! Every lease extension is also written to the WAL (see
//! `crate::pg::wal`), before the in-memory lease is raised. WAL order then
//! puts the record before every row that carries an ID under that lease, so
//! a standby, a point-in-time restore or crash recovery has replayed a lease
//! at or above every ID it holds, and a promoted standby resumes after the
//! old primary's lease instead of after the lease file it copied at base
//! backup time.
//!
//! This module is the pure part: the record's bytes (fixed size, little
//! endian, versioned) and [`plan_replay`], which decides what a replayed
//! record changes. It is tested without a server.

use super::layout::IdLayout;
use super::lease::{LeaseRecord, UNSET_NODE_ID};
use std::fmt::Write;

/// The `info` byte of a lease record. The low four bits belong to
/// PostgreSQL (`XLR_INFO_MASK`); a resource manager uses the high four.
pub const XLOG_LEASE: u8 = 0x10;

/// The record format's version, the first byte of the record. Version 2
/// adds the drift limit in force ([`LeaseRecord::drift_limit_ms`]) where
/// version 1 had padding; both are read.
const FORMAT_VERSION: u8 = 2;

/// The size of a record's data: version, node bits, sequence bits, one
/// byte of padding, the drift limit in force (ms, `u32`: the setting's
/// range; version 1: four more bytes of padding), then the lease, the
/// epoch and the node id.
pub const RECORD_LEN: usize = 32;

/// The record's bytes (version 2). A record without a drift limit is
/// written with 0, which reads back as `Some(0)`: every writer records one.
pub fn encode(record: &LeaseRecord) -> [u8; RECORD_LEN] {
    let mut out = [0u8; RECORD_LEN];
    out[0] = FORMAT_VERSION;
    out[1] = record.node_bits as u8;
    out[2] = record.sequence_bits as u8;
    let limit = record.drift_limit_ms.unwrap_or(0).min(u32::MAX.into()) as u32;
    out[4..8].copy_from_slice(&limit.to_le_bytes());
    out[8..16].copy_from_slice(&record.lease_until_unix_ms.to_le_bytes());
    out[16..24].copy_from_slice(&record.epoch_unix_ms.to_le_bytes());
    out[24..32].copy_from_slice(&record.node_id.to_le_bytes());
    out
}

/// Reads a record's bytes; anything else than a well-formed record of this
/// version is refused with the reason.
pub fn decode(bytes: &[u8]) -> Result<LeaseRecord, String> {
    if bytes.len() != RECORD_LEN {
        return Err(format!(
            "a lease record has {RECORD_LEN} bytes of data, this one {}",
            bytes.len()
        ));
    }
    let version = bytes[0];
    if version != 1 && version != FORMAT_VERSION {
        return Err(format!(
            "unknown lease record version {version} (this build reads versions 1 and {FORMAT_VERSION})"
        ));
    }
    let padding = if version == 1 { 3..8 } else { 3..4 };
    if bytes[padding].iter().any(|&b| b != 0) {
        return Err("the lease record's padding is not zero".into());
    }
    let word = |at: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&bytes[at..at + 8]);
        w
    };
    let record = LeaseRecord {
        node_bits: bytes[1].into(),
        sequence_bits: bytes[2].into(),
        lease_until_unix_ms: i64::from_le_bytes(word(8)),
        epoch_unix_ms: i64::from_le_bytes(word(16)),
        node_id: u64::from_le_bytes(word(24)),
        drift_limit_ms: (version >= 2)
            .then(|| u64::from(u32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]))),
        // Given by the record's place in the WAL, not its bytes.
        timeline: None,
    };
    let layout = IdLayout::new(record.node_bits.into(), record.sequence_bits.into())
        .map_err(|e| format!("the lease record's layout is not valid: {e}"))?;
    // A lease written while snowflake_id.node_id is unset (by accepting a
    // configuration without one) is recorded as UNSET_NODE_ID.
    if record.node_id > layout.max_node() && record.node_id != UNSET_NODE_ID {
        return Err(format!(
            "the lease record's node id {} does not fit in {} bits",
            record.node_id, record.node_bits
        ));
    }
    if record.lease_until_unix_ms < record.epoch_unix_ms {
        return Err("the lease record's lease is before its epoch".into());
    }
    Ok(record)
}

/// One line for `pg_walinspect` and `pg_waldump`'s description column.
pub fn describe(record: &LeaseRecord) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        "lease_until_unix_ms {} (+{} ms after the epoch), node_id {}, epoch_unix_ms {}, layout {}/{}/{}",
        record.lease_until_unix_ms,
        record.lease_until_ms(),
        record.node_id,
        record.epoch_unix_ms,
        63u32.saturating_sub(record.node_bits + record.sequence_bits),
        record.node_bits,
        record.sequence_bits,
    );
    s
}

/// The largest ID a lease covers ([`LeaseRecord::largest_id_covered`]),
/// which orders leases of different configurations the way their IDs sort
/// in a primary key: an accepted configuration change always starts above
/// the old one's value. A record whose layout is not valid covers
/// everything: it is never replaced by a valid one, and never replaces one.
pub fn largest_id_covered(record: &LeaseRecord) -> i64 {
    record.largest_id_covered().unwrap_or(i64::MAX)
}

/// What replaying a record changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplayPlan {
    /// The record was written under this server's configuration: raise the
    /// generator's floor to after this lease (ms since the epoch). The
    /// durable lease bound is left alone, so the first ID after promotion
    /// still writes a lease of its own.
    pub raise_floor_ms: Option<u64>,
    /// The record was written under another configuration and covers more
    /// than any such record seen before, and more than a lease of this
    /// server's own configuration it already has: remember it, and refuse
    /// to issue until `snowflake_accept_configuration()` floors above it.
    pub remember_foreign: bool,
    /// The record was written under this server's configuration and covers
    /// more than the remembered record of another configuration: the old
    /// primary accepted the change this server's settings already have
    /// (its new IDs start above every ID of the old configuration), so the
    /// hold for it ends. Also ends the hold that redo of an accepted
    /// server's own WAL met again after a crash, at the acceptance's record.
    pub forget_foreign: bool,
    /// Write the record into the local lease file, so that a restarted
    /// standby, whose next redo may start after this record, keeps it.
    pub persist: bool,
}

/// Decides what replaying `record` does on a server whose configuration is
/// `local` (its lease field is ignored), whose lease file holds `persisted`
/// and which remembers `foreign` from an earlier record or its lease file.
/// Idempotent: a record replayed a second time (redo restarts from the last
/// restart point) changes nothing more.
pub fn plan_replay(
    local: &LeaseRecord,
    persisted: Option<&LeaseRecord>,
    foreign: Option<&LeaseRecord>,
    record: &LeaseRecord,
) -> ReplayPlan {
    let covered = largest_id_covered(record);
    let same_config = record.differences(local).is_empty();
    // A lease of this server's own configuration that covers more: the
    // generator resumes above it, so an older record of another
    // configuration orders below every new ID.
    let superseded = persisted
        .is_some_and(|p| p.differences(local).is_empty() && largest_id_covered(p) > covered);
    ReplayPlan {
        raise_floor_ms: same_config.then(|| record.lease_until_ms()),
        remember_foreign: !same_config
            && !superseded
            && foreign.is_none_or(|f| covered > largest_id_covered(f)),
        forget_foreign: same_config && foreign.is_some_and(|f| covered > largest_id_covered(f)),
        // A record with the same lease, later in the WAL, may say more: a
        // smaller drift limit (an allowance that ended), a later timeline.
        persist: persisted.is_none_or(|p| {
            let kept = largest_id_covered(p);
            covered > kept
                || (covered == kept
                    && (record.drift_limit_ms, record.timeline) != (p.drift_limit_ms, p.timeline))
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn record(lease: i64) -> LeaseRecord {
        LeaseRecord {
            lease_until_unix_ms: lease,
            epoch_unix_ms: 1_735_689_600_000,
            node_bits: 10,
            sequence_bits: 12,
            node_id: 9,
            drift_limit_ms: Some(5_000),
            timeline: None,
        }
    }

    #[test]
    fn round_trip() {
        let r = record(1_790_000_000_123);
        let bytes = encode(&r);
        assert_eq!(bytes.len(), RECORD_LEN);
        assert_eq!(decode(&bytes), Ok(r));
    }

    #[test]
    fn malformed_records_are_refused() {
        let good = encode(&record(1_790_000_000_000));
        assert!(decode(&good[..31]).unwrap_err().contains("32 bytes"));
        let mut v = good;
        v[0] = 3;
        assert!(decode(&v).unwrap_err().contains("version 3"));
        let mut p = good;
        p[3] = 1;
        assert!(decode(&p).unwrap_err().contains("padding"));
        // Version 1 had padding where version 2 has the drift limit.
        let mut v1 = good;
        v1[0] = 1;
        assert!(decode(&v1).unwrap_err().contains("padding"));
        v1[4..8].copy_from_slice(&[0; 4]);
        assert_eq!(decode(&v1).map(|r| r.drift_limit_ms), Ok(None));
        let mut l = good;
        l[1] = 40;
        assert!(decode(&l).unwrap_err().contains("layout"));
        let mut n = good;
        n[24..32].copy_from_slice(&1024u64.to_le_bytes());
        assert!(decode(&n).unwrap_err().contains("node id 1024"));
        let mut unset = good;
        unset[24..32].copy_from_slice(&UNSET_NODE_ID.to_le_bytes());
        assert_eq!(decode(&unset).map(|r| r.node_id), Ok(UNSET_NODE_ID));
        let mut e = good;
        e[8..16].copy_from_slice(&0i64.to_le_bytes());
        assert!(decode(&e).unwrap_err().contains("before its epoch"));
    }

    #[test]
    fn description_names_the_fields() {
        let text = describe(&record(1_735_689_601_000));
        assert_eq!(
            text,
            "lease_until_unix_ms 1735689601000 (+1000 ms after the epoch), node_id 9, epoch_unix_ms 1735689600000, layout 41/10/12"
        );
    }

    #[test]
    fn same_configuration_raises_the_floor_and_persists_newer_leases() {
        let local = record(0);
        let plan = plan_replay(
            &local,
            Some(&record(1_790_000_000_000)),
            None,
            &record(1_790_000_000_500),
        );
        assert_eq!(
            plan,
            ReplayPlan {
                raise_floor_ms: Some(1_790_000_000_500 - 1_735_689_600_000),
                remember_foreign: false,
                forget_foreign: false,
                persist: true,
            }
        );
        // Replayed again after a restart, with the file already holding it.
        let again = plan_replay(
            &local,
            Some(&record(1_790_000_000_500)),
            None,
            &record(1_790_000_000_500),
        );
        assert!(!again.persist);
        // The same lease again with a smaller drift limit (an allowance that
        // ended) or from a later timeline is kept: it is the newer word.
        let relimited = LeaseRecord {
            drift_limit_ms: Some(1_000),
            ..record(1_790_000_000_500)
        };
        assert!(plan_replay(&local, Some(&record(1_790_000_000_500)), None, &relimited).persist);
        assert!(
            again.raise_floor_ms.is_some(),
            "raising the floor is idempotent"
        );
        // An older record never overwrites a newer file.
        assert!(
            !plan_replay(
                &local,
                Some(&record(1_790_000_001_000)),
                None,
                &record(1_790_000_000_500)
            )
            .persist
        );
        assert!(plan_replay(&local, None, None, &record(1_790_000_000_500)).persist);
    }

    #[test]
    fn another_configuration_is_remembered_not_applied() {
        let local = LeaseRecord {
            node_id: 10,
            ..record(0)
        };
        let plan = plan_replay(&local, None, None, &record(1_790_000_000_500));
        assert_eq!(plan.raise_floor_ms, None);
        assert!(plan.remember_foreign && plan.persist);
        // Only a record that covers more replaces what is remembered.
        let seen = record(1_790_000_001_000);
        assert!(
            !plan_replay(&local, Some(&seen), Some(&seen), &record(1_790_000_000_500))
                .remember_foreign
        );
        assert!(
            plan_replay(&local, Some(&seen), Some(&seen), &record(1_790_000_002_000))
                .remember_foreign
        );
    }

    #[test]
    fn an_accepted_change_ends_the_hold_of_the_old_configuration() {
        // A standby whose settings already have the primary's new node id
        // (10), with the old lease (node 9) from its base backup remembered:
        // the primary's first lease under node 10 starts above node 9's
        // IDs, so replaying it ends the hold.
        let local = LeaseRecord {
            node_id: 10,
            ..record(0)
        };
        let old = record(1_790_000_000_000);
        let accepted = LeaseRecord {
            node_id: 10,
            ..record(1_790_000_000_700)
        };
        let plan = plan_replay(&local, Some(&old), Some(&old), &accepted);
        assert!(plan.forget_foreign && plan.raise_floor_ms.is_some() && plan.persist);
        // A record of this configuration below the remembered one does not.
        let below = LeaseRecord {
            node_id: 10,
            ..record(1_789_999_999_000)
        };
        assert!(!plan_replay(&local, Some(&old), Some(&old), &below).forget_foreign);
        // Redo of the accepted server's own WAL after a crash: the old
        // configuration's records come again before the acceptance's, but
        // the lease file already holds a lease of this configuration that
        // covers more, so they hold nothing.
        assert!(!plan_replay(&local, Some(&accepted), None, &old).remember_foreign);
        // A lease file of the old configuration does not supersede them.
        assert!(plan_replay(&local, Some(&old), None, &record(1_790_000_001_000)).remember_foreign);
    }

    #[test]
    fn an_accepted_layout_change_covers_more_than_the_old_layout() {
        // The primary accepted 41/8/14 after 41/10/12: its first lease under
        // the new layout starts above the old layout's largest ID, so it
        // supersedes the old record, and the old one replayed again after
        // a restart does not overwrite it.
        let old = record(1_790_000_000_000);
        let new_layout = IdLayout::new(8, 14).unwrap();
        let floor = old.floor_for(&new_layout).unwrap();
        let new = LeaseRecord {
            lease_until_unix_ms: old.epoch_unix_ms + floor.first_time_ms as i64 + 200,
            node_bits: 8,
            sequence_bits: 14,
            ..old
        };
        assert!(largest_id_covered(&new) > largest_id_covered(&old));
        assert!(plan_replay(&new, Some(&old), None, &new).persist);
        assert!(!plan_replay(&new, Some(&new), None, &old).persist);
    }

    proptest! {
        #[test]
        fn every_valid_record_round_trips(
            node_bits in 0u32..=14,
            sequence_bits in 1u32..=14,
            ahead in 0i64..(1 << 40),
            node in any::<u64>(),
            limit in any::<u32>(),
        ) {
            let layout = IdLayout::new(node_bits.into(), sequence_bits.into()).unwrap();
            let r = LeaseRecord {
                lease_until_unix_ms: 1_735_689_600_000 + ahead,
                epoch_unix_ms: 1_735_689_600_000,
                node_bits,
                sequence_bits,
                node_id: node % (layout.max_node() + 1),
                drift_limit_ms: Some(limit.into()),
                timeline: None,
            };
            prop_assert_eq!(decode(&encode(&r)), Ok(r));
        }

        #[test]
        fn a_later_lease_covers_more(a in 0i64..(1 << 40), b in 0i64..(1 << 40)) {
            let (ra, rb) = (record(1_735_689_600_000 + a), record(1_735_689_600_000 + b));
            prop_assert_eq!(a.cmp(&b), largest_id_covered(&ra).cmp(&largest_id_covered(&rb)));
        }
    }
}
