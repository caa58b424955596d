//! The lease file: a durable upper bound on the time of every issued ID.
//!
//! Shared memory is lost at a restart and the clock may have been set back
//! meanwhile, so the generator keeps `lease_until` in a small file in the data
//! directory and never issues an ID beyond it. At start it resumes after the
//! lease. The file also records the configuration it was written under; IDs
//! issued under another epoch, layout or node id could collide with new ones
//! or sort wrongly, so a change is detected and must be accepted on purpose.
//!
//! The format is text, one `key = value` per line, so an operator can read it
//! with `cat`; the last line is a checksum of the lines before it, so a torn
//! or edited file is reported as corrupt instead of being trusted. Version 2
//! adds the system identifier of the database system that wrote the file
//! (`pg_controldata`'s "Database system identifier"): a lease carried to
//! another system (a server converted by `pg_createsubscriber`, a file
//! copied by hand) is told apart from the server's own, see
//! [`crate::core::instance`]. Version 1 files, without it, are still read.
//!
//! Writing is crash-safe: write a temporary file, fsync it, rename it over
//! the old one, fsync the directory.

use super::layout::IdLayout;
use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use thiserror::Error;

/// The file's name in the data directory.
pub const LEASE_FILE_NAME: &str = "snowflake_id.lease";
const HEADER: &str = "# snowflake_id lease: no ID issued under this configuration has a time after lease_until_unix_ms";
const VERSION: u32 = 2;

/// The node id recorded while `snowflake_id.node_id` is unset (-1).
pub const UNSET_NODE_ID: u64 = u64::MAX;

/// What the lease file records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseRecord {
    /// No issued ID has a time after this (milliseconds since 1970, UTC).
    pub lease_until_unix_ms: i64,
    pub epoch_unix_ms: i64,
    pub node_bits: u32,
    pub sequence_bits: u32,
    pub node_id: u64,
    /// How far ahead of its writer's clock the IDs under this lease may
    /// run (ms): the drift limit in force when it was written, or the
    /// drift IDs already had then if that was larger. A successor (a
    /// promoted standby, an accepted copy) that may not have seen its
    /// predecessor's last leases starts this far ahead of its own clock at
    /// least. `None` in a lease written before it was recorded (a version 1
    /// WAL record, a lease file without the line): the successor's own
    /// limit stands in for it.
    pub drift_limit_ms: Option<u64>,
    /// The timeline the lease was written on (a primary's) or replayed
    /// from (a standby's): not in the WAL record, whose place in the WAL
    /// gives it. A successor that replayed a later timeline than its last
    /// lease's knows of takeovers whose first leases it never saw. `None`
    /// in a lease file without the line.
    pub timeline: Option<u32>,
}

impl LeaseRecord {
    /// The lease as milliseconds since its own epoch.
    pub fn lease_until_ms(&self) -> u64 {
        (self.lease_until_unix_ms - self.epoch_unix_ms).max(0) as u64
    }

    /// What differs between the configuration the lease was written under and
    /// `current`, in words (empty when they agree).
    pub fn differences(&self, current: &LeaseRecord) -> Vec<String> {
        let mut out = Vec::new();
        if self.epoch_unix_ms != current.epoch_unix_ms {
            out.push(format!(
                "snowflake_id.epoch changed from {} to {} (ms since 1970)",
                self.epoch_unix_ms, current.epoch_unix_ms
            ));
        }
        if self.node_bits != current.node_bits {
            out.push(format!(
                "snowflake_id.node_bits changed from {} to {}",
                self.node_bits, current.node_bits
            ));
        }
        if self.sequence_bits != current.sequence_bits {
            out.push(format!(
                "snowflake_id.sequence_bits changed from {} to {}",
                self.sequence_bits, current.sequence_bits
            ));
        }
        if self.node_id != current.node_id {
            out.push(format!(
                "snowflake_id.node_id changed from {} to {}",
                node_id_text(self.node_id),
                node_id_text(current.node_id)
            ));
        }
        out
    }

