//! The registry worker ("snowflake_id registry", a background worker of its
//! own, started only with `snowflake_id.registry` set): claim a node id at
//! start, renew the grant ahead of need, release it at a clean shutdown. It
//! is apart from the lease worker so that a registry that answers slowly,
//! or a connection that hangs (DNS, a half-open socket), never delays a
//! lease extension: backends, and with `lease_sync = on` the lease worker,
//! extend the lease within the grant whatever the registry does.
//!
//! Terminated alone while the server runs, it exits to be started again
//! and the new one resumes the claim from shared memory ([`ClaimWorker::new`]).
//!
//! The claim is made once per server lifetime (a new random secret each
//! time: a restarted server, or a copy, cannot prove it is the one that
//! held the node id before, so it never continues an old claim); its
//! calls are signed with the key its answer carried (`signing.rs`). Before
//! the node id is published for backends the generator is raised above the
//! claim's floor and its lease cut down to the grant; if the floor lies
//! further ahead of the clock than `snowflake_id.max_clock_drift`, the node
//! id is published when the clock comes near it (a fixed node id taken over
//! from a holder that crashed: its grant, at most `registry_grant`, is the
//! wait). A server with no fixed node id is offered the one its data
//! directory held last only when no one holds it, else a free one, so it
//! never waits.
//!
//! Renewals (`renewal.rs`, with the resumption of a claim a fence ended)
//! raise the grant to `registry_grant` past the generator's time
//! once a sixth of it has passed; failures are retried with a backoff and
//! leave the grant as it is, so a registry outage shorter than the grant
//! goes unnoticed by the backends. At a clean shutdown the grant is first
//! cut down to the durable lease (under the generator's lock, so no backend
//! can extend past it), then released at that bound: the next holder of the
//! node id need not wait.

use super::answer::{asked_of, failure_texts, holder_time_ms, older_script, uncovered_reclaim};
use super::identity::{host_name, last_claim, random_unit, NODE_FILE_NAME};
use super::libpq::{CallError, Connection, OnShutdown};
use super::{state, ClaimState, Phase, NONE};
use crate::core::call_proof::SignedCall;
use crate::core::config::Config;
use crate::core::conninfo::ConnectionTrust;
use crate::core::instance::write_marker;
use crate::core::node_marker::{uuid_text, NodeMarker};
use crate::core::registry::{
    jittered_ms, pair_below_floor, renewal_due, retry_after_ms, wait_for_floor_ms, Grant,
};
use crate::pg::bgworker;
use crate::pg::clock;
use crate::pg::settings::{self, data_dir};
use crate::pg::state::{self, Blocked, Shared};
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

const CLAIM_SQL: &str = "SELECT node_id, claim_id, floor_ms, until_ms, signing_key FROM snowflake_registry.claim_keyed($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)";
const RELEASE_SQL: &str = "SELECT snowflake_registry.release_signed($1, $2, $3, $4, $5, $6)";

/// How often the registry worker looks at the claim (renewals are due
/// every sixth of the grant, at least 100 ms; a waiting claim is published
/// when the clock comes near its floor).
const NAPTIME: Duration = Duration::from_millis(50);

/// Registers the registry worker (at start, with a registry).
pub fn register() {
    bgworker::register("snowflake_id registry", "snowflake_id_registry_worker_main");
}

#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn snowflake_id_registry_worker_main(_arg: pg_sys::Datum) {
    bgworker::start();
    let (Some(config), Some(shared)) = (settings::config(), state::shared()) else {
        return;
    };
    let mut claim = ClaimWorker::new();
    while !bgworker::shutdown_requested() {
        bgworker::reload_if_asked();
        claim.tick(config, shared);
        if bgworker::shutdown_requested() {
            break;
        }
        bgworker::nap(NAPTIME);
    }
    if !bgworker::server_stopping() {
        // Terminated alone: the claim stays for the worker PostgreSQL
        // starts again; backends issue within the grant meanwhile.
        claim.suspend();
        bgworker::exit_to_be_restarted("snowflake_id registry worker");
    }
    claim.release(config, shared);
}

