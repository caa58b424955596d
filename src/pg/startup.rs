//! The verdict at start: resume after this server's own lease, or hold
//! generation until an operator acts (a lease written under another
//! configuration, a lease file that cannot be used, a data directory that
//! is a copy of another server's, an upgraded one whose lease was left
//! behind). The rules are the pure [`instance::verdict`]; this room reads
//! the data directory and `pg_control`, and writes the notes and holds the
//! rules ask for. A hold is never silently ignored.
//!
//! Runs in the postmaster's shared-memory startup hook, before any other
//! process can see the state it fills in (hence `&mut Shared`), and once
//! more in `pg_upgrade`'s check of the new cluster
//! ([`note_binary_upgrade`]).

use crate::core::config::Config;
use crate::core::instance::{
    self, read_marker, records_identity, remove_marker, write_marker, StartFacts, Verdict,
    HELD_SYSTEM_IDENTIFIER, HOLD_FILE_NAME, IDENTITY_FILE_NAME, SUCCESSOR_FILE_NAME,
    UPGRADED_FILE_NAME,
};
use crate::core::lease::{read_lease, write_lease, LeaseFileError, LeaseRecord, LEASE_FILE_NAME};
use crate::pg::message::set_message;
use crate::pg::settings::{self, data_dir};
use crate::pg::state::{current_record, system_identifier, Blocked, Shared};
use pgrx::prelude::*;
use std::sync::atomic::Ordering;

