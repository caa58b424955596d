//! The holder's side of the node-id registry: fenced node-id leases.
//!
//! A server configured with `snowflake_id.registry` does not trust its node
//! id to a plan kept by hand: it claims one from the registry (the SQL in
//! `registry/snowflake_registry.sql`), which answers with a *grant* in ID
//! time:
//!
//! * `floor_ms`: every ID any earlier holder of this node id was ever
//!   allowed to issue has a time at or below it; this holder issues only
//!   above it;
//! * `until_ms`: this holder issues no ID with a time after it; renewals
//!   raise it.
//!
//! The registry gives a node id's next holder, as its floor, the largest
//! grant it ever gave for that id. So the IDs of two holders of one node id
//! lie in disjoint ranges of time, whatever their clocks, pauses, network
//! partitions or restarts: wall time only decides *when* a node id passes
//! on, never whether an ID repeats. The two rules the holder keeps, and
//! this module states, are the **fence** ([`lease_within_grant`]: the
//! durable lease, which bounds every issued ID, never passes the grant) and
//! the **floor** ([`first_ms_above`]: the generator starts above it).
//!
//! Everything here is plain Rust with the clock and the registry's answers
//! passed in; the property tests at the end run the protocol against a
//! model of the registry's SQL with skewed clocks, pauses, crashes, copies
//! and a registry that fails.

use super::layout::IdLayout;
use thiserror::Error;

/// A renewal is due once a sixth of the grant has passed (the registry's
/// `holders` view calls a claim `stale` after three missed renewals; it
/// passes on only when its grant ends).
pub fn renew_every_ms(grant_ms: u64) -> u64 {
    (grant_ms / 6).max(100)
}

/// How much of a grant must be left on the registry's clock (ms) for a
/// claim a fence ended to be resumed (`snowflake_registry.resume`): room
/// for the clocks of two registry hosts (a failover's old and new primary).
pub const RESUME_MARGIN_MS: i64 = 1_000;

/// Whether a claim a fence ended may be resumed: its grant, ending at
/// `until_ms` (the later of the one its holder reports and the one the
/// registry knows), has not ended on the registry's clock (`now_ms`), with
/// [`RESUME_MARGIN_MS`] to spare. No claim takes a node id before its
/// holder's grant has ended, so a history the registry lost holds no
/// takeover of this claim: one would have come after that end, and so
/// after now.
pub fn may_resume(until_ms: i64, now_ms: i64) -> bool {
    until_ms as i128 >= now_ms as i128 + RESUME_MARGIN_MS as i128
}

/// What a claim or a renewal granted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grant {
    pub node_id: u64,
    /// The registry's number of this claim.
    pub claim_id: i64,
    /// Issue only IDs with a time above this (-1: the id was never granted).
    pub floor_ms: i64,
    /// Issue no ID with a time after this.
    pub until_ms: u64,
}

/// Why an ID cannot be issued within the grant.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum GrantError {
    /// IDs up to `needed_ms` are wanted but the grant ends at `until_ms`:
    /// the registry has not renewed it (down, or the claim was lost).
    #[error("the node id's grant from the registry ends at {until_ms} ms since the epoch and IDs up to {needed_ms} ms are wanted")]
    Exhausted { needed_ms: u64, until_ms: u64 },
    /// IDs from `from_ms` on were taken under a grant that has ended, and
    /// the node id was claimed again with a floor at or above them: another
    /// holder may have issued them in between.
    #[error("the node id was claimed again with a floor at {floor_ms} ms since the epoch while this call held IDs from {from_ms} ms")]
    BelowFloor { from_ms: u64, floor_ms: i64 },
}

/// Whether IDs with times from `from_ms` to `needed_ms` (those beyond the
/// lease) lie inside the grant in force, `(floor_ms, until_ms]`. A range a
/// call took before a claim made again may lie between the old grant's end
/// and the new floor: in no grant of this holder. (The caller reads the
/// grant's end before its floor, and the claim stores the floor first, so
/// a new end is never paired with an old floor.)
pub fn range_within_grant(
    from_ms: u64,
    needed_ms: u64,
    floor_ms: i64,
    until_ms: u64,
) -> Result<(), GrantError> {
    if needed_ms > until_ms {
        return Err(GrantError::Exhausted {
            needed_ms,
            until_ms,
        });
    }
    if (from_ms as i128) <= floor_ms as i128 {
        return Err(GrantError::BelowFloor { from_ms, floor_ms });
    }
    Ok(())
}

/// What this holder asked the registry for: the bounds every true answer
/// keeps (the rules of `snowflake_registry.claim` and `renew`), so an answer
/// that breaks one did not come from the registry's functions: a wrong
/// function or database, a proxy, or anyone on the network path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Asked {
    /// The node id configured (`snowflake_id.node_id`), if any.
    pub node_id: Option<u64>,
    /// The holder's present sent with the call (ms since the epoch).
    pub holder_now_ms: u64,
    /// The grant asked for (ms).
    pub grant_ms: u64,
    /// The layout's largest node id and time.
    pub max_node: u64,
    pub max_time_ms: u64,
}

impl Asked {
    /// The latest end the registry's rule gives a grant above `floor_ms`:
    /// the later of the floor and the present sent, plus the grant asked
    /// (the registry caps it lower, never higher).
    fn limit_ms(&self, floor_ms: i64) -> u64 {
        self.holder_now_ms
            .max(floor_ms.max(0) as u64)
            .saturating_add(self.grant_ms)
    }
}

/// Why an answer of the registry cannot be right (and is refused).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AnswerError {
    #[error("node id {node_id} is outside this server's layout (0 to {max_node})")]
    NodeOutOfRange { node_id: i64, max_node: u64 },
    #[error("node id {got} was granted, but node id {asked} was asked for (snowflake_id.node_id)")]
    NotTheNodeAsked { asked: u64, got: i64 },
    #[error("claim number {0} is not one the registry gives (they start at 1)")]
    BadClaimId(i64),
    #[error("the floor {floor_ms} ms lies outside the layout's time (-1 to {max_time_ms} ms)")]
    FloorOutOfRange { floor_ms: i64, max_time_ms: u64 },
    #[error("the grant ends at {until_ms} ms, below its floor {floor_ms} ms")]
    UntilBelowFloor { until_ms: i64, floor_ms: i64 },
    #[error("the grant ends at {until_ms} ms, past the {limit_ms} ms that was asked for (the later of the floor and this server's present, plus the grant)")]
    UntilBeyondAsked { until_ms: i64, limit_ms: u64 },
}