    /// The largest ID this lease covers: the largest its layout can form at
    /// `lease_until` (any node, last sequence), as a number, which is how
    /// IDs of any layout sort in a primary key.
    pub fn largest_id_covered(&self) -> Result<i64, String> {
        let layout = IdLayout::new(self.node_bits.into(), self.sequence_bits.into())
            .map_err(|e| format!("the recorded layout is not valid: {e}"))?;
        layout
            .largest_id_until(
                self.lease_until_ms().min(layout.max_time_ms()),
                layout.max_node(),
            )
            .map_err(|e| e.to_string())
    }

    /// Where a new configuration must start so that its IDs sort after every
    /// ID this lease covers: above the largest ID the old layout can form at
    /// `lease_until` (any node, last sequence), compared as numbers, which is
    /// how the IDs sort in a primary key whatever their layout.
    pub fn floor_for(&self, new_layout: &IdLayout) -> Result<Floor, String> {
        let old_max_id = self.largest_id_covered()?;
        let first_time_ms = ((old_max_id as u64) >> new_layout.time_shift()) + 1;
        if first_time_ms > new_layout.max_time_ms() {
            return Err(format!(
                "IDs of the new layout cannot be greater than {old_max_id}: its {}-bit time field ends first",
                new_layout.time_bits()
            ));
        }
        Ok(Floor {
            old_max_id,
            first_time_ms,
        })
    }

    fn body(&self, system_identifier: u64) -> String {
        let mut body = format!(
            "{HEADER}\nversion = {VERSION}\nlease_until_unix_ms = {}\nepoch_unix_ms = {}\nnode_bits = {}\nsequence_bits = {}\nnode_id = {}\nsystem_identifier = {system_identifier}\n",
            self.lease_until_unix_ms, self.epoch_unix_ms, self.node_bits, self.sequence_bits, self.node_id
        );
        // An optional line of version 2: a reader that does not know it
        // (0.3.0 before it was added) ignores it, so a downgrade still reads
        // the file.
        if let Some(limit) = self.drift_limit_ms {
            body.push_str(&format!("drift_limit_ms = {limit}\n"));
        }
        if let Some(timeline) = self.timeline {
            body.push_str(&format!("timeline = {timeline}\n"));
        }
        body
    }

    /// The file's content, as written by the database system
    /// `system_identifier`.
    pub fn to_text(&self, system_identifier: u64) -> String {
        let body = self.body(system_identifier);
        format!("{body}checksum = {:016x}\n", fnv1a64(body.as_bytes()))
    }
}

/// A lease file's content: the lease, and the database system that wrote it
/// (`None` in a version 1 file).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoredLease {
    pub record: LeaseRecord,
    pub system_identifier: Option<u64>,
}

