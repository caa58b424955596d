//! `snowflake_accept_configuration()`'s work: lifting a hold once the
//! operator accepted what changed (a configuration, a copy, an upgrade
//! whose lease was not copied), with the generator floored above every ID
//! that can have been issued before.

use crate::core::config::Config;
use crate::core::generator::lease_target;
use crate::core::instance::{
    remove_marker, write_marker, HOLD_FILE_NAME, IDENTITY_FILE_NAME, UPGRADED_FILE_NAME,
};
use crate::pg::message::message_text;
use crate::pg::settings::{self, data_dir};
use crate::pg::state::{current_record, system_identifier, Blocked, Shared};
use pgrx::pg_sys;
use std::sync::atomic::Ordering;

impl Shared {
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
                if plan.first_time_ms as i64 > now_ms + max_drift_ms as i64 {
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
        if matches!(blocked, Blocked::LeaseMissingAfterUpgrade | Blocked::Copied) {
            // The old cluster's IDs, or those the original issued after the
            // copy was taken, are unknown here; none is later than the clock
            // plus the drift limit.
            let ms = (now_ms.max(0) as u64 + max_drift_ms + 1).min(layout.max_time_ms());
            floor_ms = Some(floor_ms.map_or(ms, |f| f.max(ms)));
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
        }
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
