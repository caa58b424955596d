//! Floors for successors: `snowflake_accept_configuration()`'s work,
//! lifting a hold once the operator accepted what changed (a
//! configuration, a copy, an upgrade whose lease was not copied), and the
//! floor a server that ends archive recovery applies by itself (a promoted
//! standby, the end of a point-in-time recovery): in both the generator
//! starts above every ID that can have been issued before.
//!
//! A successor may not have seen its predecessor's last leases: under
//! asynchronous replication the old primary can hand out IDs for seconds
//! after the last lease record the standby received. What bounds them is
//! time: the predecessor issued nothing after the takeover, and nothing
//! further ahead of its clock than its drift limit, which every lease
//! records ([`successor_floor_ms`]). So the successor starts that far ahead
//! of its own clock, plus `snowflake_id.max_clock_offset` for the two
//! clocks' difference, and is allowed to be that far ahead until its clock
//! catches up ([`SharedState::allow_ahead`](crate::core::generator::SharedState::allow_ahead)):
//! no call fails or waits for it. Crash recovery of a server's own WAL is
//! no takeover and needs no jump (its lease file and WAL hold every lease it
//! wrote); with a registry the claim's floor is the proof instead (a new
//! holder starts above every grant of the node id).

use crate::core::config::Config;
use crate::core::generator::lease_target;
use crate::core::instance::{
    remove_marker, write_marker, HOLD_FILE_NAME, IDENTITY_FILE_NAME, UPGRADED_FILE_NAME,
};
use crate::core::lease::{successor_floor_ms, LeaseRecord};
use crate::pg::clock;
use crate::pg::message::message_text;
use crate::pg::settings::{self, data_dir};
use crate::pg::state::{current_record, system_identifier, Blocked, Shared};
use pgrx::pg_sys;
use std::sync::atomic::Ordering;

impl Shared {
    /// Applies the successor's floor once this server, started in archive
    /// recovery without a registry, is out of recovery (see the module's
    /// comment). Called by every backend when it first sees recovery over;
    /// after the first, one atomic load.
    pub fn take_over(&self, config: &Config) {
        if !self.successor_pending.load(Ordering::Acquire) {
            return;
        }
        let _guard = self.lock.exclusive();
        if !self.successor_pending.load(Ordering::Acquire) {
            return;
        }
        let (floor_ms, ahead_ms) = self.raise_to_successor_floor(config);
        self.successor_pending.store(false, Ordering::Release);
        pgrx::log!(
            "snowflake_id: recovery ended and this server took over its node id: new IDs start at {} ({ahead_ms} ms ahead of the clock, for the drift limit its predecessor recorded, this server's own and snowflake_id.max_clock_offset), above every ID the predecessor can have handed out",
            clock::timestamp_of(config, floor_ms)
        );
    }

