//! Redo of the lease records in the WAL (the startup process, on a standby
//! or in crash recovery): each record raises the generator's floor and is
//! kept in the lease file, or, when it cannot be used or kept, holds
//! issuing until an operator acts. The rules are the pure
//! [`plan_replay`]; the C side of redo is [`crate::pg::rmgr`].

use crate::core::config::Config;
use crate::core::instance::{write_marker, HELD_SYSTEM_IDENTIFIER, HOLD_FILE_NAME};
use crate::core::lease::{write_lease, LeaseRecord};
use crate::core::lease_wal::plan_replay;
use crate::pg::message::set_message;
use crate::pg::settings::data_dir;
use crate::pg::state::{current_record, system_identifier, Blocked, Shared};
use pgrx::prelude::*;
use std::sync::atomic::Ordering;

impl Shared {
    /// Redo of a lease record (the startup process): see
    /// [`crate::pg::wal`] and [`plan_replay`]. Reports problems as
    /// WARNINGs, never as an ERROR.
    pub fn replay_lease(&self, config: &Config, record: &LeaseRecord) {
        let _guard = self.lock.exclusive();
        // SAFETY: `_guard` holds self.lock exclusively. `guarded` is last used
        // before `_guard` is dropped in the Err arm below (replay_failed then
        // takes the lock and its own reference).
        let guarded = unsafe { self.guarded() };
        let plan = plan_replay(
            &current_record(config, 0),
            guarded.persisted.as_ref(),
            guarded.recorded.as_ref(),
            record,
        );
        let layout = &config.layout;
        if let Some(ms) = plan.raise_floor_ms {
            let floor = layout.pair(ms.min(layout.max_time_ms()), layout.max_sequence());
            self.generator.pair.fetch_max(floor, Ordering::AcqRel);
        }
        if plan.forget_foreign {
            guarded.recorded = None;
            // Only the hold for the other configuration ends: a copy, an
            // unusable lease file or a failed replay stays held.
            let _ = self.blocked.compare_exchange(
                Blocked::ConfigurationChanged as u32,
                Blocked::No as u32,
                Ordering::AcqRel,
                Ordering::Acquire,
            );
        }
        if plan.remember_foreign {
            guarded.recorded = Some(*record);
            // A stronger block (an unusable lease file) stays.
            let _ = self.blocked.compare_exchange(
                Blocked::No as u32,
                Blocked::ConfigurationChanged as u32,
                Ordering::AcqRel,
                Ordering::Acquire,
            );
        }
        if plan.persist {
            // A held standby keeps its lease file marked as held.
            let identity = if self.blocked() == Blocked::Copied {
                HELD_SYSTEM_IDENTIFIER
            } else {
                system_identifier()
            };
            match write_lease(&data_dir(), record, identity) {
                Ok(()) => guarded.persisted = Some(*record),
                Err(e) => {
                    drop(_guard);
                    self.replay_failed(&format!("a replayed lease could not be kept: {e}"));
                }
            }
        }
    }

    /// Redo met a lease record it cannot use or keep: a WARNING, and no ID
    /// is issued after promotion until an operator acts. The block is kept
    /// in the hold file too: after a restart, redo starts at the last
    /// restart point, which may lie past the record, and the lease file
    /// still holds the older lease; held, the server waits for the
    /// operator's acceptance, which starts new IDs `max_clock_drift` ahead
    /// of the clock (above every ID the old primary can have issued).
    pub fn replay_failed(&self, text: &str) {
        let _guard = self.lock.exclusive();
        // SAFETY: `_guard` holds self.lock exclusively; the reference lives for
        // this call.
        set_message(&mut unsafe { self.guarded() }.message, text);
        self.blocked
            .store(Blocked::ReplayFailed as u32, Ordering::Release);
        let kept = write_marker(
            &data_dir(),
            HOLD_FILE_NAME,
            &format!("recovery could not keep the old primary's lease ({text}), so IDs it issued may be unknown to this server"),
        );
        match kept {
            Ok(()) => warning!("snowflake_id: {text}; snowflake_next() will be refused after promotion, also after a restart (\"{HOLD_FILE_NAME}\"), until a superuser runs SELECT snowflake_accept_configuration()"),
            Err(e) => warning!("snowflake_id: {text}; snowflake_next() will be refused after promotion; \"{HOLD_FILE_NAME}\" could not be written either ({e}), so after a restart only a clock past every ID the old primary issued (snowflake_id.max_clock_drift after its last lease) keeps IDs unique"),
        }
    }
}
