-- snowflake_id 0.1.0 -> 0.2.0 (ALTER EXTENSION snowflake_id UPDATE).
--
-- New: snowflake_horizon() (the commit-safe read horizon for consumers that
-- page by ID); the decoders with the layout as arguments (IMMUTABLE, for
-- generated columns, expression and partial indexes, check constraints and
-- plan-time partition pruning); snowflake_id_span (the ID values an
-- interval covers, for ID-based partitions), with its IMMUTABLE form.
-- Nothing of 0.1.0 changes.
\echo Use "ALTER EXTENSION snowflake_id UPDATE" to load this file. \quit

-- snowflake_id::sql::decode::snowflake_decode
CREATE  FUNCTION "snowflake_decode"(
	"id" bigint, /* i64 */
	"epoch" timestamp with time zone, /* TimestampWithTimeZone */
	"node_bits" INT, /* i32 */
	"sequence_bits" INT /* i32 */
) RETURNS TABLE (
	"ts" timestamp with time zone,  /* TimestampWithTimeZone */
	"node_id" INT,  /* i32 */
	"sequence" INT  /* i32 */
)
IMMUTABLE STRICT PARALLEL SAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'snowflake_decode_given_wrapper';

-- snowflake_id::sql::decode::snowflake_from_timestamp
CREATE  FUNCTION "snowflake_from_timestamp"(
	"ts" timestamp with time zone, /* TimestampWithTimeZone */
	"epoch" timestamp with time zone, /* TimestampWithTimeZone */
	"node_bits" INT, /* i32 */
	"sequence_bits" INT /* i32 */
) RETURNS bigint /* i64 */
IMMUTABLE STRICT PARALLEL SAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'snowflake_from_timestamp_given_wrapper';

-- snowflake_id::sql::horizon::snowflake_horizon
CREATE  FUNCTION "snowflake_horizon"() RETURNS bigint /* i64 */
STRICT VOLATILE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'snowflake_horizon_wrapper';

-- snowflake_id::sql::decode::snowflake_id_span
CREATE  FUNCTION "snowflake_id_span"(
	"span" interval /* Interval */
) RETURNS bigint /* i64 */
STRICT STABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'snowflake_id_span_wrapper';

-- snowflake_id::sql::decode::snowflake_id_span
CREATE  FUNCTION "snowflake_id_span"(
	"span" interval, /* Interval */
	"node_bits" INT, /* i32 */
	"sequence_bits" INT /* i32 */
) RETURNS bigint /* i64 */
IMMUTABLE STRICT PARALLEL SAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'snowflake_id_span_given_wrapper';

-- snowflake_id::sql::decode::snowflake_node
CREATE  FUNCTION "snowflake_node"(
	"id" bigint, /* i64 */
	"epoch" timestamp with time zone, /* TimestampWithTimeZone */
	"node_bits" INT, /* i32 */
	"sequence_bits" INT /* i32 */
) RETURNS INT /* i32 */
IMMUTABLE STRICT PARALLEL SAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'snowflake_node_given_wrapper';

-- snowflake_id::sql::decode::snowflake_sequence
CREATE  FUNCTION "snowflake_sequence"(
	"id" bigint, /* i64 */
	"epoch" timestamp with time zone, /* TimestampWithTimeZone */
	"node_bits" INT, /* i32 */
	"sequence_bits" INT /* i32 */
) RETURNS INT /* i32 */
IMMUTABLE STRICT PARALLEL SAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'snowflake_sequence_given_wrapper';

-- snowflake_id::sql::decode::snowflake_timestamp
CREATE  FUNCTION "snowflake_timestamp"(
	"id" bigint, /* i64 */
	"epoch" timestamp with time zone, /* TimestampWithTimeZone */
	"node_bits" INT, /* i32 */
	"sequence_bits" INT /* i32 */
) RETURNS timestamp with time zone /* TimestampWithTimeZone */
IMMUTABLE STRICT PARALLEL SAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'snowflake_timestamp_given_wrapper';