    /// Raises the generator to the successor's floor and allows it to be
    /// that far ahead of the clock; returns the floor (ms since the epoch)
    /// and how far ahead of the clock it lies. The caller holds the lock.
    ///
    /// The predecessor issued under the configuration of the lease this
    /// server remembers from another configuration, if any (a change
    /// accepted now), else under this server's: its IDs end at the
    /// successor's bound ([`successor_floor_ms`]) in its own epoch and
    /// layout, and the floor lies above the largest of them as a number,
    /// which is how IDs of any layout sort.
    fn raise_to_successor_floor(&self, config: &Config) -> (u64, u64) {
        let layout = &config.layout;
        let (persisted, recorded) = {
            // SAFETY: the caller holds self.lock exclusively; the fields are
            // copied out at once.
            let guarded = unsafe { self.guarded_ref() };
            (guarded.persisted, guarded.recorded)
        };
        let predecessor_limit = [persisted, recorded]
            .iter()
            .flatten()
            .filter_map(|r| r.drift_limit_ms)
            .max();
        // Takeovers after the last lease this server has: timelines it
        // replayed past that lease's (a standby of a standby promoted
        // before its first lease reached this one).
        let mut replayed_timeline: pg_sys::TimeLineID = 0;
        // SAFETY: reads XLogRecoveryCtl under its spinlock (shared memory this
        // process is attached to) and writes the last replayed record's
        // timeline through the pointer, a local of this frame.
        unsafe { pg_sys::GetXLogReplayRecPtr(&mut replayed_timeline) };
        let unseen_takeovers = persisted
            .and_then(|p| p.timeline)
            .map_or(0, |lease_timeline| {
                replayed_timeline.saturating_sub(lease_timeline)
            });
        let now = clock::now_ms(config);
        let bound_ms = successor_floor_ms(
            now,
            predecessor_limit,
            settings::max_clock_drift_ms(),
            settings::max_clock_offset_ms(),
            unseen_takeovers,
        );
        let floor_ms = match recorded {
            // The last ID the predecessor can have issued is one millisecond
            // before the bound, in its configuration.
            Some(old) => LeaseRecord {
                lease_until_unix_ms: config
                    .epoch_unix_ms
                    .saturating_add(bound_ms.saturating_sub(1).min(i64::MAX as u64) as i64),
                ..old
            }
            .floor_for(layout)
            .map_or(layout.max_time_ms(), |f| f.first_time_ms),
            None => bound_ms,
        }
        .min(layout.max_time_ms());
        self.generator
            .pair
            .fetch_max(layout.pair(floor_ms, 0).saturating_sub(1), Ordering::AcqRel);
        let ahead_ms = (self.generator.last_time_ms(layout) as i64 - now).max(0) as u64;
        // Calls may borrow the drift limit beyond the floor, as they may
        // beyond the clock: a batch right after the takeover waits no more
        // than on any server.
        self.generator
            .allow_ahead(ahead_ms.saturating_add(settings::max_clock_drift_ms()));
        self.successor_floor_ms.store(floor_ms, Ordering::Release);
        self.successor_ahead_ms.store(ahead_ms, Ordering::Release);
        (floor_ms, ahead_ms)
    }