impl StoredLease {
    /// Parses the file's content; any deviation is corruption.
    pub fn from_text(text: &str) -> Result<StoredLease, String> {
        let Some(idx) = text.rfind("checksum = ") else {
            return Err("the checksum line is missing".into());
        };
        let (body, sum_line) = text.split_at(idx);
        let sum = sum_line
            .trim_end_matches('\n')
            .trim_start_matches("checksum = ");
        let expected = format!("{:016x}", fnv1a64(body.as_bytes()));
        if sum != expected || !sum_line.ends_with('\n') || sum_line.lines().count() != 1 {
            return Err("the checksum does not match the content".into());
        }
        let mut fields = std::collections::HashMap::new();
        for line in body.lines().filter(|l| !l.starts_with('#')) {
            let (k, v) = line
                .split_once(" = ")
                .ok_or_else(|| format!("malformed line {line:?}"))?;
            fields.insert(k, v);
        }
        let get = |k: &str| -> Result<i64, String> {
            fields
                .get(k)
                .ok_or_else(|| format!("the field {k} is missing"))?
                .parse::<i64>()
                .map_err(|_| format!("the field {k} is not a number"))
        };
        let version = get("version")?;
        if version != 1 && version != VERSION as i64 {
            return Err(format!("unknown version {version}"));
        }
        let small = |k: &str| -> Result<u32, String> {
            u32::try_from(get(k)?).map_err(|_| format!("the field {k} is out of range"))
        };
        let record = LeaseRecord {
            lease_until_unix_ms: get("lease_until_unix_ms")?,
            epoch_unix_ms: get("epoch_unix_ms")?,
            node_bits: small("node_bits")?,
            sequence_bits: small("sequence_bits")?,
            // Unsigned: an unset node id (a server that takes its node id
            // from a registry) is recorded as u64::MAX.
            node_id: fields
                .get("node_id")
                .ok_or("the field node_id is missing")?
                .parse::<u64>()
                .map_err(|_| "the field node_id is not a number")?,
            drift_limit_ms: match fields.get("drift_limit_ms") {
                None => None,
                Some(v) => Some(
                    v.parse::<u64>()
                        .map_err(|_| "the field drift_limit_ms is not a number")?,
                ),
            },
            timeline: match fields.get("timeline") {
                None => None,
                Some(v) => Some(
                    v.parse::<u32>()
                        .map_err(|_| "the field timeline is not a number")?,
                ),
            },
        };
        // The identifier is unsigned 64-bit, beyond i64: parsed on its own.
        let system_identifier = match version {
            1 => None,
            _ => Some(
                fields
                    .get("system_identifier")
                    .ok_or("the field system_identifier is missing")?
                    .parse::<u64>()
                    .map_err(|_| "the field system_identifier is not a number")?,
            ),
        };
        Ok(StoredLease {
            record,
            system_identifier,
        })
    }

    /// The lease a file that failed its checks seems to hold, if its
    /// `lease_until_unix_ms` line can still be read: for messages only,
    /// never to issue IDs from.
    pub fn lease_of_damaged(text: &str) -> Option<i64> {
        text.lines()
            .find_map(|l| l.strip_prefix("lease_until_unix_ms = "))
            .and_then(|v| v.trim().parse::<i64>().ok())
    }
}

/// The first millisecond (since the epoch) a successor may issue in, when
/// it takes over a node id at `now_ms` on its own clock from a predecessor
/// whose last leases it may not have seen (a standby promoted under
/// asynchronous replication, the end of a point-in-time recovery, an
/// accepted copy): the predecessor issued nothing after the takeover, and
/// nothing further ahead of its clock than the drift limit it recorded
/// (`predecessor_limit_ms`; when it recorded none, or a smaller one than
/// the successor's own, the successor's own limit stands in), and its clock
/// was at most `clock_offset_ms` ahead of the successor's. So every ID it
/// can have issued lies before
/// `now + max(predecessor's limit, own limit) + clock offset + 1`.
///
/// `unseen_takeovers`: takeovers after the predecessor's last lease this
/// successor has (timelines it replayed past that lease's). Each of those
/// successors started its floor this far ahead of its clock, an offset
/// further by this one's, and could borrow the drift limit beyond it, in a
/// first lease this one never received: each adds `clock offset + limit`.
pub fn successor_floor_ms(
    now_ms: i64,
    predecessor_limit_ms: Option<u64>,
    own_limit_ms: u64,
    clock_offset_ms: u64,
    unseen_takeovers: u32,
) -> u64 {
    let hop = clock_offset_ms.saturating_add(own_limit_ms);
    (now_ms.max(0) as u64)
        .saturating_add(predecessor_limit_ms.unwrap_or(0).max(own_limit_ms))
        .saturating_add(hop.saturating_mul(unseen_takeovers.into()))
        .saturating_add(clock_offset_ms)
        .saturating_add(1)
}

/// Where the generator starts after a configuration change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Floor {
    /// The largest ID the old configuration can have issued.
    pub old_max_id: i64,
    /// The first millisecond (of the new configuration) whose IDs are all
    /// greater than `old_max_id`.
    pub first_time_ms: u64,
}

