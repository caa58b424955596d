//! The `snowflake` type: a `bigint` whose JSON is a string.
//!
//! JSON numbers become IEEE doubles in JavaScript, exact only up to 2^53,
//! and an ID is near 2^58: `to_json` of a `bigint` ID hands a browser a
//! number that parses to another ID, silently. PostgreSQL's JSON functions
//! (`to_json`, `row_to_json`, `json_agg`, `jsonb_build_object`, ...) write
//! its own integer, float and numeric types as JSON numbers and every other
//! type as a JSON string of its text output. A column of this type is
//! therefore written as `"252172774628397056"`, with no cast in the query.
//!
//! The design is `varchar`'s beside `text`: a type of its own in the
//! catalog, and nothing of its own at run time.
//!
//! - **Storage and I/O are `bigint`'s.** 8 bytes, passed by value, aligned
//!   as `bigint` (`LIKE = bigint`); the input, output, binary receive and
//!   send functions are PostgreSQL's `int8in`, `int8out`, `int8recv` and
//!   `int8send`, declared for this type (`LANGUAGE internal`: a direct call
//!   of the built-in C function, no call into this library). A binary
//!   client receives the same 8 bytes as for a `bigint`.
//! - **Comparison, hashing and indexes are `bigint`'s.** The type declares
//!   no operator and no operator class. A binary-coercible, implicit cast
//!   to `bigint` makes every `bigint` operator apply, and PostgreSQL picks
//!   the default operator class of a binary-coercible type when the type has
//!   none (as `varchar` gets `text_ops`): an index, a sort, a `GROUP BY`, a
//!   hash join on the type use `int8_ops` (`btint8cmp`, `btint8sortsupport`,
//!   `hashint8`) exactly as a `bigint` column does. Of the alternatives,
//!   own operators and classes over the same C functions would cost the
//!   same per comparison, but would make `id = 5` ambiguous between them
//!   and `bigint`'s, and would make `ALTER COLUMN ... TYPE snowflake`
//!   rebuild every index of the column (the operator class changes); with
//!   `int8_ops` it rewrites neither the table nor its indexes (the cast is
//!   a relabelling and the index's class is the same). A `WHERE id = $1`
//!   with a `bigint`, `integer` or untyped parameter, `IN (...)`, `ANY`,
//!   ranges, partition pruning, merge and hash joins with `bigint` foreign
//!   keys: all use the index as on a `bigint` column.
//! - **Casts.** To `bigint`: binary-coercible and implicit, so every
//!   function that takes a `bigint` (every decoder here) takes the type,
//!   and arithmetic gives a `bigint`. From `bigint`: binary-coercible and
//!   for assignment only, so `INSERT`, `UPDATE` and `DEFAULT
//!   snowflake_next()` store a `bigint` into the type, while an expression
//!   never turns into one silently. Implicit casts both ways would make
//!   every operator of the two ambiguous. From `integer` and `smallint`:
//!   implicit (PostgreSQL's `int48`, `int28`), so that `COALESCE(id, 0)`,
//!   `CASE ... ELSE 0`, `UNION` with a literal and `id IN (1, 2, 3)` find
//!   the type as their common type, as they find `bigint` for a `bigint`
//!   column. No cast leads back from the type to them, so these add no
//!   ambiguity.
//!
//! What it does not do: check a value. `-1::bigint` is stored as it is, as
//! in a `bigint` column (input errors name `bigint`, the function's own
//! message); an ID is never negative, and a CHECK constraint can say so.
//!
//! The SQL below is all of it; `sql/snowflake_id--0.2.0--0.3.0.sql` repeats
//! it for an upgrade.

use pgrx::prelude::*;

extension_sql!(
    r#"
-- The snowflake type: bigint inside, a JSON string outside
-- (src/sql/snowflake_type.rs explains the design).
CREATE TYPE snowflake;
CREATE FUNCTION snowflake_in(cstring) RETURNS snowflake
IMMUTABLE STRICT PARALLEL SAFE LANGUAGE internal AS 'int8in';
CREATE FUNCTION snowflake_out(snowflake) RETURNS cstring
IMMUTABLE STRICT PARALLEL SAFE LANGUAGE internal AS 'int8out';
CREATE FUNCTION snowflake_recv(internal) RETURNS snowflake
IMMUTABLE STRICT PARALLEL SAFE LANGUAGE internal AS 'int8recv';
CREATE FUNCTION snowflake_send(snowflake) RETURNS bytea
IMMUTABLE STRICT PARALLEL SAFE LANGUAGE internal AS 'int8send';
CREATE TYPE snowflake (
    INPUT = snowflake_in, OUTPUT = snowflake_out,
    RECEIVE = snowflake_recv, SEND = snowflake_send,
    LIKE = bigint, CATEGORY = 'N'
);
COMMENT ON TYPE snowflake IS 'A snowflake ID: bigint inside, a string in JSON';
CREATE CAST (snowflake AS bigint) WITHOUT FUNCTION AS IMPLICIT;
CREATE CAST (bigint AS snowflake) WITHOUT FUNCTION AS ASSIGNMENT;
CREATE FUNCTION snowflake(integer) RETURNS snowflake
IMMUTABLE STRICT PARALLEL SAFE LANGUAGE internal AS 'int48';
CREATE FUNCTION snowflake(smallint) RETURNS snowflake
IMMUTABLE STRICT PARALLEL SAFE LANGUAGE internal AS 'int28';
CREATE CAST (integer AS snowflake) WITH FUNCTION snowflake(integer) AS IMPLICIT;
CREATE CAST (smallint AS snowflake) WITH FUNCTION snowflake(smallint) AS IMPLICIT;
"#,
    name = "snowflake_type",
    // An edge in pgrx's graph of the install script: without one, the
    // block's place among the other unconnected ones follows the order of
    // symbols in the library, which differs between amd64 and arm64, and
    // the two packages' scripts would differ (tests/integration/arm64.sh).
    requires = ["snowflake_next"]
);

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    use crate::test_support::holds;
    use pgrx::prelude::*;

    #[pg_test]
    fn the_type_is_a_bigint_inside_and_a_string_in_json() {
        assert!(holds(
            "SELECT t.typlen = 8 AND t.typbyval AND t.typalign = 'd'
                AND p.prosrc = 'int8in' AND l.lanname = 'internal'
             FROM pg_type t JOIN pg_proc p ON p.oid = t.typinput
                  JOIN pg_language l ON l.oid = p.prolang
             WHERE t.typname = 'snowflake'"
        ));
        assert!(holds(
            "SELECT to_json(252172774628397056::bigint::snowflake)::text = '\"252172774628397056\"'"
        ));
        assert!(holds(
            "SELECT to_json(252172774628397056::bigint)::text = '252172774628397056'"
        ));
    }

    #[pg_test]
    fn default_snowflake_next_fills_a_column_of_the_type() {
        Spi::run(
            "CREATE TABLE typed (id snowflake PRIMARY KEY DEFAULT snowflake_next(), v int);
             INSERT INTO typed (v) SELECT g FROM generate_series(1, 100) g",
        )
        .expect("a table keyed by the type takes DEFAULT snowflake_next()");
        assert!(holds(
            "SELECT count(DISTINCT id) = 100 AND bool_and(snowflake_node(id) = 42)
             FROM typed"
        ));
    }
}