/// A claim's answer, checked: the node id fits the layout (and is the one
/// configured), the floor is -1 or a time of the layout, and the grant ends
/// at or above the floor and no later than the registry's rule allows
/// (`max(floor, holder_now) + grant_ms`: a registry caps it lower, never
/// higher).
pub fn check_claim_answer(
    asked: &Asked,
    node_id: i64,
    claim_id: i64,
    floor_ms: i64,
    until_ms: i64,
) -> Result<Grant, AnswerError> {
    let node = u64::try_from(node_id)
        .ok()
        .filter(|n| *n <= asked.max_node)
        .ok_or(AnswerError::NodeOutOfRange {
            node_id,
            max_node: asked.max_node,
        })?;
    if let Some(wanted) = asked.node_id {
        if wanted != node {
            return Err(AnswerError::NotTheNodeAsked {
                asked: wanted,
                got: node_id,
            });
        }
    }
    if claim_id < 1 {
        return Err(AnswerError::BadClaimId(claim_id));
    }
    if floor_ms < -1 || floor_ms as i128 > asked.max_time_ms as i128 {
        return Err(AnswerError::FloorOutOfRange {
            floor_ms,
            max_time_ms: asked.max_time_ms,
        });
    }
    if until_ms < floor_ms || until_ms < 0 {
        return Err(AnswerError::UntilBelowFloor { until_ms, floor_ms });
    }
    let limit_ms = asked.limit_ms(floor_ms);
    if until_ms as u64 > limit_ms {
        return Err(AnswerError::UntilBeyondAsked { until_ms, limit_ms });
    }
    Ok(Grant {
        node_id: node,
        claim_id,
        floor_ms,
        until_ms: until_ms as u64,
    })
}

/// A renewal's answer (the grant's new end), checked against the grant held
/// and what was asked: at most `max(held end, max(floor, holder_now) +
/// grant_ms)`. Below the held end is possible and harmless (0 after a
/// fence: nothing is raised), but never negative.
pub fn check_renewal_answer(
    held: &Grant,
    asked: &Asked,
    until_ms: i64,
) -> Result<u64, AnswerError> {
    if until_ms < 0 {
        return Err(AnswerError::UntilBelowFloor {
            until_ms,
            floor_ms: held.floor_ms,
        });
    }
    let limit_ms = held.until_ms.max(asked.limit_ms(held.floor_ms));
    if until_ms as u64 > limit_ms {
        return Err(AnswerError::UntilBeyondAsked { until_ms, limit_ms });
    }
    Ok(until_ms as u64)
}

/// The fence: the lease to write when IDs up to `needed_ms` must be covered
/// and the generator would like `target_ms` (a window more), given a grant
/// ending at `until_ms`. Never beyond the grant; an error when even what is
/// needed lies beyond it.
pub fn lease_within_grant(
    needed_ms: u64,
    target_ms: u64,
    until_ms: u64,
) -> Result<u64, GrantError> {
    if needed_ms > until_ms {
        return Err(GrantError::Exhausted {
            needed_ms,
            until_ms,
        });
    }
    Ok(target_ms.max(needed_ms).min(until_ms))
}

/// The floor: the first millisecond this holder may issue in.
pub fn first_ms_above(floor_ms: i64) -> u64 {
    floor_ms.saturating_add(1).max(0) as u64
}

/// The pair the generator is raised to for a claim with floor `floor_ms`,
/// so that its next ID lies above the floor: the last pair of the floor's
/// millisecond, or the layout's last pair when the floor is at the end of
/// the time field (then no ID can be issued under the node id, and the
/// generator says the time field is used up). Never a pair of the floor's
/// own millisecond or below: the previous holder may have issued there.
pub fn pair_below_floor(layout: &IdLayout, floor_ms: i64) -> u64 {
    let first = first_ms_above(floor_ms);
    if first > layout.max_time_ms() {
        layout.max_pair()
    } else {
        layout.pair(first, 0).saturating_sub(1)
    }
}

/// How long (ms) a new holder must wait before its first ID, with the clock
/// at `now_ms` (ms since the epoch): IDs above the floor may run ahead of
/// the clock by the drift limit, no more. Zero when it may issue now, and
/// zero when no millisecond of the layout is left above the floor: waiting
/// would not help, and the generator (raised to its last pair by
/// [`pair_below_floor`]) refuses every ID with "the time field is used up".
pub fn wait_for_floor_ms(layout: &IdLayout, floor_ms: i64, now_ms: i64, max_drift_ms: u64) -> u64 {
    let first = first_ms_above(floor_ms);
    if first > layout.max_time_ms() {
        return 0;
    }
    (first as i128 - max_drift_ms as i128 - now_ms as i128).clamp(0, u64::MAX as i128) as u64
}

/// Whether the holder should renew now: when less than the grant minus one
/// renewal interval is left ahead of `time_ms` (the later of the clock and
/// the generator's last ID).
pub fn renewal_due(until_ms: u64, time_ms: u64, grant_ms: u64) -> bool {
    until_ms.saturating_sub(time_ms) < grant_ms.saturating_sub(renew_every_ms(grant_ms))
}

/// How long a failed registry call waits before the next try (ms):
/// doubling from a quarter second up to the renewal interval, at most 5 s.
pub fn retry_after_ms(failures: u32, grant_ms: u64) -> u64 {
    let cap = renew_every_ms(grant_ms).min(5_000);
    (250u64 << failures.min(10)).min(cap).max(100)
}

