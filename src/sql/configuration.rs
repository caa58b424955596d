//! `snowflake_accept_configuration()`: the operator's way out when the
//! epoch, the widths or the node id changed on purpose. The work (raising
//! the generator above every ID the old configuration can have issued,
//! writing the new lease) is [`crate::pg::state::Shared::accept_configuration`] (in [`crate::pg::accept`]);
//! this adapter checks the privilege and reports a refusal.

use crate::pg::accept::Refusal;
use crate::pg::backend::ready;
use crate::pg::clock::{self, timestamp_of};
use crate::pg::errors::{raise, Error};
use crate::pg::settings;
use pgrx::prelude::*;

/// Accepts a change of epoch, widths or node id made on purpose: new IDs
/// are made greater than every ID the old configuration can have issued.
/// Superuser only.
#[pg_extern(volatile, parallel_unsafe)]
fn snowflake_accept_configuration() -> String {
    let (config, shared) = ready();
    // SAFETY: superuser() takes no argument and checks the current user in
    // this backend, inside the transaction of this SQL function's call (its
    // catalog lookup may raise an ERROR, which pgrx's FFI guard handles).
    if !unsafe { pg_sys::superuser() } {
        raise(Error::NotSuperuser);
    }
    match shared.accept_configuration(
        config,
        clock::now_ms(config),
        settings::max_clock_drift_ms(),
    ) {
        Ok(text) => text,
        Err(Refusal::InRecovery) => raise(Error::AcceptInRecovery),
        Err(Refusal::LeaseUnusable(msg)) => raise(Error::AcceptLeaseUnusable(msg)),
        Err(Refusal::Unorderable(msg)) => raise(Error::AcceptUnorderable(msg)),
        Err(Refusal::TooFarAhead {
            first_time_ms,
            now_ms,
            old_max_id,
        }) => raise(Error::AcceptTooFarAhead {
            old_max_id,
            first: timestamp_of(config, first_time_ms).to_string(),
            ahead_ms: first_time_ms as i64 - now_ms,
        }),
        Err(Refusal::Write(msg)) => raise(Error::AcceptWrite(msg)),
    }
}

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    // Runs inside a server started by `cargo pgrx test` with the library
    // preloaded and `snowflake_id.node_id = 42` (see `crate::pg_test`).
    use crate::test_support::one;
    use pgrx::prelude::*;

    #[pg_test]
    fn accepting_an_unchanged_configuration_changes_nothing() {
        let text: String = one("SELECT snowflake_accept_configuration()");
        assert!(text.starts_with("nothing to accept"), "{text}");
    }

    #[pg_test(error = "snowflake_id: only a superuser may accept a configuration change")]
    fn accepting_needs_a_superuser() {
        Spi::run("CREATE ROLE snowflake_plain_user; GRANT EXECUTE ON FUNCTION snowflake_accept_configuration() TO snowflake_plain_user; SET ROLE snowflake_plain_user").unwrap();
        Spi::run("SELECT snowflake_accept_configuration()").unwrap();
    }

    #[pg_test]
    fn accept_is_not_executable_by_public() {
        assert!(!one::<bool>(
            "SELECT has_function_privilege('public', 'snowflake_accept_configuration()', 'EXECUTE')"
        ));
    }

    // The settings (src/pg/settings.rs).
    #[pg_test(
        error = "parameter \"snowflake_id.node_id\" cannot be changed without restarting the server"
    )]
    fn node_id_cannot_be_set_in_a_session() {
        Spi::run("SET snowflake_id.node_id = 7").unwrap();
    }

    #[pg_test(
        error = "parameter \"snowflake_id.node_bits\" cannot be changed without restarting the server"
    )]
    fn layout_cannot_be_set_in_a_session() {
        Spi::run("SET snowflake_id.node_bits = 8").unwrap();
    }

    #[pg_test]
    fn settings_are_visible() {
        assert_eq!(one::<String>("SHOW snowflake_id.node_id"), "42");
        assert_eq!(
            one::<String>("SHOW snowflake_id.epoch"),
            "2025-01-01 00:00:00+00"
        );
        assert_eq!(one::<String>("SHOW snowflake_id.max_clock_drift"), "5s");
        assert_eq!(one::<String>("SHOW snowflake_id.max_clock_offset"), "1s");
        assert_eq!(
            one::<String>("SHOW snowflake_id.registry_allow_unverified"),
            "off"
        );
    }

    #[pg_test(error = "parameter \"snowflake_id.registry_allow_unverified\" cannot be changed now")]
    fn unverified_registry_connections_cannot_be_allowed_in_a_session() {
        Spi::run("SET snowflake_id.registry_allow_unverified = on").unwrap();
    }
}
