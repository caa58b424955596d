//! Keeping the claim: the registry worker's renewals, and the resumption
//! of a claim the registry's fence ended (its failover, a `pg_upgrade`, a
//! restore), which lets a server whose grant still runs issue on without a
//! pause (`snowflake_registry.resume` says why that is safe). A claim that
//! cannot be resumed, or that was lost otherwise, is claimed again by
//! [`ClaimWorker`]'s turn (`worker.rs`), which also claims at start and
//! releases at the end.

use super::answer::{asked_of, failure_texts, fence_ended, holder_time_ms, unrightful};
use super::libpq::{CallError, OnShutdown};
use super::worker::{time_text, ClaimWorker};
use super::{ClaimState, Phase};
use crate::core::call_proof::SignedCall;
use crate::core::config::Config;
use crate::core::registry::{check_renewal_answer, renew_every_ms, renewal_due, Asked, Grant};
use crate::pg::settings;
use crate::pg::state::Shared;
use pgrx::prelude::*;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

const RENEW_SQL: &str = "SELECT snowflake_registry.renew_signed($1, $2, $3, $4, $5, $6, $7)";
const RESUME_SQL: &str = "SELECT snowflake_registry.resume_signed($1, $2, $3, $4, $5, $6, $7, $8)";
/// The SQLSTATEs on which resuming is given up (see `resume`).
const RESUME_REFUSALS: [&str; 4] = ["55000", "42883", "42501", "22023"];

impl ClaimWorker {
    /// Calls `sql` (a renewal or a resumption, which answer the grant's new
    /// end) and checks the answer against the grant `held` and what was
    /// asked: one no registry function gives is refused, never used. A
    /// good answer raises the grant (never lowers it); returns the
    /// registry's answer.
    fn extend_grant(
        &mut self,
        state: &ClaimState,
        sql: &str,
        params: &[Option<String>],
        held: &Grant,
        asked: &Asked,
        what: &str,
    ) -> Result<u64, CallError> {
        let until = self.call(sql, params, OnShutdown::Abort).and_then(|rows| {
            let until = rows
                .first()
                .and_then(|r| r.first().cloned().flatten())
                .and_then(|v| v.parse::<i64>().ok())
                .ok_or_else(|| unrightful(format!("{what} answered {rows:?}"), None))?;
            check_renewal_answer(held, asked, until)
                .map_err(|e| unrightful(format!("{what} answered {until}"), Some(e)))
        })?;
        state.until_ms.fetch_max(until, Ordering::AcqRel);
        self.grant = Some(Grant {
            until_ms: until.max(held.until_ms),
            ..*held
        });
        Ok(until)
    }

    pub(super) fn renew(&mut self, config: &Config, shared: &Shared, state: &ClaimState) {
        let Some(grant) = self.grant else { return };
        let asked = asked_of(config, shared);
        let params = self.signed(
            state,
            &grant,
            SignedCall::Renew {
                holder_now_ms: asked.holder_now_ms,
                grant_ms: asked.grant_ms,
            },
        );
        let until = self.extend_grant(state, RENEW_SQL, &params, &grant, &asked, "a renewal");
        match until {
            Ok(until) => {
                if state.failing.load(Ordering::Acquire) {
                    log!(
                        "snowflake_id: the registry {} answers again; node id {} is granted up to {}",
                        settings::registry_display(),
                        grant.node_id,
                        time_text(config, until as i64)
                    );
                }
                self.succeeded(state);
                // Still short of the target: the registry capped the grant
                // (its max_grant_ms ahead of its clock, as just after a
                // fence). Asking again at once would get no more: wait a
                // renewal interval, at most a second.
                let grant_ms = settings::registry_grant_ms();
                if renewal_due(
                    until.max(grant.until_ms),
                    holder_time_ms(config, shared),
                    grant_ms,
                ) {
                    self.next_call =
                        Instant::now() + Duration::from_millis(renew_every_ms(grant_ms).min(1000));
                }
            }
            Err(e) => {
                let lost = matches!(&e, CallError::Refused { sqlstate, .. } if sqlstate == "55000");
                if lost {
                    // Ended by a fence: resumed if the registry can prove
                    // that safe, else claimed again. Taken over (this
                    // server was paused or cut off past its grant), or a
                    // claim the registry does not know (made in the
                    // history a restore lost): claimed again at once. No
                    // claim takes a live one, so the claim made again is
                    // refused while another server holds the node id, and
                    // its floor covers every grant of it the registry
                    // knows, this server's among them (else it is not
                    // used: uncovered_reclaim).
                    let fenced = fence_ended(&e);
                    state.reclaim.store(true, Ordering::Release);
                    // (A claim made again names a new secret, and gets a
                    // new key.)
                    self.resuming = fenced;
                }
                self.failed(state, e, lost);
            }
        }
    }

    /// The claim will not be resumed: the node id is claimed again.
    pub(super) fn give_up_resuming(&mut self) {
        self.resuming = false;
    }

    /// Resumes the claim a fence ended (`snowflake_registry.resume`),
    /// reporting the grant this server holds: issuing never stops. Refused
    /// (history the registry lost, a grant that has ended, a registry
    /// script without the function), the node id is claimed again above the
    /// fence at the next turn.
    pub(super) fn resume(&mut self, config: &Config, shared: &Shared, state: &ClaimState) {
        let Some(grant) = self.grant else { return };
        let held_until = state.until_ms().max(grant.until_ms);
        let asked = asked_of(config, shared);
        let params = self.signed(
            state,
            &grant,
            SignedCall::Resume {
                held_until_ms: held_until,
                holder_now_ms: asked.holder_now_ms,
                grant_ms: asked.grant_ms,
            },
        );
        let held = Grant {
            until_ms: held_until,
            ..grant
        };
        let until = self.extend_grant(state, RESUME_SQL, &params, &held, &asked, "a resumption");
        match until {
            Ok(until) => {
                self.resuming = false;
                state.reclaim.store(false, Ordering::Release);
                state.resumes.fetch_add(1, Ordering::AcqRel);
                self.succeeded(state);
                // Held again, or still waiting for the floor of a claim
                // made again after an earlier fence: published once the
                // clock is near it, as after a claim.
                state.set_phase(Phase::Waiting);
                self.publish_when_near(config, state);
                log!(
                    "snowflake_id: resumed claim {} of node id {} after the registry's fence: granted up to {}, issuing never stopped",
                    grant.claim_id,
                    grant.node_id,
                    time_text(config, until as i64)
                );
            }
            // Given up on the registry's word that the claim cannot be
            // resumed (55000), or a registry script without the function
            // (42883, 42501) or that refuses the arguments (22023); any
            // other failure (a failover under way, a cancelled call, an
            // answer that cannot be right) is retried while the grant runs.
            Err(e)
                if matches!(&e, CallError::Refused { sqlstate, .. }
                    if RESUME_REFUSALS.contains(&sqlstate.as_str())) =>
            {
                let (text, _) = failure_texts(&e);
                log!(
                    "snowflake_id: claim {} of node id {} is not resumed ({text}); the node id is claimed again above the registry's fence",
                    grant.claim_id,
                    grant.node_id
                );
                self.give_up_resuming();
                self.next_call = Instant::now();
            }
            Err(e) => self.failed(state, e, false),
        }
    }
}