/// The registry worker's side of the claim (process-local; what outlives the
/// process is in [`ClaimState`]).
pub struct ClaimWorker {
    pub(super) conn: Option<Connection>,
    /// The claim's signing key (from its answer; zeros before one).
    pub(super) key: [u8; 16],
    /// The secrets of the claims sent since the last answer: the next
    /// claim reveals them (a retry, answered as the one that was made).
    pub(super) unanswered: Vec<[u8; 16]>,
    pub(super) grant: Option<Grant>,
    /// A fence ended the claim and resuming it was not yet given up.
    pub(super) resuming: bool,
    pub(super) failures: u32,
    /// The grant the first unanswered claim asked for: a retry asks for
    /// the same, whatever `registry_grant` says now, since the registry
    /// answers it with the first call's answer (which it may have
    /// committed while that answer was lost), and a shorter grant asked
    /// would make the server refuse its own claim's answer as past what
    /// was asked, at every retry.
    pub(super) first_asked: Option<u64>,
    pub(super) next_call: Instant,
    /// The last failure logged, so each is logged once.
    logged: String,
    /// The id of the registry the connection reaches (`connect.rs`).
    pub(super) registry: Option<[u8; 16]>,
}

impl ClaimWorker {
    /// A new registry worker's side of the claim: the claim a previous
    /// registry worker of this server made, if it ended while the server ran (its
    /// key and grant are in shared memory), else none yet.
    pub fn new() -> ClaimWorker {
        let kept = state().and_then(ClaimState::kept_claim);
        let worker = ClaimWorker {
            conn: None,
            key: kept.map_or([0; 16], |(key, _)| key),
            unanswered: Vec::new(),
            grant: kept.map(|(_, grant)| grant),
            // The claim was lost (a fence, a takeover, forgotten) before the
            // previous worker ended: its key is the kept one, and resuming
            // is tried first (the registry decides whether it is safe, and
            // refuses all but a claim its fence ended), then claiming again.
            resuming: kept.is_some()
                && state()
                    .is_some_and(|s| s.phase() == Phase::Lost && s.reclaim.load(Ordering::Acquire)),
            failures: 0,
            first_asked: None,
            next_call: Instant::now(),
            logged: String::new(),
            registry: None,
        };
        if let (Some(grant), Some(state)) = (worker.grant, state()) {
            log!(
                "snowflake_id: the registry worker started again (it had ended {} time(s) while the server ran) and resumes claim {} of node id {}",
                state.worker_exits.load(Ordering::Acquire),
                grant.claim_id,
                grant.node_id
            );
            if state.phase() != Phase::Lost {
                state.set_message("");
                state.failing.store(false, Ordering::Release);
            }
        }
        worker
    }

    /// The registry worker ends while the server keeps running (a SIGTERM of
    /// its own, not a shutdown): the claim stays, for the worker
    /// PostgreSQL starts again to resume; backends go on issuing within
    /// the grant meanwhile.
    pub fn suspend(&mut self) {
        let Some(state) = state() else { return };
        let exits = state.worker_exits.fetch_add(1, Ordering::AcqRel) + 1;
        if self.grant.is_some() {
            state.set_message(&format!(
                "57P01 the registry worker (\"snowflake_id registry\") was terminated while the server runs ({exits} time(s)); PostgreSQL starts it again within {} s and it resumes the claim",
                bgworker::RESTART_AFTER.as_secs()
            ));
            state.failing.store(true, Ordering::Release);
        }
    }