/// A wait spread over three quarters to five quarters of `ms`, by `unit`
/// (a random number in [0, 1)): after a partition or an outage of the
/// registry, the fleet's servers come back at different moments instead of
/// all at once.
pub fn jittered_ms(ms: u64, unit: f64) -> u64 {
    let unit = if unit.is_finite() {
        unit.clamp(0.0, 1.0)
    } else {
        0.5
    };
    ((ms as f64) * (0.75 + unit / 2.0)).round() as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    #[test]
    fn fence_never_passes_the_grant() {
        assert_eq!(lease_within_grant(100, 300, 1000), Ok(300));
        assert_eq!(lease_within_grant(100, 3000, 1000), Ok(1000));
        assert_eq!(lease_within_grant(1000, 1200, 1000), Ok(1000));
        assert_eq!(
            lease_within_grant(1001, 1200, 1000),
            Err(GrantError::Exhausted {
                needed_ms: 1001,
                until_ms: 1000
            })
        );
    }

    #[test]
    fn a_range_must_lie_inside_the_grant_in_force() {
        assert_eq!(range_within_grant(101, 200, 100, 1000), Ok(()));
        assert_eq!(range_within_grant(0, 1000, -1, 1000), Ok(()));
        assert_eq!(
            range_within_grant(100, 200, 100, 1000),
            Err(GrantError::BelowFloor {
                from_ms: 100,
                floor_ms: 100
            })
        );
        assert_eq!(
            range_within_grant(101, 1001, 100, 1000),
            Err(GrantError::Exhausted {
                needed_ms: 1001,
                until_ms: 1000
            })
        );
    }

    #[test]
    fn floor_and_waiting() {
        assert_eq!(first_ms_above(-1), 0);
        assert_eq!(first_ms_above(41), 42);
        let l = IdLayout::new(10, 12).unwrap();
        // Within the drift limit: no wait.
        assert_eq!(wait_for_floor_ms(&l, 10_000, 6_000, 5_000), 0);
        assert_eq!(wait_for_floor_ms(&l, 10_000, 4_000, 5_000), 1_001);
        assert_eq!(wait_for_floor_ms(&l, -1, -5, 0), 5);
    }

    #[test]
    fn no_wait_for_a_floor_at_the_end_of_the_time_field() {
        // A floor at the field's last millisecond leaves nothing to wait
        // for: the generator refuses at once that the field is used up,
        // however far the clock is from the end (before: a wait of up to
        // the grant, then that refusal).
        let l = IdLayout::new(0, 28).unwrap(); // 35 time bits
        let end = l.max_time_ms() as i64;
        assert_eq!(wait_for_floor_ms(&l, end, 0, 1_000), 0);
        assert_eq!(wait_for_floor_ms(&l, end, end - 40_000, 0), 0);
        assert_eq!(wait_for_floor_ms(&l, i64::MAX, 0, 0), 0);
        // One millisecond before it: that millisecond is still to come.
        assert_eq!(wait_for_floor_ms(&l, end - 1, end - 5_000, 1_000), 4_000);
    }

    fn asked(node_id: Option<u64>) -> Asked {
        Asked {
            node_id,
            holder_now_ms: 10_000,
            grant_ms: 3_000,
            max_node: 1023,
            max_time_ms: (1 << 41) - 1,
        }
    }

    #[test]
    fn claim_answers_that_cannot_be_right_are_refused() {
        let a = asked(None);
        let good = check_claim_answer(&a, 5, 7, 9_000, 13_000);
        assert_eq!(
            good,
            Ok(Grant {
                node_id: 5,
                claim_id: 7,
                floor_ms: 9_000,
                until_ms: 13_000
            })
        );
        // A floor ahead of the present: the grant may reach past it.
        assert!(check_claim_answer(&a, 5, 7, 20_000, 23_000).is_ok());
        // A fresh node id: floor -1, and a grant capped below the asked one.
        assert!(check_claim_answer(&a, 0, 1, -1, 10_500).is_ok());
        // The answer of a wrong function, proxy or attacker: node 0, floor
        // -1, an endless grant; out-of-range node ids; nonsense.
        assert!(matches!(
            check_claim_answer(&a, 0, 1, -1, i64::MAX),
            Err(AnswerError::UntilBeyondAsked { .. })
        ));
        assert!(matches!(
            check_claim_answer(&a, 1024, 1, -1, 12_000),
            Err(AnswerError::NodeOutOfRange { .. })
        ));
        assert!(matches!(
            check_claim_answer(&a, -1, 1, -1, 12_000),
            Err(AnswerError::NodeOutOfRange { .. })
        ));
        assert!(matches!(
            check_claim_answer(&asked(Some(6)), 5, 1, -1, 12_000),
            Err(AnswerError::NotTheNodeAsked { asked: 6, got: 5 })
        ));
        assert_eq!(
            check_claim_answer(&a, 5, 0, -1, 12_000),
            Err(AnswerError::BadClaimId(0))
        );
        assert!(matches!(
            check_claim_answer(&a, 5, 1, -2, 12_000),
            Err(AnswerError::FloorOutOfRange { .. })
        ));
        assert!(matches!(
            check_claim_answer(&a, 5, 1, i64::MAX, i64::MAX),
            Err(AnswerError::FloorOutOfRange { .. })
        ));
        assert!(matches!(
            check_claim_answer(&a, 5, 1, 9_000, 8_999),
            Err(AnswerError::UntilBelowFloor { .. })
        ));
        assert!(matches!(
            check_claim_answer(&a, 5, 1, -1, -1),
            Err(AnswerError::UntilBelowFloor { .. })
        ));
    }

    #[test]
    fn renewal_answers_that_cannot_be_right_are_refused() {
        let held = Grant {
            node_id: 5,
            claim_id: 7,
            floor_ms: 9_000,
            until_ms: 13_000,
        };
        let a = asked(None);
        assert_eq!(check_renewal_answer(&held, &a, 13_000), Ok(13_000));
        // After a fence: 0, nothing raised.
        assert_eq!(check_renewal_answer(&held, &a, 0), Ok(0));
        assert!(matches!(
            check_renewal_answer(&held, &a, 13_001),
            Err(AnswerError::UntilBeyondAsked {
                limit_ms: 13_000,
                ..
            })
        ));
        assert!(check_renewal_answer(&held, &a, -5).is_err());
        // A held end past the asked one (an earlier, longer grant) stays
        // acceptable.
        let long = Grant {
            until_ms: 50_000,
            ..held
        };
        assert_eq!(check_renewal_answer(&long, &a, 50_000), Ok(50_000));
    }

    #[test]
    fn the_generator_is_raised_above_the_floor_even_at_the_end_of_the_time_field() {
        let l = IdLayout::new(0, 28).unwrap(); // 35 time bits
        let end = l.max_time_ms() as i64;
        assert_eq!(pair_below_floor(&l, -1), 0);
        assert_eq!(pair_below_floor(&l, 41), l.pair(42, 0) - 1);
        assert_eq!(pair_below_floor(&l, end - 1), l.pair(end as u64, 0) - 1);
        // A floor at the field's last millisecond (the previous holder was
        // granted up to it): nothing is left, not that millisecond again
        // (before: raised to the pair before (end, 0), and the next ID
        // repeated the previous holder's last millisecond).
        assert_eq!(pair_below_floor(&l, end), l.max_pair());
        assert!(l.pair_time(pair_below_floor(&l, end)) as i64 >= end);
        assert_eq!(pair_below_floor(&l, i64::MAX), l.max_pair());
    }

    #[test]
    fn floor_arithmetic_saturates() {
        assert_eq!(first_ms_above(i64::MAX), i64::MAX as u64);
        let l = IdLayout::new(10, 12).unwrap();
        let end = l.max_time_ms() as i64;
        assert_eq!(
            wait_for_floor_ms(&l, end - 1, i64::MIN, 0),
            (end as i128 - i64::MIN as i128) as u64
        );
        assert_eq!(wait_for_floor_ms(&l, i64::MIN, i64::MAX, u64::MAX), 0);
    }

    #[test]
    fn retries_are_spread_out() {
        assert_eq!(jittered_ms(1_000, 0.0), 750);
        assert_eq!(jittered_ms(1_000, 0.5), 1_000);
        assert_eq!(jittered_ms(1_000, 0.999_999), 1_250);
        assert_eq!(jittered_ms(1_000, f64::NAN), 1_000);
        assert_eq!(jittered_ms(1_000, 7.0), 1_250);
        // A fleet of 100 retrying at once spreads over the whole range.
        let waits: std::collections::BTreeSet<u64> = (0..100)
            .map(|i| jittered_ms(4_000, i as f64 / 100.0))
            .collect();
        assert_eq!(waits.len(), 100);
        assert!(*waits.first().unwrap() == 3_000 && *waits.last().unwrap() >= 4_950);
    }

    #[test]
    fn renewals_and_retries() {
        assert_eq!(renew_every_ms(30_000), 5_000);
        assert_eq!(renew_every_ms(60), 100);
        // A fresh grant is not due; one a renewal interval old is.
        assert!(!renewal_due(40_000, 10_000, 30_000));
        assert!(renewal_due(34_999, 10_000, 30_000));
        assert!(renewal_due(5, 10_000, 30_000));
        assert_eq!(retry_after_ms(0, 30_000), 250);
        assert_eq!(retry_after_ms(1, 30_000), 500);
        assert_eq!(retry_after_ms(9, 30_000), 5_000);
        assert_eq!(retry_after_ms(40, 600), 100);
    }

    // ---- A model of registry/snowflake_registry.sql, for the properties.

    #[derive(Clone, Debug)]
    struct Row {
        claim_id: i64,
        identity: u32,
        floor_ms: i64,
        until_ms: u64,
        max_until_ms: i64,
        released: bool,
        /// Ended by a fence (not released nor taken over): resumable.
        fenced: bool,
    }

    /// The registry's rules, each of which a test can take out to see the
    /// properties fail without it.
    #[derive(Clone, Copy, Debug)]
    struct Rules {
        /// A restored registry fences.
        fence: bool,
        /// resume() asks for a grant that has not ended.
        resume_checks_grant_end: bool,
        /// The rule before: a claim by a server of the same identity took
        /// a live claim over (its restart, or a copy).
        takes_live_claims_of_same_identity: bool,
        /// A holder whose claim is lost claims its node id again by itself
        /// (the server's side: the registry worker).
        claims_again: bool,
        /// The fence also reaches a fleet the restored registry does not
        /// know (a backup taken before its first claim): its first claim
        /// starts above it (`incarnation.fenced_until_unix_ms`).
        fence_reaches_unknown_fleets: bool,
    }

    const RULES: Rules = Rules {
        fence: true,
        resume_checks_grant_end: true,
        takes_live_claims_of_same_identity: false,
        claims_again: true,
        fence_reaches_unknown_fleets: true,
    };

    /// The registry's rules (claim, renew, release, the fence after a
    /// restore), with its own clock.
    #[derive(Clone)]
    struct ModelRegistry {
        rows: HashMap<u64, Row>,
        next_claim: i64,
        nodes: u64,
        max_grant_ms: u64,
        /// Every floor is at least this (the fence after a restore).
        fence_ms: i64,
        /// Whether the fleet exists in the registry (its first claim made
        /// it; a backup taken before that knows no fleet).
        known: bool,
        /// The fence for a fleet the registry does not know: its first
        /// claim starts above it.
        fenced_until: i64,
        rules: Rules,
    }

    #[derive(Debug, PartialEq)]
    enum Refused {
        Held,
        Full,
        Lost,
        /// Lost, ended by a fence: its holder may try to resume it.
        Fenced,
    }

    impl ModelRegistry {
        /// is_live(): the grant not ended, and not released (a claim a
        /// fence ended stands: its holder may resume it).
        fn live(row: &Row, now: i64) -> bool {
            row.until_ms as i64 >= now && (!row.released || row.fenced)
        }

        #[allow(clippy::too_many_arguments)]
        fn claim(
            &mut self,
            now: i64,
            _holder: u32,
            identity: u32,
            wanted: Option<u64>,
            preferred: Option<u64>,
            holder_now: i64,
            grant_ms: u64,
        ) -> Result<Grant, Refused> {
            if !self.known {
                // The fleet's first claim: above the last fence.
                self.known = true;
                self.fence_ms = self.fence_ms.max(self.fenced_until);
            }
            let chosen = match wanted {
                Some(n) => {
                    if let Some(r) = self.rows.get(&n) {
                        if Self::live(r, now)
                            && !(self.rules.takes_live_claims_of_same_identity
                                && r.identity == identity)
                        {
                            return Err(Refused::Held);
                        }
                    }
                    n
                }
                None => {
                    // The preferred id: free, or its lapsed grant was this
                    // identity's own (a copy elsewhere must not take the
                    // node id of an original that only missed renewals).
                    let pref = preferred.filter(|&p| {
                        p < self.nodes
                            && self.rows.get(&p).is_none_or(|r| {
                                (r.released && !r.fenced)
                                    || (!Self::live(r, now) && r.identity == identity)
                            })
                    });
                    let never = (0..self.nodes).find(|n| !self.rows.contains_key(n));
                    let ended = self
                        .rows
                        .iter()
                        .filter(|(_, r)| !Self::live(r, now))
                        .min_by_key(|(n, r)| (r.max_until_ms, **n))
                        .map(|(n, _)| *n);
                    pref.or(never).or(ended).ok_or(Refused::Full)?
                }
            };
            let floor = self
                .rows
                .get(&chosen)
                .map_or(-1, |r| r.max_until_ms)
                .max(self.fence_ms);
            // Never past the registry's clock plus max_grant_ms: the bound
            // the fence after a restore rests on.
            let until = (holder_now.max(floor) + grant_ms as i64)
                .min(now + self.max_grant_ms as i64)
                .max(floor)
                .max(0) as u64;
            self.next_claim += 1;
            let max_until = self
                .rows
                .get(&chosen)
                .map_or(until as i64, |r| r.max_until_ms.max(until as i64));
            self.rows.insert(
                chosen,
                Row {
                    claim_id: self.next_claim,
                    identity,
                    floor_ms: floor,
                    until_ms: until,
                    max_until_ms: max_until,
                    released: false,
                    fenced: false,
                },
            );
            Ok(Grant {
                node_id: chosen,
                claim_id: self.next_claim,
                floor_ms: floor,
                until_ms: until,
            })
        }

        fn renew(
            &mut self,
            now: i64,
            g: &Grant,
            holder_now: i64,
            grant_ms: u64,
        ) -> Result<u64, Refused> {
            let max_grant = self.max_grant_ms as i64;
            let r = self.rows.get_mut(&g.node_id).ok_or(Refused::Lost)?;
            if r.claim_id != g.claim_id || r.released {
                return Err(if r.claim_id == g.claim_id && r.fenced {
                    Refused::Fenced
                } else {
                    Refused::Lost
                });
            }
            let want = (holder_now.max(r.floor_ms) + grant_ms as i64)
                .min(now + max_grant)
                .max(0) as u64;
            r.until_ms = r.until_ms.max(want);
            r.max_until_ms = r.max_until_ms.max(r.until_ms as i64);
            Ok(r.until_ms)
        }

        /// A restored registry: no grant it lost ends past its clock plus
        /// max_grant_ms, so every later floor starts there, and every claim
        /// it still knows ends (a lost history may have passed it on).
        fn fence(&mut self, now: i64) {
            let reach = now + self.max_grant_ms as i64;
            if self.rules.fence_reaches_unknown_fleets {
                self.fenced_until = self.fenced_until.max(reach);
            }
            if !self.known {
                // (The SQL's loop over the fleets it knows.)
                return;
            }
            self.fence_ms = self.fence_ms.max(reach);
            for r in self.rows.values_mut() {
                if !r.released {
                    r.released = true;
                    r.fenced = true;
                }
            }
        }

        /// `snowflake_registry.resume`: the holder of a claim a fence ended
        /// continues it, reporting the grant it holds.
        fn resume(
            &mut self,
            now: i64,
            g: &Grant,
            held_until: u64,
            holder_now: i64,
            grant_ms: u64,
        ) -> Result<u64, Refused> {
            let max_grant = self.max_grant_ms as i64;
            let rules = self.rules;
            let r = self.rows.get_mut(&g.node_id).ok_or(Refused::Lost)?;
            if r.claim_id != g.claim_id || (r.released && !r.fenced) {
                return Err(Refused::Lost);
            }
            if rules.resume_checks_grant_end && !may_resume(r.until_ms.max(held_until) as i64, now)
            {
                return Err(Refused::Lost);
            }
            if held_until as i64 > now + max_grant + 1000 {
                return Err(Refused::Lost);
            }
            let want = (holder_now.max(r.floor_ms) + grant_ms as i64)
                .min(now + max_grant)
                .max(0) as u64;
            r.until_ms = r.until_ms.max(held_until).max(want);
            r.max_until_ms = r.max_until_ms.max(r.until_ms as i64);
            r.released = false;
            r.fenced = false;
            Ok(r.until_ms)
        }

        fn release(&mut self, g: &Grant, issued_until: u64) {
            if let Some(r) = self.rows.get_mut(&g.node_id) {
                if r.claim_id == g.claim_id && !r.released {
                    let issued = (issued_until as i64).max(r.floor_ms).min(r.until_ms as i64);
                    r.until_ms = issued.max(0) as u64;
                    r.max_until_ms = r.floor_ms.max(issued);
                    r.released = true;
                    r.fenced = false;
                }
            }
        }
    }

    /// What a server of the model asks for: the bounds of a true answer.
    fn model_asked(fixed: Option<u64>, holder_now: i64, grant_ms: u64, nodes: u64) -> Asked {
        Asked {
            node_id: fixed,
            holder_now_ms: holder_now.max(0) as u64,
            grant_ms,
            max_node: nodes - 1,
            max_time_ms: i64::MAX as u64 >> 22,
        }
    }

    /// One server's life: its claim, and the generator's last millisecond.
    struct Server {
        identity: u32,
        /// Its clock minus the registry's.
        skew: i64,
        fixed: Option<u64>,
        preferred: Option<u64>,
        grant: Option<Grant>,
        last_ms: Option<u64>,
        paused: bool,
        lifetime: u32,
    }

    /// What happens next in a simulated fleet.
    #[derive(Debug, Clone)]
    enum Step {
        Tick(u16),
        Start(u8),
        Issue(u8),
        Renew(u8),
        Pause(u8),
        Resume(u8),
        Crash(u8),
        Stop(u8),
        /// A copy of server `.0`'s data directory starts as a new server
        /// that looks the same (its identity and preferred id).
        Copy(u8),
        RegistryDown(bool),
        /// A backup of the registry is taken.
        Backup,
        /// The registry is restored from the last backup (if any).
        Restore,
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            4 => (1u16..3000).prop_map(Step::Tick),
            2 => any::<u8>().prop_map(Step::Start),
            8 => any::<u8>().prop_map(Step::Issue),
            3 => any::<u8>().prop_map(Step::Renew),
            1 => any::<u8>().prop_map(Step::Pause),
            1 => any::<u8>().prop_map(Step::Resume),
            1 => any::<u8>().prop_map(Step::Crash),
            1 => any::<u8>().prop_map(Step::Stop),
            1 => any::<u8>().prop_map(Step::Copy),
            1 => any::<bool>().prop_map(Step::RegistryDown),
            1 => Just(Step::Backup),
            1 => Just(Step::Restore),
        ]
    }

    /// Runs a fleet through `steps` and returns every issued
    /// `(node id, millisecond)` with the server lifetime that issued it.
    /// Each issue takes a whole millisecond, so two lifetimes issuing the
    /// same pair is the duplicate the registry must make impossible.
    /// `fence`: whether a restored registry fences (false: the guard
    /// removed, to see the properties fail without it).
    fn run(
        steps: &[Step],
        skews: &[i64],
        fixed: bool,
        grant_ms: u64,
        rules: Rules,
    ) -> Result<(), String> {
        let mut reg = ModelRegistry {
            rules,
            ..model_registry()
        };
        let mut backup: Option<ModelRegistry> = None;
        let mut now: i64 = 1_000_000;
        let mut registry_up = true;
        let mut servers: Vec<Server> = skews
            .iter()
            .enumerate()
            .map(|(i, &skew)| Server {
                identity: i as u32,
                skew,
                fixed: fixed.then_some(i as u64 % 4),
                preferred: None,
                grant: None,
                last_ms: None,
                paused: false,
                lifetime: i as u32,
            })
            .collect();
        let mut next_lifetime = servers.len() as u32;
        let mut issued: HashMap<(u64, u64), u32> = HashMap::new();
        for s in steps {
            let n = servers.len();
            let pick = |i: &u8| *i as usize % n;
            match s {
                Step::Tick(ms) => now += *ms as i64,
                Step::RegistryDown(down) => registry_up = !down,
                Step::Backup => backup = Some(reg.clone()),
                Step::Restore => {
                    if let Some(b) = &backup {
                        // Claim ids are not restored in effect: each claim
                        // has a fresh random token the restore cannot bring
                        // back.
                        let next_claim = reg.next_claim;
                        reg = b.clone();
                        reg.next_claim = next_claim;
                        if rules.fence {
                            reg.fence(now);
                        }
                    }
                }
                Step::Start(i) => {
                    let s = &mut servers[pick(i)];
                    if s.grant.is_none() && !s.paused && registry_up {
                        let clock = now + s.skew;
                        let holder_now = clock.max(s.last_ms.map_or(0, |m| m as i64));
                        if let Ok(g) = reg.claim(
                            now,
                            s.lifetime,
                            s.identity,
                            s.fixed,
                            s.preferred,
                            holder_now,
                            grant_ms,
                        ) {
                            // Every true answer passes the holder's checks.
                            let asked = model_asked(s.fixed, holder_now, grant_ms, reg.nodes);
                            let checked = check_claim_answer(
                                &asked,
                                g.node_id as i64,
                                g.claim_id,
                                g.floor_ms,
                                g.until_ms as i64,
                            );
                            assert_eq!(checked, Ok(g), "a true claim's answer refused");
                            s.preferred = Some(g.node_id);
                            s.grant = Some(g);
                            // The floor (lease file and grant alike).
                            let floor = first_ms_above(g.floor_ms);
                            s.last_ms = Some(s.last_ms.map_or(floor, |m| m.max(floor)));
                        }
                    }
                }
                Step::Issue(i) => {
                    let s = &mut servers[pick(i)];
                    let (Some(g), false) = (s.grant, s.paused) else {
                        continue;
                    };
                    let clock = (now + s.skew).max(0) as u64;
                    // One whole millisecond per ID: after the last one,
                    // not before the clock (drift is not modelled: it only
                    // makes a holder wait, never issue more).
                    let t = s.last_ms.map_or(clock, |m| (m + 1).max(clock));
                    if t < first_ms_above(g.floor_ms) {
                        return Err(format!("issued below the floor: {t} <= {}", g.floor_ms));
                    }
                    if lease_within_grant(t, t, g.until_ms).is_err() {
                        continue;
                    }
                    if let Some(other) = issued.insert((g.node_id, t), s.lifetime) {
                        return Err(format!(
                            "node {} ms {t} issued by lifetimes {other} and {}",
                            g.node_id, s.lifetime
                        ));
                    }
                    s.last_ms = Some(t);
                }
                Step::Renew(i) => {
                    let s = &mut servers[pick(i)];
                    let (Some(g), false, true) = (s.grant, s.paused, registry_up) else {
                        continue;
                    };
                    let holder_now = (now + s.skew).max(s.last_ms.map_or(0, |m| m as i64));
                    // Ended by a fence: it asks to resume, reporting its
                    // grant. Lost otherwise: it claims the node id again.
                    let answer = match reg.renew(now, &g, holder_now, grant_ms) {
                        Err(Refused::Fenced) => {
                            reg.resume(now, &g, g.until_ms, holder_now, grant_ms)
                        }
                        answer => answer,
                    };
                    match answer {
                        Ok(until) => {
                            let asked = model_asked(s.fixed, holder_now, grant_ms, reg.nodes);
                            assert_eq!(
                                check_renewal_answer(&g, &asked, until as i64),
                                Ok(until),
                                "a true renewal's answer refused"
                            );
                            s.grant = Some(Grant {
                                until_ms: until,
                                ..g
                            });
                        }
                        // Not resumed (taken over, forgotten, or its grant
                        // ended): the same node id claimed again, in the
                        // same lifetime (its backends may pair the node id
                        // with the next ID), used only above the grant it
                        // held (`uncovered_reclaim`). Refused (held by
                        // another), it keeps its old grant, and asks again
                        // at its next renewal.
                        Err(_) if rules.claims_again => {
                            if let Ok(again) = reg.claim(
                                now,
                                s.lifetime,
                                s.identity,
                                Some(g.node_id),
                                s.preferred,
                                holder_now,
                                grant_ms,
                            ) {
                                if again.floor_ms >= g.until_ms as i64 {
                                    let floor = first_ms_above(again.floor_ms);
                                    s.last_ms = Some(s.last_ms.map_or(floor, |m| m.max(floor)));
                                    s.grant = Some(again);
                                }
                            }
                        }
                        Err(_) => {}
                    }
                }
                Step::Pause(i) => servers[pick(i)].paused = true,
                Step::Resume(i) => servers[pick(i)].paused = false,
                Step::Crash(i) => {
                    // Restarts with its data directory: the lease file
                    // keeps last_ms; the claim is gone from memory.
                    let s = &mut servers[pick(i)];
                    s.grant = None;
                    s.paused = false;
                    s.lifetime = next_lifetime;
                    next_lifetime += 1;
                }
                Step::Stop(i) => {
                    let s = &mut servers[pick(i)];
                    if let (Some(g), true) = (s.grant, registry_up) {
                        if !s.paused {
                            // Release what it really issued.
                            reg.release(&g, s.last_ms.unwrap_or(0));
                            s.grant = None;
                            s.lifetime = next_lifetime;
                            next_lifetime += 1;
                        }
                    }
                }
                Step::Copy(i) => {
                    let src = &servers[pick(i)];
                    let copy = Server {
                        identity: src.identity,
                        skew: src.skew,
                        fixed: src.fixed,
                        preferred: src.preferred,
                        grant: None,
                        last_ms: src.last_ms,
                        paused: false,
                        lifetime: next_lifetime,
                    };
                    next_lifetime += 1;
                    if servers.len() < 12 {
                        servers.push(copy);
                    }
                }
            }
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]

        /// Whatever the clocks (skewed by up to a minute either way),
        /// pauses, crashes, copies, registry outages and restores of the
        /// registry from a backup: no node id and millisecond is issued by
        /// two server lifetimes.
        #[test]
        fn no_two_lifetimes_issue_the_same_id(
            steps in prop::collection::vec(step(), 1..400),
            skews in prop::collection::vec(-60_000i64..60_000, 2..6),
            fixed in any::<bool>(),
            grant_ms in prop::sample::select(vec![600u64, 5_000, 30_000]),
        ) {
            run(&steps, &skews, fixed, grant_ms, RULES).map_err(TestCaseError::fail)?;
        }
    }

    /// The fence and the floor are both needed: a holder paused past the
    /// reclaim resumes and issues within its grant only, above which the
    /// new holder starts.
    #[test]
    fn paused_holder_and_its_successor_stay_apart() {
        let steps = [
            Step::Start(0),
            Step::Issue(0),
            Step::Pause(0),
            Step::Tick(2_000),
            Step::Tick(2_000),
            Step::Start(1),
            Step::Issue(1),
            Step::Resume(0),
            Step::Issue(0),
            Step::Issue(1),
            Step::Issue(0),
        ];
        // Servers 0 and 4 are both fixed on node 0 (4 nodes).
        let steps: Vec<Step> = steps
            .into_iter()
            .map(|s| match s {
                Step::Start(1) => Step::Start(4),
                Step::Issue(1) => Step::Issue(4),
                s => s,
            })
            .collect();
        run(&steps, &[0, 0, 0, 0, 0], true, 600, RULES).unwrap();
        // The same in the registry's terms: 1 takes over 0's stale claim.
        let mut reg = model_registry();
        let a = reg.claim(0, 0, 0, Some(0), None, 0, 600).unwrap();
        assert_eq!(
            reg.claim(10, 1, 1, Some(0), None, 10, 600),
            Err(Refused::Held)
        );
        let b = reg.claim(2_000, 1, 1, Some(0), None, 2_000, 600).unwrap();
        assert_eq!(b.floor_ms, a.until_ms as i64);
        assert_eq!(reg.renew(2_001, &a, 2_001, 600), Err(Refused::Lost));
        // The full pool.
        for i in 0..3 {
            reg.claim(2_000, 10 + i, 10 + i, None, None, 2_000, 600)
                .unwrap();
        }
        assert_eq!(
            reg.claim(2_000, 20, 20, None, None, 2_000, 600),
            Err(Refused::Full)
        );
        // A release hands the id on with the floor at what was issued.
        reg.release(&b, 2_100);
        let c = reg.claim(2_200, 21, 21, None, None, 2_200, 600).unwrap();
        assert_eq!((c.node_id, c.floor_ms), (0, 2_100));
    }

    /// A holder whose node id was taken over (it was paused past its
    /// grant) claims it again by itself: refused while the successor holds
    /// it, taken back above the successor's IDs once it is free. Whatever
    /// the fleet does, the property test above runs with this.
    #[test]
    fn a_lost_claim_is_claimed_again_once_its_node_id_is_free() {
        let steps = [
            Step::Start(0),
            Step::Issue(0),
            Step::Pause(0),
            Step::Tick(2_000),
            Step::Start(4),
            Step::Issue(4),
            Step::Resume(0),
            Step::Renew(0),
            Step::Issue(0),
            Step::Issue(4),
            Step::Stop(4),
            Step::Renew(0),
            Step::Issue(0),
            Step::Issue(0),
        ];
        run(&steps, &[0, 0, 0, 0, 0], true, 600, RULES).unwrap();
        let mut reg = model_registry();
        let a = reg.claim(0, 0, 0, Some(0), None, 0, 600).unwrap();
        let b = reg.claim(2_000, 1, 1, Some(0), None, 2_000, 600).unwrap();
        assert_eq!(reg.renew(2_001, &a, 2_001, 600), Err(Refused::Lost));
        assert_eq!(
            reg.claim(2_001, 0, 0, Some(0), None, 2_001, 600),
            Err(Refused::Held)
        );
        reg.release(&b, 2_300);
        let again = reg.claim(2_400, 0, 0, Some(0), None, 2_400, 600).unwrap();
        assert_eq!((again.node_id, again.floor_ms), (0, 2_300));
        assert!(again.floor_ms >= a.until_ms as i64);
    }

    /// The fleet under `rules` (one of the registry's rules taken out)
    /// issues an ID twice: the test sees the rule matter.
    fn repeats_ids(steps: &[Step], skews: &[i64], fixed: bool, rules: Rules) {
        let without = run(steps, skews, fixed, 5_000, rules);
        assert!(
            without
                .as_ref()
                .is_err_and(|e| e.contains("issued by lifetimes")),
            "{without:?}"
        );
    }

    fn model_registry() -> ModelRegistry {
        ModelRegistry {
            rows: HashMap::new(),
            next_claim: 0,
            nodes: 4,
            max_grant_ms: 3_600_000,
            fence_ms: -1,
            known: false,
            fenced_until: -1,
            rules: RULES,
        }
    }

    /// A registry restored from a backup taken before a claim: without the
    /// fence the claim's node id is free again, and its next holder issues
    /// the IDs the lost claim's holder issued; with it, above them.
    #[test]
    fn restored_registry_fences_every_node_id() {
        let steps = [
            Step::Backup,
            Step::Start(0),
            Step::Issue(0),
            Step::Issue(0),
            Step::Crash(0),
            Step::Restore,
            Step::Start(1),
            Step::Issue(1),
            Step::Issue(1),
        ];
        // Both auto: 1 gets node 0, which the restored registry never saw.
        let skews = [10_000, 10_000];
        assert!(run(&steps, &skews, false, 5_000, RULES).is_ok());
        repeats_ids(
            &steps,
            &skews,
            false,
            Rules {
                fence: false,
                ..RULES
            },
        );
        // The backup was taken before the fleet's first claim: a fence that
        // reaches only the fleets the registry knows (the script before)
        // fences nothing, and the IDs repeat.
        repeats_ids(
            &steps,
            &skews,
            false,
            Rules {
                fence_reaches_unknown_fleets: false,
                ..RULES
            },
        );
        // A holder whose claim the backup knew: its renewal is refused
        // after the restore (another server may have taken the id over in
        // the history the restore lost, as here), and so is its resumption:
        // its grant has ended.
        let mut reg = model_registry();
        let a = reg.claim(0, 0, 0, Some(1), None, 0, 600).unwrap();
        let backup = reg.clone();
        let b = reg.claim(2_000, 1, 1, Some(1), None, 2_000, 600).unwrap();
        assert!(b.floor_ms >= a.until_ms as i64);
        reg = backup;
        reg.fence(2_100);
        assert_eq!(reg.renew(2_100, &a, 2_100, 600), Err(Refused::Fenced));
        assert_eq!(
            reg.resume(2_100, &a, a.until_ms, 2_100, 600),
            Err(Refused::Lost)
        );
        let c = reg.claim(2_100, 2, 2, Some(1), None, 2_100, 600).unwrap();
        assert!(c.floor_ms >= b.until_ms as i64);
        assert!(c.until_ms as i64 >= c.floor_ms);
    }
    #[test]
    fn resume_needs_the_grant_not_ended() {
        assert!(may_resume(11_000, 10_000));
        assert!(!may_resume(10_999, 10_000));
        assert!(!may_resume(i64::MAX, i64::MAX));
        assert!(may_resume(i64::MAX, i64::MAX - 1_000));
    }

    /// A holder whose claim a fence ended resumes it while its grant
    /// runs: the same claim, no wait, and the node id's floors raised to
    /// the grant it reports (renewals the restore lost), so the next
    /// holder starts above it.
    #[test]
    fn a_fenced_claim_is_resumed_with_its_grant() {
        let mut reg = ModelRegistry {
            max_grant_ms: 10_000,
            ..model_registry()
        };
        let a = reg.claim(0, 0, 0, Some(1), None, 0, 5_000).unwrap();
        let backup = reg.clone();
        // Renewed after the backup: the restore loses it.
        let held = reg.renew(2_000, &a, 2_000, 5_000).unwrap();
        assert_eq!(held, 7_000);
        reg = backup;
        reg.fence(2_500);
        assert_eq!(reg.renew(2_500, &a, 2_500, 5_000), Err(Refused::Fenced));
        // Fenced, its grant not ended: no other server takes the node id.
        assert_eq!(
            reg.claim(2_500, 1, 1, Some(1), None, 2_500, 5_000),
            Err(Refused::Held)
        );
        // A wrong claim number: refused.
        let stranger = Grant { claim_id: 99, ..a };
        assert_eq!(
            reg.resume(2_500, &stranger, held, 2_500, 5_000),
            Err(Refused::Lost)
        );
        let until = reg.resume(2_500, &a, held, 2_500, 5_000).unwrap();
        assert!(until >= held);
        // Renewals go on as before; a clean release hands the id on (the
        // next floor at the fence, which lies above what was issued).
        assert_eq!(reg.renew(3_000, &a, 3_000, 5_000), Ok(8_000));
        reg.release(&a, 3_100);
        let b = reg.claim(3_200, 1, 1, Some(1), None, 3_200, 5_000).unwrap();
        assert_eq!(b.floor_ms, reg.fence_ms);
        // Released, not fenced: not resumable.
        assert_eq!(
            reg.resume(3_200, &a, 8_000, 3_200, 5_000),
            Err(Refused::Lost)
        );
        // A fenced claim whose grant has ended passes on.
        reg.fence(3_300);
        let c = reg
            .claim(20_000, 2, 2, Some(1), None, 20_000, 5_000)
            .unwrap();
        assert!(c.floor_ms >= 13_300 && c.floor_ms >= b.until_ms as i64);
        assert_eq!(
            reg.resume(20_000, &b, b.until_ms, 20_000, 5_000),
            Err(Refused::Lost)
        );
    }

    /// The history a restore lost held a takeover of a claim whose grant
    /// had ended (its holder paused): the holder, back, must not resume,
    /// or it issues beside the server that took its node id over. The
    /// rule: the grant must not have ended. Without it: IDs twice.
    #[test]
    fn resume_is_refused_once_the_grant_has_ended() {
        // Servers 0 and 4 are fixed on node 0; a grant of 5 s.
        let steps = [
            Step::Start(0),
            Step::Issue(0),
            Step::Backup,
            Step::Pause(0),
            Step::Tick(2_600),
            Step::Tick(2_600),
            Step::Start(4),
            Step::Tick(600),
            Step::Issue(4),
            Step::Restore,
            Step::Resume(0),
            Step::Renew(0),
            Step::Issue(0),
            Step::Issue(4),
            Step::Issue(0),
            Step::Issue(4),
        ];
        let skews = [0, 0, 0, 0, 0];
        assert!(run(&steps, &skews, true, 5_000, RULES).is_ok());
        repeats_ids(
            &steps,
            &skews,
            true,
            Rules {
                resume_checks_grant_end: false,
                ..RULES
            },
        );
    }

    /// The lost history held a takeover of a *live* claim by a copy of its
    /// holder's data directory (the same identity): the holder's grant has
    /// not ended, so that rule cannot tell. What makes resuming safe here
    /// is that no live claim is taken over, whoever asks (before, a claim
    /// of the same identity took it at once).
    #[test]
    fn no_live_claim_is_taken_over_so_a_resume_is_safe() {
        let steps = [
            Step::Start(0),
            Step::Backup,
            Step::Copy(0),
            // The copy (server 5, fixed on node 0 like its original).
            Step::Start(5),
            Step::Tick(100),
            Step::Restore,
            Step::Renew(0),
            Step::Tick(2_500),
            Step::Tick(2_450),
            Step::Issue(0),
            Step::Issue(5),
            Step::Issue(0),
            Step::Issue(5),
        ];
        let skews = [0, 0, 0, 0, 0];
        assert!(run(&steps, &skews, true, 5_000, RULES).is_ok());
        repeats_ids(
            &steps,
            &skews,
            true,
            Rules {
                takes_live_claims_of_same_identity: true,
                ..RULES
            },
        );
        // In the registry's terms: the copy is refused while its original's
        // grant runs, and takes the node id once it has ended.
        let mut reg = model_registry();
        let a = reg.claim(0, 0, 7, Some(2), None, 0, 600).unwrap();
        assert_eq!(
            reg.claim(50, 1, 7, Some(2), None, 50, 600),
            Err(Refused::Held)
        );
        let c = reg.claim(601, 1, 7, Some(2), None, 601, 600).unwrap();
        assert!(c.floor_ms >= a.until_ms as i64);
    }
}
