//! Is this server the one that wrote its lease, or a copy of it?
//!
//! The lease makes one server's IDs unique. A copy of its data directory
//! carries the same node id and the same lease, and once it takes writes it
//! issues the same IDs as the original, in the same milliseconds. Copies are
//! made every day, mostly on purpose: a standby (which is fine: it issues
//! nothing until promoted, and then the original is gone), a base backup
//! started as a second primary, a point-in-time restore used as a reporting
//! copy while the original runs, a standby converted into a logical
//! subscriber by `pg_createsubscriber`. So at start the server looks at what
//! the tools leave behind, before anything is issued:
//!
//! - `recovery.signal` or `backup_label` without `standby.signal`: the data
//!   directory is a restored backup or snapshot about to become a primary
//!   (a point-in-time restore; a base backup started as is; a `pg_rewind`
//!   target without its signal file). It may replace an original that is
//!   gone, or run beside it: only the operator knows, so generation is held
//!   until `snowflake_accept_configuration()`, which starts new IDs
//!   `max_clock_drift` ahead of the clock (the original may have issued IDs
//!   after the copy was taken, never further ahead than that).
//!   PostgreSQL renames `backup_label` once recovery starts, so the hold is
//!   kept in a file of its own ([`HOLD_FILE_NAME`]) until it is accepted.
//! - A lease written by another database system (the system identifier in
//!   the file differs from `pg_control`'s): `pg_createsubscriber` gives the
//!   converted standby a new identifier; a lease file copied from another
//!   server has one too. Held likewise.
//! - `pg_upgrade` builds a new data directory with a new identifier and
//!   does not carry the lease file. While it runs (binary-upgrade mode, in
//!   the new cluster only) the server notes, in [`UPGRADED_FILE_NAME`],
//!   that the lease is still to come; the first normal start decides once:
//!   a lease copied from the old directory is adopted, a missing one holds
//!   generation (without it, neither the IDs the old cluster issued nor the
//!   configuration it issued them under are known).
//!
//! - A data directory first started by another database system: the
//!   system identifier is recorded in [`IDENTITY_FILE_NAME`] at the first
//!   start, before any ID is issued, so that a `pg_createsubscriber`
//!   conversion of a server that never issued an ID (no lease file yet, or
//!   one of the first format, without the identifier) is held too.
//!
//! A standby (with `standby.signal`) of a server that is not held is never
//! held: the lease records in the WAL keep it, once promoted, after every ID
//! its primary issued. A standby of a held server is a copy of a copy: the
//! hold file it copied keeps it held, also after promotion, until accepted.
//! A held server writes its lease with [`HELD_SYSTEM_IDENTIFIER`] in place
//! of its own, so that the hold travels with the lease file wherever it is
//! copied (`pg_upgrade`'s documented step copies only that file). A cold
//! copy of a stopped data directory (`cp -a`, a disk snapshot) leaves no
//! trace and cannot be told apart: it needs its own node id before it
//! starts (README, "Operations").
//!
//! [`verdict`] is pure: the caller gathers the facts from the data
//! directory and `pg_control` and carries the verdict out.

/// The file that keeps a detected copy held across restarts until it is
/// accepted. Its content is the reason, for the error message.
pub const HOLD_FILE_NAME: &str = "snowflake_id.hold";
/// The file written while `pg_upgrade` runs the server in binary-upgrade
/// mode and the lease is not (yet) this system's.
pub const UPGRADED_FILE_NAME: &str = "snowflake_id.upgraded";
/// The file that records the system identifier of the database system that
/// first started in this data directory (written at the first start, and
/// again when a copy is accepted).
pub const IDENTITY_FILE_NAME: &str = "snowflake_id.system";
/// The file that says this server is a successor whose floor is not yet
/// durable: written at a start in archive recovery (a standby, a
/// point-in-time restore), removed once a lease at or above the
/// successor's floor is written. A crash between the promotion and that
/// lease would otherwise restart as a primary from the predecessor's
/// replayed lease alone, without the floor.
pub const SUCCESSOR_FILE_NAME: &str = "snowflake_id.successor";
/// What a held server writes in its lease file in place of its system
/// identifier (PostgreSQL's are never 0): a server that finds it is held
/// too, for the lease file was copied from a held server.
pub const HELD_SYSTEM_IDENTIFIER: u64 = 0;

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::Path;