    /// Accepts a configuration change: raises the generator above every ID
    /// the old configuration can have issued, writes a lease under the new
    /// configuration and lifts the block. Returns what was accepted, or why
    /// acceptance is not possible. Refused in recovery: redo may still
    /// replay leases of the old configuration, and no lease can be written.
    pub fn accept_configuration(
        &self,
        config: &Config,
        now_ms: i64,
        max_drift_ms: u64,
    ) -> Result<String, Refusal> {
        let guard = self.lock.exclusive();
        // SAFETY: RecoveryInProgress takes no argument and reads shared memory this
        // process is attached to.
        if unsafe { pg_sys::RecoveryInProgress() } {
            return Err(Refusal::InRecovery);
        }
        let blocked = self.blocked();
        match blocked {
            Blocked::No => {
                return Ok("nothing to accept: the configuration matches the lease".into())
            }
            Blocked::LeaseCorrupt | Blocked::LeaseUnreadable | Blocked::ReplayFailed => {
                return Err(Refusal::LeaseUnusable(message_text(
                    // SAFETY: `guard` holds self.lock exclusively; the message is copied
                    // out at once.
                    &unsafe { self.guarded() }.message,
                )));
            }
            Blocked::ConfigurationChanged | Blocked::Copied | Blocked::LeaseMissingAfterUpgrade => {
            }
        }
        let layout = &config.layout;
        let mut accepted = Vec::new();
        // The first millisecond new IDs may use, when the block asks for a
        // floor: above the old configuration's IDs, or above every ID a
        // missing lease can have covered.
        let mut floor_ms = None;
        let mut old_max_id = None;
        // SAFETY: `guard` holds self.lock exclusively; the field is copied out
        // at once.
        match (blocked, unsafe { self.guarded() }.recorded) {
            (Blocked::ConfigurationChanged, None) => {
                return Err(Refusal::LeaseUnusable(
                    "the recorded lease is missing".into(),
                ))
            }
            (_, Some(old)) => {
                let plan = old
                    .floor_for(&config.layout)
                    .map_err(Refusal::Unorderable)?;
                // As far ahead as the old configuration's IDs may have run
                // (its recorded limit and the clocks' difference), or this
                // server's own limit: no further.
                let reach_ms = old.drift_limit_ms.map_or(max_drift_ms, |old_limit| {
                    old_limit.max(max_drift_ms) + settings::max_clock_offset_ms()
                });
                if plan.first_time_ms as i64 > now_ms.saturating_add(reach_ms as i64) {
                    return Err(Refusal::TooFarAhead {
                        first_time_ms: plan.first_time_ms,
                        now_ms,
                        old_max_id: plan.old_max_id,
                    });
                }
                floor_ms = Some(plan.first_time_ms);
                old_max_id = Some(plan.old_max_id);
                accepted.push(old.differences(&current_record(config, 0)).join("; "));
                if (old.node_bits, old.sequence_bits)
                    != (layout.node_bits(), layout.sequence_bits())
                {
                    accepted.push("the layout changed: every server issuing IDs for the same tables must run this layout before any of them issues again, or their IDs collide across nodes (stop issuing on all, change all, accept on each)".into());
                }
            }
            (_, None) => {}
        }
        if self.successor_pending.load(Ordering::Acquire)
            || matches!(blocked, Blocked::LeaseMissingAfterUpgrade | Blocked::Copied)
        {
            // The old cluster's IDs, those the original issued after the
            // copy was taken, or those a primary handed out after the last
            // lease this promoted server replayed, are unknown here; none
            // is later than the clock plus the predecessor's drift limit
            // (or this server's, if larger) and the clocks' difference: the
            // successor's floor.
            let (successor_ms, _) = self.raise_to_successor_floor(config);
            floor_ms = Some(floor_ms.map_or(successor_ms, |f| f.max(successor_ms)));
        }
        if blocked == Blocked::LeaseMissingAfterUpgrade {
            accepted.push("the upgraded cluster's lease file is missing; new IDs start snowflake_id.max_clock_drift ahead of the clock".into());
        }
        if blocked == Blocked::Copied {
            accepted.push(format!(
                "this server is a copy ({}); it issues IDs as the only server with its node id, starting snowflake_id.max_clock_drift ahead of the clock",
                // SAFETY: `guard` holds self.lock exclusively; the message is copied
                // out at once.
                message_text(&unsafe { self.guarded() }.message)
            ));
        }
        if let Some(first_time_ms) = floor_ms {
            self.generator.pair.fetch_max(
                layout.pair(first_time_ms, 0).saturating_sub(1),
                Ordering::AcqRel,
            );
            // Within what acceptance allows ahead of the clock (above): no
            // call fails, or waits longer than on any server, until the
            // clock catches up.
            self.generator.allow_ahead(
                first_time_ms
                    .saturating_sub(now_ms.max(0) as u64)
                    .saturating_add(max_drift_ms),
            );
        }
        // The floor of this acceptance covers the takeover's too.
        self.successor_pending.store(false, Ordering::Release);
        self.generator.lease_until_ms.store(0, Ordering::SeqCst);
        let needed = floor_ms.unwrap_or_else(|| self.generator.last_time_ms(layout));
        let (target, _) = self
            .record_lease_locked(
                &guard,
                config,
                lease_target(&self.generator, layout, needed),
            )
            .map_err(|e| Refusal::Write(e.to_string()))?;
        // The lease is now this system's: the traces that held it go, and
        // this system is the one that started here.
        let dir = data_dir();
        write_marker(&dir, IDENTITY_FILE_NAME, &system_identifier().to_string()).map_err(|e| {
            Refusal::Write(format!("could not write \"{IDENTITY_FILE_NAME}\": {e}"))
        })?;
        for marker in [HOLD_FILE_NAME, UPGRADED_FILE_NAME] {
            remove_marker(&dir, marker)
                .map_err(|e| Refusal::Write(format!("could not remove \"{marker}\": {e}")))?;
        }
        // With lease_sync the first ID waits for the worker's synchronous
        // lease instead.
        if !settings::lease_sync() {
            self.raise_lease(target);
        }
        self.blocked.store(Blocked::No as u32, Ordering::Release);
        let mut text = format!("accepted: {}", accepted.join("; "));
        if let Some(max) = old_max_id {
            text.push_str(&format!(
                "; new IDs are greater than {max}, the largest ID the old configuration can have issued"
            ));
        }
        Ok(text)
    }
}

/// Why a configuration change cannot be accepted.
pub enum Refusal {
    InRecovery,
    LeaseUnusable(String),
    Unorderable(String),
    TooFarAhead {
        first_time_ms: u64,
        now_ms: i64,
        old_max_id: i64,
    },
    Write(String),
}