/// A lease file that exists but cannot be used.
#[derive(Debug, Error)]
pub enum LeaseFileError {
    #[error("could not read lease file \"{path}\": {source}")]
    Unreadable { path: PathBuf, source: io::Error },
    #[error("lease file \"{path}\" is corrupt: {reason}")]
    Corrupt {
        path: PathBuf,
        reason: String,
        /// The lease the damaged file seems to hold (ms since 1970), if
        /// its line can be read: for messages only.
        seeming_lease_unix_ms: Option<i64>,
    },
    #[error("could not write lease file \"{path}\": {source}")]
    Unwritable { path: PathBuf, source: io::Error },
}

/// Reads the lease in `dir`. `Ok(None)`: no file, which is normal on a
/// cluster that never issued an ID.
pub fn read_lease(dir: &Path) -> Result<Option<StoredLease>, LeaseFileError> {
    let path = dir.join(LEASE_FILE_NAME);
    match fs::read(&path) {
        Ok(bytes) => {
            let text = String::from_utf8(bytes).map_err(|_| LeaseFileError::Corrupt {
                path: path.clone(),
                reason: "it is not text".into(),
                seeming_lease_unix_ms: None,
            })?;
            StoredLease::from_text(&text)
                .map(Some)
                .map_err(|reason| LeaseFileError::Corrupt {
                    path,
                    reason,
                    seeming_lease_unix_ms: StoredLease::lease_of_damaged(&text),
                })
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(LeaseFileError::Unreadable { path, source }),
    }
}

/// Writes the lease in `dir` durably, as written by the database system
/// `system_identifier`: temporary file, fsync, rename, fsync of the
/// directory. When this returns `Ok`, the new lease survives a crash.
pub fn write_lease(
    dir: &Path,
    record: &LeaseRecord,
    system_identifier: u64,
) -> Result<(), LeaseFileError> {
    let path = dir.join(LEASE_FILE_NAME);
    let tmp = dir.join(format!("{LEASE_FILE_NAME}.tmp"));
    let wrap = |source| LeaseFileError::Unwritable {
        path: path.clone(),
        source,
    };
    let mut f = File::create(&tmp).map_err(wrap)?;
    f.write_all(record.to_text(system_identifier).as_bytes())
        .map_err(wrap)?;
    f.sync_all().map_err(wrap)?;
    drop(f);
    fs::rename(&tmp, &path).map_err(wrap)?;
    File::open(dir).and_then(|d| d.sync_all()).map_err(wrap)?;
    Ok(())
}

/// How a node id reads in messages: `u64::MAX` stands for an unset one.
fn node_id_text(node_id: u64) -> String {
    if node_id == UNSET_NODE_ID {
        "unset".into()
    } else {
        node_id.to_string()
    }
}

/// 64-bit FNV-1a: enough to notice a torn or hand-edited file.
fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> LeaseRecord {
        LeaseRecord {
            lease_until_unix_ms: 1_767_225_600_123,
            epoch_unix_ms: 1_735_689_600_000,
            node_bits: 10,
            sequence_bits: 12,
            node_id: 7,
            drift_limit_ms: None,
            timeline: None,
        }
    }

    fn tempdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("snowflake_lease_{name}_{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    const SYSID: u64 = 7_441_234_567_890_123_456;

    fn stored() -> StoredLease {
        StoredLease {
            record: record(),
            system_identifier: Some(SYSID),
        }
    }

    #[test]
    fn text_round_trip() {
        let r = record();
        let text = r.to_text(SYSID);
        assert!(text.contains("lease_until_unix_ms = 1767225600123\n"));
        assert!(text.contains("version = 2\n"));
        // Above i64::MAX, as real identifiers often are.
        assert!(text.contains("system_identifier = 7441234567890123456\n"));
        assert_eq!(StoredLease::from_text(&text), Ok(stored()));
        let big = r.to_text(u64::MAX);
        assert_eq!(
            StoredLease::from_text(&big).unwrap().system_identifier,
            Some(u64::MAX)
        );
        assert_eq!(r.lease_until_ms(), 1_767_225_600_123 - 1_735_689_600_000);
        // An unset node id (registry mode) reads back as written.
        let unset = LeaseRecord {
            node_id: UNSET_NODE_ID,
            ..r
        };
        assert_eq!(
            StoredLease::from_text(&unset.to_text(SYSID)).map(|s| s.record),
            Ok(unset)
        );
    }

    /// A file written by a release before the system identifier (version
    /// 1, exactly as it wrote it) is still read, without an identifier.
    #[test]
    fn version_1_files_are_read() {
        let body = format!(
            "{HEADER}\nversion = 1\nlease_until_unix_ms = 1767225600123\nepoch_unix_ms = 1735689600000\nnode_bits = 10\nsequence_bits = 12\nnode_id = 7\n"
        );
        let text = format!("{body}checksum = {:016x}\n", fnv1a64(body.as_bytes()));
        assert_eq!(
            StoredLease::from_text(&text),
            Ok(StoredLease {
                record: record(),
                system_identifier: None
            })
        );
        // Version 2 requires the identifier.
        let v2 = body.replace("version = 1", "version = 2");
        let text = format!("{v2}checksum = {:016x}\n", fnv1a64(v2.as_bytes()));
        assert!(StoredLease::from_text(&text)
            .unwrap_err()
            .contains("system_identifier"));
    }

    #[test]
    fn corruption_is_detected() {
        let text = record().to_text(SYSID);
        let edited = text.replace("node_id = 7", "node_id = 8");
        assert!(StoredLease::from_text(&edited)
            .unwrap_err()
            .contains("checksum"));
        let torn = &text[..text.len() / 2];
        assert!(StoredLease::from_text(torn).is_err());
        assert!(StoredLease::from_text("").is_err());
        let truncated = &text[..text.len() - 3];
        assert!(StoredLease::from_text(truncated).is_err());
        // The damaged file's lease is still shown in messages.
        assert_eq!(
            StoredLease::lease_of_damaged(&edited),
            Some(1_767_225_600_123)
        );
        assert_eq!(StoredLease::lease_of_damaged("garbage"), None);
    }

    #[test]
    fn differences_name_each_setting() {
        let a = record();
        assert!(a.differences(&a).is_empty());
        let b = LeaseRecord {
            node_bits: 9,
            epoch_unix_ms: 0,
            ..a
        };
        let d = b.differences(&a).join("; ");
        assert!(
            d.contains("snowflake_id.node_bits changed from 9 to 10"),
            "{d}"
        );
        assert!(d.contains("snowflake_id.epoch changed"), "{d}");
        let unset = LeaseRecord {
            node_id: UNSET_NODE_ID,
            ..a
        };
        assert_eq!(
            a.differences(&unset),
            vec!["snowflake_id.node_id changed from 7 to unset".to_string()]
        );
    }

    #[test]
    fn floor_orders_new_ids_after_old_ones() {
        let old = record();
        let old_layout = IdLayout::default();
        let old_lease = old.lease_until_ms();
        let old_max = old_layout.largest_id_until(old_lease, 1023).unwrap();
        // Moving two bits from node to sequence keeps the time shift: the new
        // IDs start one millisecond after the lease.
        let same_shift = IdLayout::new(8, 14).unwrap();
        let f = old.floor_for(&same_shift).unwrap();
        assert_eq!(f.old_max_id, old_max);
        assert_eq!(f.first_time_ms, old_lease + 1);
        assert!(same_shift.smallest_id_at(f.first_time_ms).unwrap() > old_max);
        assert!(same_shift.smallest_id_at(f.first_time_ms - 1).unwrap() <= old_max);
        // Fewer node bits shift the time less: the floor lies 4x further.
        let narrower = IdLayout::new(8, 12).unwrap();
        let f = old.floor_for(&narrower).unwrap();
        assert!(narrower.smallest_id_at(f.first_time_ms).unwrap() > old_max);
        assert!(f.first_time_ms > 3 * old_lease);
        // A lease counts its time from its own epoch.
        let later_epoch = LeaseRecord {
            epoch_unix_ms: old.epoch_unix_ms + 1000,
            ..old
        };
        assert_eq!(
            later_epoch.floor_for(&old_layout).unwrap().first_time_ms,
            old_lease - 1000 + 1
        );
        // A layout whose time field ends before the floor cannot be ordered.
        let wide = LeaseRecord {
            node_bits: 0,
            sequence_bits: 1,
            lease_until_unix_ms: old.epoch_unix_ms + (1 << 62) - 2,
            ..old
        };
        assert!(wide.floor_for(&IdLayout::new(16, 12).unwrap()).is_err());
    }

    #[test]
    fn a_successor_starts_above_every_id_its_predecessor_can_have_issued() {
        // The predecessor's IDs: at most its limit ahead of its clock, which
        // read at most `offset` more than the successor's at the takeover
        // (and it issued nothing after).
        for (pred, own, offset) in [
            (Some(60_000), 5_000, 1_000),
            (Some(5_000), 60_000, 0),
            (None, 5_000, 250),
        ] {
            let now = 1_000_000;
            let floor = successor_floor_ms(now, pred, own, offset, 0);
            let latest_predecessor_id_ms = now + offset as i64 + pred.unwrap_or(own) as i64;
            assert!(
                floor as i64 > latest_predecessor_id_ms,
                "{pred:?} {own} {offset}"
            );
            assert_eq!(
                floor as i64,
                now + pred.unwrap_or(0).max(own) as i64 + offset as i64 + 1
            );
        }
        // A takeover this successor never saw a lease of: that successor
        // started at its own floor (the same rule, by a clock up to an
        // offset ahead), the millisecond before it its last, and borrowed
        // the limit beyond that.
        let (now, pred, own, offset) = (1_000_000, Some(5_000), 5_000, 1_000);
        let unseen_reach = successor_floor_ms(now + offset as i64, pred, own, offset, 0) - 1 + own;
        assert!(successor_floor_ms(now, pred, own, offset, 1) > unseen_reach);
        let unseen_reach = successor_floor_ms(now + offset as i64, pred, own, offset, 1) - 1 + own;
        assert!(successor_floor_ms(now, pred, own, offset, 2) > unseen_reach);
        // A clock before the epoch counts from the epoch; nothing overflows.
        assert_eq!(successor_floor_ms(-5, None, 10, 0, 0), 11);
        assert_eq!(
            successor_floor_ms(i64::MAX, Some(u64::MAX), 0, 1, 7),
            u64::MAX
        );
    }

    #[test]
    fn file_round_trip_missing_and_corrupt() {
        let dir = tempdir("rt");
        assert!(read_lease(&dir).unwrap().is_none());
        write_lease(&dir, &record(), SYSID).unwrap();
        assert_eq!(read_lease(&dir).unwrap(), Some(stored()));
        assert!(!dir.join(format!("{LEASE_FILE_NAME}.tmp")).exists());
        let newer = LeaseRecord {
            lease_until_unix_ms: record().lease_until_unix_ms + 200,
            ..record()
        };
        write_lease(&dir, &newer, SYSID).unwrap();
        assert_eq!(read_lease(&dir).unwrap().map(|s| s.record), Some(newer));
        // The drift limit in force, an optional line, round-trips too.
        let limited = LeaseRecord {
            drift_limit_ms: Some(60_000),
            timeline: Some(3),
            ..newer
        };
        write_lease(&dir, &limited, SYSID).unwrap();
        let text = fs::read_to_string(dir.join(LEASE_FILE_NAME)).unwrap();
        assert!(
            text.contains("\ndrift_limit_ms = 60000\ntimeline = 3\n"),
            "{text}"
        );
        assert_eq!(read_lease(&dir).unwrap().map(|s| s.record), Some(limited));
        fs::write(dir.join(LEASE_FILE_NAME), b"garbage\n").unwrap();
        let e = read_lease(&dir).unwrap_err().to_string();
        assert!(e.contains(LEASE_FILE_NAME) && e.contains("corrupt"), "{e}");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn unwritable_directory_is_an_error() {
        let dir = tempdir("gone");
        fs::remove_dir_all(&dir).unwrap();
        let e = write_lease(&dir, &record(), SYSID).unwrap_err().to_string();
        assert!(e.contains("could not write lease file"), "{e}");
    }
}