    /// One turn of the registry worker's loop.
    pub fn tick(&mut self, config: &Config, shared: &Shared) {
        let Some(state) = state() else { return };
        // A held server (a copy, a changed configuration) claims nothing
        // until the operator has accepted.
        if shared.blocked() != Blocked::No {
            return;
        }
        if state.phase() == Phase::Waiting {
            self.publish_when_near(config, state);
        }
        if Instant::now() < self.next_call {
            return;
        }
        match state.phase() {
            Phase::Starting | Phase::Failed => self.claim(config, shared, state, None),
            // The registry's fence ended the claim (after its failover,
            // a pg_upgrade or a restore): resumed, reporting the grant held,
            // while that grant runs (snowflake_registry.resume says why that
            // is safe). Else, and after any other loss (a takeover, a claim
            // the registry does not know), the same node id is claimed
            // again, with a new secret, above every ID any holder of it may
            // have issued (the floor); refused while another server holds
            // it (no claim takes a live one), and asked again.
            // Never another node id: a backend between its node-id check and
            // its ID may still pair the node id it read with the
            // generator's next time.
            Phase::Lost => {
                if let (Some(node), true) = (
                    self.grant.map(|g| g.node_id),
                    state.reclaim.load(Ordering::Acquire),
                ) {
                    if self.resuming {
                        self.resume(config, shared, state);
                    } else {
                        self.claim(config, shared, state, Some(node));
                    }
                }
            }
            Phase::Waiting | Phase::Held => {
                let time = holder_time_ms(config, shared);
                if renewal_due(state.until_ms(), time, settings::registry_grant_ms()) {
                    self.renew(config, shared, state);
                }
            }
            Phase::Released => {}
        }
    }

    pub(super) fn call(
        &mut self,
        sql: &str,
        params: &[Option<String>],
        on_shutdown: OnShutdown,
    ) -> Result<Vec<Vec<Option<String>>>, CallError> {
        // Fail closed: whoever answers an unverified connection could grant
        // a held node id. It is given up before it logs in (`open`), and one
        // opened while allowed is closed once it no longer is (a reload).
        let verified_only = !settings::registry_allow_unverified();
        if verified_only
            && self
                .conn
                .as_ref()
                .is_some_and(|c| c.trust() == ConnectionTrust::Unverified)
        {
            self.conn = None;
        }
        if self.conn.is_none() {
            self.conn = Some(self.connect(on_shutdown, verified_only)?);
        }
        let result = match &self.conn {
            Some(conn) => conn.query(sql, params, on_shutdown),
            None => Err(CallError::Unreachable("not connected".into())),
        };
        if matches!(result, Err(CallError::Unreachable(_))) {
            // A broken or stuck connection is opened again next time.
            self.conn = None;
        }
        result
    }

