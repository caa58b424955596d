//! Public IDs: `snowflake_public`, `snowflake_private`, their text forms,
//! and `snowflake_public_keys()`. The permutation (FF1 with AES-256), the
//! key file's format and the text form are in [`crate::core::public_id`];
//! the key file is read and kept by [`crate::pg::public_keys`].
//!
//! The conversions are IMMUTABLE: a key version names one key forever, so
//! the same arguments give the same result on every server of a fleet
//! that shares the file, and generated columns and indexes may use them.
//! `snowflake_public` returns the `snowflake` type, so that JSON carries
//! the public ID as a string too.

use crate::core::public_id::{key_version, parse_public_text, public_text};
use crate::pg::errors::raise;
use crate::pg::public_keys;
use pgrx::prelude::*;

/// The key version argument, checked (1 to 61).
fn version_of(version: i32) -> u8 {
    key_version(i64::from(version)).unwrap_or_else(|e| raise(e))
}

/// The public ID of `id` under key `key_version`.
#[pg_extern(
    immutable,
    parallel_safe,
    requires = ["snowflake_type"],
    sql = r#"
CREATE FUNCTION "snowflake_public"("id" bigint, "key_version" INT) RETURNS snowflake
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c
AS 'MODULE_PATHNAME', '@FUNCTION_NAME@';
"#
)]
fn snowflake_public(id: i64, key_version: i32) -> i64 {
    let version = version_of(key_version);
    public_keys::with_cipher(version, |c| c.hide(id)).unwrap_or_else(|e| raise(e))
}

/// The ID whose public ID under key `key_version` is `public_id`.
#[pg_extern(immutable, parallel_safe)]
fn snowflake_private(public_id: i64, key_version: i32) -> i64 {
    let version = version_of(key_version);
    public_keys::with_cipher(version, |c| c.reveal(public_id)).unwrap_or_else(|e| raise(e))
}

/// The public ID of `id` under key `key_version` as 12 characters: the
/// version, then the public ID in base62.
#[pg_extern(immutable, parallel_safe)]
fn snowflake_public_text(id: i64, key_version: i32) -> String {
    let version = version_of(key_version);
    let public_id = public_keys::with_cipher(version, |c| c.hide(id)).unwrap_or_else(|e| raise(e));
    public_text(version, public_id).unwrap_or_else(|e| raise(e))
}

/// The ID of a text form, under the key version the text carries.
#[pg_extern(immutable, parallel_safe, name = "snowflake_private")]
fn snowflake_private_of_text(public_text: &str) -> i64 {
    let (version, public_id) = parse_public_text(public_text).unwrap_or_else(|e| raise(e));
    public_keys::with_cipher(version, |c| c.reveal(public_id)).unwrap_or_else(|e| raise(e))
}

/// The key file's versions and a check value of each (the text form of
/// the public ID of 0 under it): equal check values on two servers mean
/// the same key, and show nothing of it.
#[pg_extern(stable, parallel_safe)]
fn snowflake_public_keys(
) -> TableIterator<'static, (name!(key_version, i32), name!(check_value, String))> {
    let rows: Vec<(i32, String)> = public_keys::ring_ciphers()
        .into_iter()
        .map(|(version, cipher)| {
            let check = cipher
                .hide(0)
                .and_then(|p| public_text(version, p))
                .unwrap_or_else(|e| raise(e));
            (i32::from(version), check)
        })
        .collect();
    TableIterator::new(rows)
}

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    use crate::test_support::{error_of, one};
    use pgrx::prelude::*;

    // The test server has no key file (snowflake_id.public_id_keys is
    // empty): the integration test tests/integration/public_ids.sh and the
    // pg_regress test public_ids run with keys.

    #[pg_test]
    fn without_a_key_file_the_call_says_how_to_set_one() {
        let (state, message, hint) = error_of("PERFORM snowflake_public(1, 1)");
        assert_eq!(state, "55000");
        assert!(
            message.contains("snowflake_id.public_id_keys is not set"),
            "{message}"
        );
        assert!(hint.contains("openssl rand -hex 32"), "{hint}");
    }

    #[pg_test]
    fn key_versions_are_checked_before_the_file() {
        let (state, message, _) = error_of("PERFORM snowflake_public(1, 0)");
        assert_eq!(state, "22023");
        assert!(
            message.contains("key version 0 is out of range"),
            "{message}"
        );
        let (state, message, _) = error_of("PERFORM snowflake_private('000000000001')");
        assert_eq!(state, "22P02");
        assert!(message.contains("its version digit is 0"), "{message}");
    }

    #[pg_test]
    fn the_public_form_is_of_the_snowflake_type() {
        assert_eq!(
            one::<String>(
                "SELECT pg_get_function_result('snowflake_public(bigint, int)'::regprocedure)"
            ),
            "snowflake"
        );
    }
}