/// Start-up: read the lease, decide whether this server wrote it, and place
/// the generator after it.
pub(super) fn resume_from_lease(shared: &mut Shared, config: &Config) {
    let layout = config.layout;
    let dir = data_dir();
    // Archive recovery (a standby, a point-in-time restore): once it ends,
    // this server takes over a node id from a predecessor whose last leases
    // it may not have replayed (crate::pg::accept). Crash recovery of this
    // server's own WAL is not a takeover; with a registry the claim's floor
    // keeps the successor above its predecessor instead.
    // A successor that crashed before its floor was durable is one still
    // (the file).
    let successor = !settings::registry_enabled()
        && (dir.join("standby.signal").exists()
            || dir.join("recovery.signal").exists()
            || dir.join(SUCCESSOR_FILE_NAME).exists());
    if successor {
        if let Err(e) = write_marker(&dir, SUCCESSOR_FILE_NAME, "this server takes over its node id once recovery ends: its IDs start above everything its predecessor can have issued") {
            warning!("snowflake_id: could not write \"{SUCCESSOR_FILE_NAME}\": {e} (a crash after the promotion and before the first ID would restart without the successor's floor)");
        }
    }
    shared.successor_pending.store(successor, Ordering::SeqCst);
    shared.successor_marker.store(successor, Ordering::SeqCst);
    let stored = match read_lease(&dir) {
        Ok(stored) => stored,
        Err(e) => {
            shared.generator.resume_after_lease(&layout, None);
            let kind = match e {
                LeaseFileError::Corrupt {
                    seeming_lease_unix_ms,
                    ..
                } => {
                    shared.guarded.get_mut().seeming_lease_unix_ms = seeming_lease_unix_ms;
                    Blocked::LeaseCorrupt
                }
                _ => Blocked::LeaseUnreadable,
            };
            let text = e.to_string();
            set_message(&mut shared.guarded.get_mut().message, &text);
            shared.blocked.store(kind as u32, Ordering::SeqCst);
            warning!("snowflake_id: {text}; snowflake_next() is refused until the file is repaired (never delete it while the clock may be before the last issued ID)");
            // A copy is still remembered as one, for the start after the
            // repair (PostgreSQL renames backup_label meanwhile).
            let facts = StartFacts {
                upgraded: false,
                ..start_facts(&dir, None)
            };
            if let Verdict::Copy {
                reason,
                persist: true,
            } = instance::verdict(&facts)
            {
                if let Err(e) = write_marker(&dir, HOLD_FILE_NAME, &reason) {
                    warning!("snowflake_id: could not write \"{HOLD_FILE_NAME}\": {e}");
                }
            }
            return;
        }
    };
    let facts = start_facts(&dir, stored.map(|s| s.system_identifier));
    let verdict = instance::verdict(&facts);
    if facts.standby_signal && facts.upgraded {
        // Its primary's upgrade note (see instance::verdict): not this
        // server's. (A hold file stays: a standby of a copy is a copy.)
        if let Err(e) = remove_marker(&dir, UPGRADED_FILE_NAME) {
            warning!("snowflake_id: could not remove \"{UPGRADED_FILE_NAME}\" on a standby: {e}");
        }
    }
    if records_identity(&facts, &verdict) {
        record_identity(&dir);
    }
    let record = stored.map(|stored| stored.record);
    match record {
        // No lease: a new server (nothing was issued), unless pg_upgrade
        // left its note (held below until the lease is copied or accepted).
        None => shared.generator.resume_after_lease(&layout, None),
        Some(record) => {
            shared.guarded.get_mut().persisted = Some(record);
            let differences = record.differences(&current_record(config, 0));
            if differences.is_empty() {
                shared
                    .generator
                    .resume_after_lease(&layout, Some(record.lease_until_ms()));
                // IDs before the restart may have run further ahead than
                // the drift limit allows now (a larger limit then, or a
                // successor's floor): resuming after them is no clock
                // stepped back.
                shared
                    .generator
                    .allow_ahead(record.drift_limit_ms.unwrap_or(0));
            } else {
                // Nothing is issued until the change is accepted.
                shared.generator.resume_after_lease(&layout, None);
                shared.guarded.get_mut().recorded = Some(record);
                shared
                    .blocked
                    .store(Blocked::ConfigurationChanged as u32, Ordering::SeqCst);
                warning!(
                    "snowflake_id: the configuration changed since IDs were last issued ({}); snowflake_next() is refused until a superuser runs SELECT snowflake_accept_configuration()",
                    differences.join("; ")
                );
            }
        }
    }
    // (instance::verdict gives LeaseMissingAfterUpgrade only without a
    // lease, AdoptUpgraded only with one.)
    match verdict {
        Verdict::MarkUpgraded => mark_upgraded(&dir),
        Verdict::LeaseMissingAfterUpgrade => hold(
            shared,
            Blocked::LeaseMissingAfterUpgrade,
            &format!("this cluster was made by pg_upgrade and its lease file ({LEASE_FILE_NAME}) was not copied from the old data directory, so the IDs the old cluster issued and the settings it issued them under are unknown"),
        ),
        Verdict::AdoptUpgraded => {
            if let Some(record) = record {
                // The documented upgrade step: the old cluster's lease,
                // copied (and rewritten as this system's even when it
                // already was, or was a version 1 file: the note must go
                // either way).
                let adopted = write_lease(&dir, &record, system_identifier())
                    .map_err(|e| e.to_string())
                    .and_then(|()| {
                        remove_marker(&dir, UPGRADED_FILE_NAME).map_err(|e| e.to_string())
                    });
                match adopted {
                    Ok(()) => log!("snowflake_id: the lease file copied from the cluster this one was upgraded from is adopted"),
                    Err(e) => warning!("snowflake_id: the lease file copied from the upgraded cluster could not be adopted: {e}"),
                }
            }
        }
        Verdict::Copy { reason, persist } => {
            hold_copy(shared, &dir, &reason, persist, record.as_ref())
        }
        Verdict::Own => {
            if record.is_none() {
                log!("snowflake_id: no lease file ({LEASE_FILE_NAME}) in the data directory: a new server, IDs start from the clock");
            }
        }
    }
}