    /// Claims a node id: the configured one, or any (the one this data
    /// directory held last first); `again`: the node id of a claim that
    /// ended, claimed anew.
    fn claim(&mut self, config: &Config, shared: &Shared, state: &ClaimState, again: Option<u64>) {
        let fleet = settings::registry_fleet();
        // (Connected first: no claim goes to another registry than the one
        // this data directory last claimed from.)
        if let Err(e) = self
            .call("SELECT 1", &[], OnShutdown::Abort)
            .and_then(|_| self.claimed_elsewhere(&fleet).map_or(Ok(()), Err))
        {
            return self.failed(state, older_script(e), false);
        }
        let preferred = last_claim(&fleet).map(|m| m.node_id);
        let layout = &config.layout;
        let mut asked = asked_of(config, shared);
        if again.is_some() {
            asked.node_id = again;
        }
        let (secret_hash, previous) = self.claim_secrets();
        match self.first_asked {
            Some(grant_ms) if previous.is_some() => asked.grant_ms = grant_ms,
            _ => self.first_asked = Some(asked.grant_ms),
        }
        let s = |v: String| Some(v);
        let params = [
            s(fleet.clone()),
            s(config.epoch_unix_ms.to_string()),
            s(layout.node_bits().to_string()),
            s(layout.sequence_bits().to_string()),
            asked.node_id.map(|n| n.to_string()),
            preferred.map(|n| n.to_string()),
            s(secret_hash),
            previous,
            // SAFETY: GetSystemIdentifier takes no argument and reads pg_control's
            // copy in shared memory, which the registry worker is attached to.
            s(unsafe { pg_sys::GetSystemIdentifier() }.to_string()),
            s(host_name()),
            // SAFETY: PostPortNumber is a plain int global, set from `port` when the
            // postmaster started and inherited unchanged; a read in this
            // single-threaded process.
            s(unsafe { pg_sys::PostPortNumber }.to_string()),
            s(data_dir().display().to_string()),
            s(asked.holder_now_ms.to_string()),
            s(asked.grant_ms.to_string()),
            // (The registry this data directory last claimed from: another
            // refuses the claim itself, whatever this connection checked.)
            last_claim(&fleet)
                .and_then(|m| m.registry_id)
                .map(|id| uuid_text(&id)),
        ];
        let rows = match self.call(CLAIM_SQL, &params, OnShutdown::Abort) {
            Ok(rows) => rows,
            // (A claim made again stays lost until it succeeds: issuing
            // ends with the old grant.)
            Err(e) => {
                self.forget_if_refused(&e);
                return self.failed(state, older_script(e), false);
            }
        };
        let grant = match self.answered(&rows, &asked) {
            Ok(grant) => grant,
            Err(e) => return self.failed(state, e, false),
        };
        // A node id claimed again must start above the grant this server
        // held (see uncovered_reclaim).
        if let Some(why) = again.and_then(|_| uncovered_reclaim(config, &grant, state.until_ms())) {
            // Not released: its grant keeps the node id's next floor above
            // the grant this server held, which the registry forgot.
            state.reclaim.store(false, Ordering::Release);
            state.set_failure(
                &format!("55000 {why}"),
                "55000 the registry's answer to a claim made again is not used (see the server log)",
            );
            warning!("{why}");
            return;
        }
        // The floor first, then the fence, then the node id (published
        // when the clock is near enough): a backend that sees the node id
        // sees the generator above the floor. A node id claimed again is
        // still published (the same one): taken back while the floor is
        // far, so that no ID runs that far ahead of the clock meanwhile.
        if again.is_some()
            && wait_for_floor_ms(
                layout,
                grant.floor_ms,
                clock::now_ms(config),
                settings::max_clock_drift_ms(),
            ) > 0
        {
            state.node_id.store(NONE, Ordering::Release);
        }
        if grant.floor_ms >= 0 {
            shared
                .generator
                .pair
                .fetch_max(pair_below_floor(layout, grant.floor_ms), Ordering::AcqRel);
        }
        // The floor before the grant's end: a backend checking a range
        // reads the end first, so a new end comes with its floor (a range
        // taken before the raise above lies below it).
        state.floor_ms.store(grant.floor_ms, Ordering::Release);
        state.until_ms.store(grant.until_ms, Ordering::Release);
        shared
            .generator
            .lease_until_ms
            .fetch_min(grant.until_ms, Ordering::AcqRel);
        state.keep_claim(grant.claim_id, self.key);
        if let Some(id) = self.registry {
            state.keep_registry(id);
        }
        state.claimed_node.store(grant.node_id, Ordering::Release);
        self.grant = Some(grant);
        self.succeeded(state);
        state.set_phase(Phase::Waiting);
        let marker = NodeMarker {
            fleet: fleet.clone(),
            node_id: grant.node_id,
            registry_id: self.registry,
        };
        if let Err(e) = write_marker(&data_dir(), NODE_FILE_NAME, &marker.text()) {
            warning!("snowflake_id: could not write \"{NODE_FILE_NAME}\": {e} (the next start may take another node id)");
        }
        if again.is_some() {
            log!(
                "snowflake_id: node id {} claimed again after its claim ended (claim {})",
                grant.node_id,
                grant.claim_id
            );
        }
        log!(
            "snowflake_id: claimed node id {} of fleet \"{fleet}\" from the registry {} (IDs after {} up to {}, renewed ahead)",
            grant.node_id,
            settings::registry_display(),
            time_text(config, grant.floor_ms),
            time_text(config, grant.until_ms as i64),
        );
        self.publish_when_near(config, state);
    }

