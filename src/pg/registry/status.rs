//! The claim as SQL shows it: its state, grant, last failure, counters and
//! connection in `snowflake_stats()`, and why it holds issuing (the
//! `registry_no_node_id` and `registry_lost` holds). Read-only: it looks
//! at the registry worker's [`super::ClaimState`] in shared memory.

use super::{claimed_node, enabled, no_node_error, shown_registry, state, strip_sqlstate, Phase};
use crate::core::config::Config;
use crate::core::conninfo::ConnectionTrust;
use crate::pg::errors::Held;
use std::sync::atomic::Ordering;

/// Where the claim stands, for `snowflake_stats()` (`None` without a
/// registry).
pub struct ClaimStatus {
    /// [`Phase::name`].
    pub state: &'static str,
    /// The grant's end (ms since the epoch), once a claim succeeded.
    pub until_ms: Option<u64>,
    /// The last failure, or what the claim waits for; `None` while the
    /// claim is held and the last call succeeded.
    pub message: Option<String>,
    /// How many times the registry worker ended while the server ran (and
    /// was started again).
    pub worker_exits: u32,
    /// How many times a claim a fence ended was resumed.
    pub resumes: u32,
    /// The last registry connection's trust, once one was opened.
    pub connection: Option<ConnectionTrust>,
}

pub fn claim_status() -> Option<ClaimStatus> {
    if !enabled() {
        return None;
    }
    let state = state()?;
    let phase = state.phase();
    let until = state.until_ms();
    let quiet = phase == Phase::Held && !state.failing.load(Ordering::Acquire);
    Some(ClaimStatus {
        state: phase.name(),
        until_ms: (until > 0).then_some(until),
        message: (!quiet)
            .then(|| strip_sqlstate(&state.message()).to_string())
            .filter(|m| !m.is_empty()),
        worker_exits: state.worker_exits.load(Ordering::Acquire),
        resumes: state.resumes.load(Ordering::Acquire),
        connection: ConnectionTrust::from_code(state.connection.load(Ordering::Acquire)),
    })
}

/// Registry mode: why this server cannot issue now, as `snowflake_stats()`
/// shows it: no node id claimed (with the error `snowflake_next()`
/// raises), or the claim ended by the registry (issuing ends with the
/// grant, and starts again once the registry worker has resumed it or
/// claimed the node id anew).
pub fn hold(config: &Config) -> Option<(Held, String)> {
    let state = state()?;
    let phase = state.phase();
    if phase == Phase::Lost {
        let until = crate::pg::clock::timestamp_of(config, state.until_ms());
        let why = strip_sqlstate(&state.message()).to_string();
        let until_when = if state.reclaim.load(Ordering::Acquire) {
            "until the registry worker claims it again (after a takeover: once the other server no longer holds it)"
        } else {
            "until the registry is fenced and this server restarted"
        };
        return Some((
            Held::RegistryLost,
            format!(
                "the registry ({}) ended this server's claim: IDs are issued up to the grant's end at {until}, then refused {until_when}{}",
                shown_registry(),
                if why.is_empty() { String::new() } else { format!(" ({why})") }
            ),
        ));
    }
    claimed_node()
        .is_none()
        .then(|| (Held::RegistryNoNodeId, no_node_error(state, phase).text()))
}