/// The start-up facts of [`instance::verdict`], from the data directory and
/// `pg_control`.
fn start_facts(dir: &std::path::Path, lease: Option<Option<u64>>) -> StartFacts {
    StartFacts {
        system_identifier: system_identifier(),
        lease,
        backup_label: dir.join("backup_label").exists(),
        standby_signal: dir.join("standby.signal").exists(),
        recovery_signal: dir.join("recovery.signal").exists(),
        hold: read_marker(dir, HOLD_FILE_NAME).unwrap_or_else(|e| {
            Some(format!(
                "\"{HOLD_FILE_NAME}\" exists but cannot be read ({e})"
            ))
        }),
        upgraded: dir.join(UPGRADED_FILE_NAME).exists(),
        identity: match read_marker(dir, IDENTITY_FILE_NAME) {
            Ok(None) => None,
            Ok(Some(text)) => Some(text.trim().parse().ok()),
            Err(_) => Some(None),
        },
        binary_upgrade: settings::is_upgrade_target(),
    }
}

/// Records this system's identifier as the one that started in this data
/// directory ([`IDENTITY_FILE_NAME`]). A failure is a WARNING: the file is
/// one more sign of a copy, the server's own state does not need it.
fn record_identity(dir: &std::path::Path) {
    if let Err(e) = write_marker(dir, IDENTITY_FILE_NAME, &system_identifier().to_string()) {
        warning!("snowflake_id: could not write \"{IDENTITY_FILE_NAME}\": {e} (a copy of this data directory converted into a new system before an ID was issued will not be recognised)");
    }
}

/// `pg_upgrade` loads the library into the new cluster to check it (its
/// `LOAD`, in binary-upgrade mode) whether or not it is preloaded there:
/// the note that the lease is still to come is written then too.
pub fn note_binary_upgrade() {
    let dir = data_dir();
    let lease = match read_lease(&dir) {
        Ok(stored) => stored.map(|s| s.system_identifier),
        // A lease that cannot be read is reported at the first start.
        Err(_) => return,
    };
    if instance::verdict(&start_facts(&dir, lease)) == Verdict::MarkUpgraded {
        mark_upgraded(&dir);
    }
}

fn mark_upgraded(dir: &std::path::Path) {
    if let Err(e) = write_marker(
        dir,
        UPGRADED_FILE_NAME,
        "written while pg_upgrade ran: the lease file of the old cluster is to be copied here",
    ) {
        warning!("snowflake_id: could not write \"{UPGRADED_FILE_NAME}\": {e}");
    }
}

/// Start-up: a copy of another server waits for the operator; the hold is
/// kept in a file (`persist`) so that it outlives the traces it was
/// recognised by, and in the lease file (its system identifier becomes
/// [`HELD_SYSTEM_IDENTIFIER`]) so that it travels with the lease wherever
/// that is copied (`pg_upgrade`).
fn hold_copy(
    shared: &mut Shared,
    dir: &std::path::Path,
    reason: &str,
    persist: bool,
    lease: Option<&LeaseRecord>,
) {
    if persist {
        // Without the file a crash restart would forget the hold (the
        // traces are gone by then): the server does not start without it.
        if let Err(e) = write_marker(dir, HOLD_FILE_NAME, reason) {
            error!("snowflake_id: could not write \"{HOLD_FILE_NAME}\" in the data directory: {e} (this server may be a copy of another: {reason})");
        }
    }
    if let Some(lease) = lease {
        if let Err(e) = write_lease(dir, lease, HELD_SYSTEM_IDENTIFIER) {
            error!("snowflake_id: could not mark the lease file ({LEASE_FILE_NAME}) as held: {e} (this server may be a copy of another: {reason})");
        }
    }
    hold(shared, Blocked::Copied, reason);
}

/// Start-up: generation waits for the operator, for `why`.
fn hold(shared: &mut Shared, kind: Blocked, why: &str) {
    set_message(&mut shared.guarded.get_mut().message, why);
    shared.blocked.store(kind as u32, Ordering::SeqCst);
    warning!("snowflake_id: {why}; snowflake_next() is refused until a superuser runs SELECT snowflake_accept_configuration()");
}
