//! A connection to the registry: verified (fail closed: a connection that
//! is not is given up before it logs in, unless
//! `snowflake_id.registry_allow_unverified` is on), and to the registry this
//! server claimed from. Each new connection asks the registry's id
//! (`snowflake_registry.registry_identity()`, made at its install and kept
//! by every copy of its data): after a claim, a connection that reaches
//! another registry under the same address (a new install, an impostor) is
//! given up, no call goes there, and the grant runs out; before a claim,
//! one whose registry is not the one this data directory last claimed from
//! in the fleet is not claimed at (that registry knows none of the floors
//! the old claims rested on). A restore of the same registry keeps its id:
//! its fence does the rest.

use super::answer::unrightful;
use super::identity::last_claim;
use super::libpq::{CallError, Connection, OnShutdown, UNVERIFIED_REFUSED};
use super::state;
use super::worker::ClaimWorker;
use crate::core::conninfo::ConnectionTrust;
use crate::core::node_marker::{uuid_bytes, uuid_text};
use crate::pg::errors::{self, Error};
use crate::pg::settings;
use std::sync::atomic::Ordering;

const IDENTITY_SQL: &str =
    "SELECT registry_id, system_identifier FROM snowflake_registry.registry_identity()";

/// What a server tells the operator when the registry under its address is
/// another one than its claims were made at.
const ANOTHER_REGISTRY_HINT: &str = "A restore of the registry keeps its id; a new install at the address does not, and knows none of the floors: if it replaces the old registry on purpose, run SELECT snowflake_registry.fence_after_restore(); on it, then remove the file snowflake_id.node from this server's data directory and restart the server.";

impl ClaimWorker {
    /// Opens a connection to the registry, verified unless allowed
    /// otherwise, and checks which registry answers.
    pub(super) fn connect(
        &mut self,
        on_shutdown: OnShutdown,
        verified_only: bool,
    ) -> Result<Connection, CallError> {
        let conn = Connection::open(&settings::registry_conninfo(), on_shutdown, verified_only)
            .map_err(|e| {
                if e == UNVERIFIED_REFUSED {
                    note_trust(ConnectionTrust::Unverified);
                }
                CallError::Unreachable(e)
            })?;
        let trust = conn.trust();
        note_trust(trust);
        if verified_only && trust == ConnectionTrust::Unverified {
            return Err(CallError::Unreachable(UNVERIFIED_REFUSED.into()));
        }
        let rows = conn.query(IDENTITY_SQL, &[], on_shutdown)?;
        let field = |i: usize| rows.first().and_then(|r| r.get(i).cloned().flatten());
        let id = field(0)
            .and_then(|t| uuid_bytes(&t))
            .ok_or_else(|| unrightful(format!("registry_identity() answered {rows:?}"), None))?;
        let system_identifier = field(1).unwrap_or_default();
        if let Some(claimed) = state().and_then(|s| s.claimed_registry()) {
            if claimed != id {
                return Err(CallError::Refused {
                    sqlstate: "08P01".into(),
                    message: format!(
                        "the registry at this address is another registry (id {}, system identifier {system_identifier}) than the one this server's claim was made at (id {}): no call goes there, and issuing stops when the grant ends",
                        uuid_text(&id),
                        uuid_text(&claimed)
                    ),
                    detail: None,
                    hint: Some(ANOTHER_REGISTRY_HINT.into()),
                });
            }
        }
        self.registry = Some(id);
        Ok(conn)
    }

    /// Before a claim in `fleet`: refused if the registry connected to is
    /// not the one this data directory last claimed from in the fleet.
    pub(super) fn claimed_elsewhere(&self, fleet: &str) -> Option<CallError> {
        let marked = last_claim(fleet)?;
        let (before, now) = (marked.registry_id?, self.registry?);
        (before != now).then(|| CallError::Refused {
            sqlstate: "55000".into(),
            message: format!(
                "this data directory last claimed node id {} of fleet \"{fleet}\" from another registry (id {}) than the one at this address (id {}): no claim is made there",
                marked.node_id,
                uuid_text(&before),
                uuid_text(&now)
            ),
            detail: None,
            hint: Some(ANOTHER_REGISTRY_HINT.into()),
        })
    }
}

/// Shows a new connection's trust in `snowflake_stats()`, and warns once
/// a connection is not verified (again after a verified one): a plausible
/// lie on its path (a lower floor, within the rules the answers are
/// checked against) would go unnoticed. (Such a connection is used only
/// with `snowflake_id.registry_allow_unverified = on`.)
fn note_trust(trust: ConnectionTrust) {
    let Some(state) = state() else { return };
    let before = state.connection.swap(trust.code(), Ordering::AcqRel);
    if trust == ConnectionTrust::Unverified && before != trust.code() {
        errors::warn(Error::RegistryUnverified {
            registry: settings::registry_display(),
        });
    }
}