/// Reads a marker file: `None` when it does not exist.
pub fn read_marker(dir: &Path, name: &str) -> io::Result<Option<String>> {
    match fs::read(dir.join(name)) {
        Ok(bytes) => Ok(Some(String::from_utf8_lossy(&bytes).trim_end().to_string())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Writes a marker file durably (file and directory fsynced).
pub fn write_marker(dir: &Path, name: &str, text: &str) -> io::Result<()> {
    let mut f = File::create(dir.join(name))?;
    f.write_all(text.as_bytes())?;
    f.write_all(b"\n")?;
    f.sync_all()?;
    File::open(dir)?.sync_all()
}

/// Removes a marker file durably; one that does not exist is fine.
pub fn remove_marker(dir: &Path, name: &str) -> io::Result<()> {
    match fs::remove_file(dir.join(name)) {
        Ok(()) => File::open(dir)?.sync_all(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// What the server finds at start.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StartFacts {
    /// `pg_control`'s system identifier.
    pub system_identifier: u64,
    /// Whether a usable lease file exists, and the system identifier in it
    /// (`None` in a version 1 file).
    pub lease: Option<Option<u64>>,
    /// `backup_label` exists in the data directory.
    pub backup_label: bool,
    /// `standby.signal` exists.
    pub standby_signal: bool,
    /// `recovery.signal` exists.
    pub recovery_signal: bool,
    /// The content of [`HOLD_FILE_NAME`], if it exists.
    pub hold: Option<String>,
    /// Whether [`IDENTITY_FILE_NAME`] exists, and the system identifier in
    /// it (`None` when it cannot be read as one).
    pub identity: Option<Option<u64>>,
    /// [`UPGRADED_FILE_NAME`] exists.
    pub upgraded: bool,
    /// The server runs as the new cluster of `pg_upgrade` (binary-upgrade
    /// mode; pg_upgrade starts the old cluster so too, which is not this).
    pub binary_upgrade: bool,
}

/// What to do about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// This server wrote the lease (or has none and was never upgraded),
    /// or it is a standby.
    Own,
    /// `pg_upgrade` is running: write [`UPGRADED_FILE_NAME`], issue
    /// nothing (nobody asks during an upgrade).
    MarkUpgraded,
    /// The first start after `pg_upgrade`, with the lease copied from the
    /// old cluster as documented: rewrite it as this system's and remove
    /// [`UPGRADED_FILE_NAME`].
    AdoptUpgraded,
    /// A copy of another server: hold generation until accepted, and keep
    /// the reason in [`HOLD_FILE_NAME`] (`persist`) unless it is there.
    Copy { reason: String, persist: bool },
    /// Upgraded without the lease file: hold generation until the file is
    /// copied or the operator accepts.
    LeaseMissingAfterUpgrade,
}

/// Decides whether this server may issue IDs from its lease.
pub fn verdict(f: &StartFacts) -> Verdict {
    let foreign_lease = matches!(f.lease, Some(Some(id)) if id != f.system_identifier);
    if f.binary_upgrade {
        return if f.lease.is_none() || foreign_lease {
            Verdict::MarkUpgraded
        } else {
            Verdict::Own
        };
    }
    // A standby replays its primary's WAL: the lease records in it keep it,
    // promoted, above every ID the primary issued. Traces copied along with
    // the primary's data directory (a hold, an upgrade note) are its
    // primary's business, not its own: the caller removes them.
    // A hold file copied from a held primary makes it a copy of a copy:
    // held too (the caller keeps the file).
    if f.standby_signal {
        return match &f.hold {
            Some(reason) => Verdict::Copy {
                reason: format!(
                    "{reason} (kept on this standby: held after promotion until accepted)"
                ),
                persist: false,
            },
            None => Verdict::Own,
        };
    }
    if let Some(reason) = &f.hold {
        return Verdict::Copy {
            reason: reason.clone(),
            persist: false,
        };
    }
    if f.recovery_signal {
        // Archive recovery that ends in promotion: a restored backup (with
        // backup_label) or a restored snapshot (without). An original
        // primary never starts with recovery.signal.
        return Verdict::Copy {
            reason: "this server was restored from a backup or a snapshot (recovery.signal without standby.signal) and becomes a primary at the end of recovery: if the server it was copied from still runs, both issue the same IDs".into(),
            persist: true,
        };
    }
    if f.backup_label {
        return Verdict::Copy {
            reason: "this server was started from a backup (backup_label) without standby.signal, so it becomes a second primary: if the server it was copied from still runs, both issue the same IDs".into(),
            persist: true,
        };
    }
    let held_lease = f.lease == Some(Some(HELD_SYSTEM_IDENTIFIER));
    if f.upgraded {
        // The first start after pg_upgrade decides once: a lease copied
        // from the old cluster (of its system, or of a version 1 file) is
        // adopted as this system's, unless the old cluster was held; none
        // holds until copied or accepted.
        if held_lease {
            return Verdict::Copy {
                reason: "this cluster was made by pg_upgrade from a server held as a possible copy of another (its lease file, copied here, was written while it was held, before it was accepted): if the server that one was copied from still runs, both issue the same IDs".into(),
                persist: true,
            };
        }
        return if f.lease.is_some() {
            Verdict::AdoptUpgraded
        } else {
            Verdict::LeaseMissingAfterUpgrade
        };
    }
    if held_lease {
        return Verdict::Copy {
            reason: "the lease file was written by a server held as a possible copy of another, before it was accepted (this data directory, or the lease file, was copied from it)".into(),
            persist: true,
        };
    }
    if foreign_lease {
        let written_by = f.lease.flatten().unwrap_or_default();
        return Verdict::Copy {
            reason: format!(
                "the lease file was written by another database system (system identifier {written_by}, this server's is {}): this server is a copy converted into a new system (pg_createsubscriber), or the file was copied from another server",
                f.system_identifier
            ),
            persist: true,
        };
    }
    // The sign that does not need an issued ID: the system that first
    // started in this directory.
    match f.identity {
        Some(Some(first)) if first != f.system_identifier => Verdict::Copy {
            reason: format!(
                "this data directory was first started by another database system (system identifier {first} in {IDENTITY_FILE_NAME}, this server's is {}): this server is a copy converted into a new system (pg_createsubscriber), or the file was copied from another server",
                f.system_identifier
            ),
            persist: true,
        },
        Some(None) => Verdict::Copy {
            reason: format!("\"{IDENTITY_FILE_NAME}\" cannot be read as a system identifier, so this server cannot tell whether it is a copy of another"),
            persist: true,
        },
        _ => Verdict::Own,
    }
}

/// Whether to (re)write [`IDENTITY_FILE_NAME`] with this system's
/// identifier after `verdict`: when there is none yet (a first start), and
/// when `pg_upgrade`'s new cluster adopts its lease; never in binary-upgrade
/// mode, and never over a differing one that holds a copy (acceptance
/// rewrites it).
pub fn records_identity(f: &StartFacts, verdict: &Verdict) -> bool {
    match verdict {
        Verdict::MarkUpgraded => false,
        Verdict::AdoptUpgraded => true,
        _ => f.identity.is_none(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ME: u64 = 7_441_000_000_000_000_001;
    const OTHER: u64 = 7_300_000_000_000_000_002;

    fn own() -> StartFacts {
        StartFacts {
            system_identifier: ME,
            lease: Some(Some(ME)),
            ..StartFacts::default()
        }
    }

    fn is_copy(v: &Verdict) -> bool {
        matches!(v, Verdict::Copy { .. })
    }

    #[test]
    fn markers_round_trip() {
        let dir = std::env::temp_dir().join(format!("snowflake_marker_{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        assert_eq!(read_marker(&dir, HOLD_FILE_NAME).unwrap(), None);
        write_marker(&dir, HOLD_FILE_NAME, "a reason").unwrap();
        assert_eq!(
            read_marker(&dir, HOLD_FILE_NAME).unwrap().as_deref(),
            Some("a reason")
        );
        remove_marker(&dir, HOLD_FILE_NAME).unwrap();
        remove_marker(&dir, HOLD_FILE_NAME).unwrap();
        assert_eq!(read_marker(&dir, HOLD_FILE_NAME).unwrap(), None);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_ordinary_restart_is_the_server_itself() {
        assert_eq!(verdict(&own()), Verdict::Own);
        // A version 1 lease has no identifier: trusted, as before.
        let v1 = StartFacts {
            lease: Some(None),
            ..own()
        };
        assert_eq!(verdict(&v1), Verdict::Own);
        // A new server, never upgraded, has no lease yet.
        let new = StartFacts {
            lease: None,
            ..own()
        };
        assert_eq!(verdict(&new), Verdict::Own);
    }

    #[test]
    fn a_standby_from_a_backup_is_not_a_copy() {
        for recovery_signal in [false, true] {
            let standby = StartFacts {
                backup_label: true,
                standby_signal: true,
                recovery_signal,
                ..own()
            };
            assert_eq!(verdict(&standby), Verdict::Own);
        }
    }

    #[test]
    fn a_backup_started_as_a_primary_is_a_copy() {
        let clone = StartFacts {
            backup_label: true,
            ..own()
        };
        let v = verdict(&clone);
        assert!(
            matches!(&v, Verdict::Copy { reason, persist: true } if reason.contains("without standby.signal")),
            "{v:?}"
        );
        for backup_label in [true, false] {
            // A restored backup, or a restored snapshot without a label.
            let pitr = StartFacts {
                backup_label,
                recovery_signal: true,
                ..own()
            };
            let v = verdict(&pitr);
            assert!(
                matches!(&v, Verdict::Copy { reason, persist: true } if reason.contains("recovery.signal")),
                "{v:?}"
            );
        }
    }

    /// A standby is never held: what its primary's directory carried (a
    /// hold, an upgrade note, a lease of another system) is the primary's.
    #[test]
    fn a_standby_ignores_its_primarys_traces_but_a_hold() {
        let standby = StartFacts {
            standby_signal: true,
            backup_label: true,
            upgraded: true,
            lease: Some(Some(OTHER)),
            identity: Some(Some(OTHER)),
            ..own()
        };
        assert_eq!(verdict(&standby), Verdict::Own);
        let no_lease = StartFacts {
            lease: None,
            ..standby.clone()
        };
        assert_eq!(verdict(&no_lease), Verdict::Own);
        // A standby of a held server is a copy of a copy: held, and its
        // hold file is kept as it is.
        let of_a_copy = StartFacts {
            hold: Some("the primary's reason".into()),
            ..standby
        };
        match verdict(&of_a_copy) {
            Verdict::Copy { reason, persist } => {
                assert!(reason.starts_with("the primary's reason"), "{reason}");
                assert!(reason.contains("kept on this standby"), "{reason}");
                assert!(!persist);
            }
            v => panic!("a standby of a held server: {v:?}"),
        }
    }

    #[test]
    fn a_directory_first_started_by_another_system_is_a_copy() {
        // pg_createsubscriber's conversion of a server that never issued an
        // ID: no lease, only the identity its first start recorded.
        for lease in [None, Some(None), Some(Some(ME))] {
            let converted = StartFacts {
                lease,
                identity: Some(Some(OTHER)),
                ..own()
            };
            match verdict(&converted) {
                Verdict::Copy { reason, persist } => {
                    assert!(
                        reason.contains(&format!(
                            "system identifier {OTHER} in {IDENTITY_FILE_NAME}"
                        )),
                        "{reason}"
                    );
                    assert!(reason.contains("pg_createsubscriber"), "{reason}");
                    assert!(persist);
                }
                v => panic!("lease {lease:?}: {v:?}"),
            }
        }
        // Its own identity, or none yet (a first start, or a directory of a
        // release before the file): the server itself.
        for identity in [Some(Some(ME)), None] {
            let f = StartFacts {
                identity,
                lease: None,
                ..own()
            };
            assert_eq!(verdict(&f), Verdict::Own);
        }
        // An unreadable file: held, never trusted.
        let unreadable = StartFacts {
            identity: Some(None),
            ..own()
        };
        assert!(is_copy(&verdict(&unreadable)));
    }

    #[test]
    fn a_held_servers_lease_carries_the_hold() {
        let held_lease = StartFacts {
            lease: Some(Some(HELD_SYSTEM_IDENTIFIER)),
            ..own()
        };
        match verdict(&held_lease) {
            Verdict::Copy { reason, persist } => {
                assert!(reason.contains("written by a server held"), "{reason}");
                assert!(persist);
            }
            v => panic!("{v:?}"),
        }
        // Through pg_upgrade (the lease copied as documented): held, not
        // adopted.
        let upgraded = StartFacts {
            upgraded: true,
            ..held_lease
        };
        match verdict(&upgraded) {
            Verdict::Copy { reason, persist } => {
                assert!(
                    reason.contains("made by pg_upgrade from a server held"),
                    "{reason}"
                );
                assert!(persist);
            }
            v => panic!("{v:?}"),
        }
    }

    #[test]
    fn the_identity_is_recorded_once_and_when_an_upgrade_adopts() {
        let first_start = StartFacts {
            lease: None,
            ..own()
        };
        assert!(records_identity(&first_start, &verdict(&first_start)));
        let later = StartFacts {
            identity: Some(Some(ME)),
            ..own()
        };
        assert!(!records_identity(&later, &verdict(&later)));
        let converted = StartFacts {
            identity: Some(Some(OTHER)),
            ..own()
        };
        assert!(!records_identity(&converted, &verdict(&converted)));
        let adopting = StartFacts {
            identity: Some(Some(OTHER)),
            upgraded: true,
            ..own()
        };
        assert_eq!(verdict(&adopting), Verdict::AdoptUpgraded);
        assert!(records_identity(&adopting, &verdict(&adopting)));
        let upgrading = StartFacts {
            lease: None,
            binary_upgrade: true,
            ..own()
        };
        assert!(!records_identity(&upgrading, &verdict(&upgrading)));
    }

    #[test]
    fn a_kept_hold_outlives_the_backup_label() {
        let restarted = StartFacts {
            hold: Some("why".into()),
            ..own()
        };
        assert_eq!(
            verdict(&restarted),
            Verdict::Copy {
                reason: "why".into(),
                persist: false
            }
        );
    }

    #[test]
    fn a_lease_of_another_system_is_a_copy_unless_upgraded() {
        let converted = StartFacts {
            lease: Some(Some(OTHER)),
            ..own()
        };
        let v = verdict(&converted);
        assert!(is_copy(&v), "{v:?}");
        let Verdict::Copy { reason, .. } = v else {
            unreachable!()
        };
        assert!(reason.contains(&OTHER.to_string()) && reason.contains(&ME.to_string()));
        assert!(reason.contains("pg_createsubscriber"));
        let upgraded = StartFacts {
            upgraded: true,
            ..converted
        };
        assert_eq!(verdict(&upgraded), Verdict::AdoptUpgraded);
    }

    #[test]
    fn pg_upgrade_marks_then_the_first_start_decides() {
        // While pg_upgrade runs: marked when the lease is missing or not
        // this system's, never held.
        for lease in [None, Some(Some(OTHER))] {
            let running = StartFacts {
                lease,
                binary_upgrade: true,
                ..own()
            };
            assert_eq!(verdict(&running), Verdict::MarkUpgraded);
        }
        let old_cluster = StartFacts {
            binary_upgrade: true,
            ..own()
        };
        assert_eq!(verdict(&old_cluster), Verdict::Own);
        // After: no lease copied.
        let forgotten = StartFacts {
            lease: None,
            upgraded: true,
            ..own()
        };
        assert_eq!(verdict(&forgotten), Verdict::LeaseMissingAfterUpgrade);
        // Copied (of either system, or a version 1 file): adopted, once
        // (the caller removes the note).
        for lease in [Some(Some(ME)), Some(Some(OTHER)), Some(None)] {
            let copied = StartFacts {
                lease,
                upgraded: true,
                ..own()
            };
            assert_eq!(verdict(&copied), Verdict::AdoptUpgraded);
        }
    }
}