    /// Publishes the claimed node id once issuing above the floor stays
    /// within the drift limit.
    pub(super) fn publish_when_near(&mut self, config: &Config, state: &ClaimState) {
        let floor = state.floor_ms.load(Ordering::Acquire);
        let drift = settings::max_clock_drift_ms();
        let wait = wait_for_floor_ms(&config.layout, floor, clock::now_ms(config), drift);
        if wait == 0 {
            state.node_id.store(
                state.claimed_node.load(Ordering::Acquire),
                Ordering::Release,
            );
            state.set_phase(Phase::Held);
        } else {
            let node = state.claimed_node.load(Ordering::Acquire);
            state.set_message(&format!(
                "node id {node} was claimed from the registry, and its previous holder may have issued IDs up to {} (its grant): this server issues from {drift} ms before that time on (snowflake_id.max_clock_drift), in {wait} ms",
                time_text(config, floor)
            ));
        }
    }

    pub(super) fn succeeded(&mut self, state: &ClaimState) {
        self.failures = 0;
        self.next_call = Instant::now();
        self.logged.clear();
        state.failing.store(false, Ordering::Release);
        state.set_message("");
    }

    pub(super) fn failed(&mut self, state: &ClaimState, e: CallError, lost: bool) {
        let (text, public) = failure_texts(&e);
        state.set_failure(&text, &public);
        state.failing.store(true, Ordering::Release);
        if lost {
            state.set_phase(Phase::Lost);
        } else if matches!(state.phase(), Phase::Starting) {
            state.set_phase(Phase::Failed);
        }
        let delay = jittered_ms(
            retry_after_ms(self.failures, settings::registry_grant_ms()),
            random_unit(),
        );
        self.failures = self.failures.saturating_add(1);
        self.next_call = Instant::now() + Duration::from_millis(delay);
        let shown = text.split_once(' ').map_or(text.as_str(), |(_, m)| m);
        if shown != self.logged {
            self.logged = shown.to_string();
            warning!(
                "snowflake_id: registry {}: {shown}",
                settings::registry_display()
            );
        }
    }

    /// At a clean shutdown: cut the grant down to the durable lease, then
    /// release the node id at that bound.
    pub fn release(&mut self, config: &Config, shared: &Shared) {
        let Some(state) = state() else { return };
        let Some(grant) = self.grant else { return };
        if !matches!(state.phase(), Phase::Waiting | Phase::Held) {
            return;
        }
        let issued_until = shared.with_lease_lock(|lease_until_ms| {
            state.until_ms.fetch_min(lease_until_ms, Ordering::AcqRel);
            state.until_ms()
        });
        state.set_phase(Phase::Released);
        state.node_id.store(NONE, Ordering::Release);
        let params = self.signed(
            state,
            &grant,
            SignedCall::Release {
                issued_until_ms: issued_until,
            },
        );
        match self.call(RELEASE_SQL, &params, OnShutdown::Finish) {
            Ok(_) => log!(
                "snowflake_id: released node id {} to the registry (IDs issued up to {})",
                grant.node_id,
                time_text(config, issued_until as i64)
            ),
            Err(e) => warning!(
                "snowflake_id: could not release node id {} to the registry {}: {e:?} (it passes on when its grant ends)",
                grant.node_id,
                settings::registry_display()
            ),
        }
    }
}

impl Default for ClaimWorker {
    fn default() -> Self {
        ClaimWorker::new()
    }
}

pub(super) fn time_text(config: &Config, ms: i64) -> String {
    clock::timestamp_of(config, ms.max(0) as u64).to_string()
}
