-- snowflake_id 0.2.0 -> 0.3.0 (ALTER EXTENSION snowflake_id UPDATE).
--
-- snowflake_stats() gains thirteen columns, after the old ones: when the lease
-- was last written, whether a backend waits for the lease worker, how many
-- lease writes failed, whether issuing is held and why, the node-id
-- registry's claim (its state, the grant's end, its last failure, how often
-- the registry worker was started again, how often the claim was resumed
-- after a fence, and how far the registry connection is trusted), and the
-- floor a successor applied (where, and how far ahead of the clock). A
-- function's result type cannot change in place,
-- so it is dropped and created again (a view over it must be dropped
-- first; the extension creates none). Until this runs, the 0.2.0 function
-- keeps working with the new library (it calls snowflake_stats_wrapper,
-- which still returns the 0.2.0 row).
\echo Use "ALTER EXTENSION snowflake_id UPDATE" to load this file. \quit

DROP FUNCTION snowflake_stats();

-- snowflake_id::sql::introspection::snowflake_stats
CREATE  FUNCTION "snowflake_stats"() RETURNS TABLE (
	"node_id" INT,  /* Option < i32 > */
	"epoch" timestamp with time zone,  /* TimestampWithTimeZone */
	"time_bits" INT,  /* i32 */
	"node_bits" INT,  /* i32 */
	"sequence_bits" INT,  /* i32 */
	"ids_issued" bigint,  /* i64 */
	"last_id" bigint,  /* Option < i64 > */
	"drift_ms" bigint,  /* Option < i64 > */
	"max_drift_ms" bigint,  /* i64 */
	"max_clock_drift_ms" bigint,  /* i64 */
	"backward_steps" bigint,  /* i64 */
	"largest_backward_step_ms" bigint,  /* i64 */
	"borrowed_ms" bigint,  /* i64 */
	"waits" bigint,  /* i64 */
	"wait_time_ms" double precision,  /* f64 */
	"drift_errors" bigint,  /* i64 */
	"lease_until" timestamp with time zone,  /* Option < TimestampWithTimeZone > */
	"lease_writes" bigint,  /* i64 */
	"lease_written_at" timestamp with time zone,  /* Option < TimestampWithTimeZone > */
	"lease_waiting" bool,  /* bool */
	"lease_failures" bigint,  /* i64 */
	"issuing_held" TEXT,  /* Option < String > */
	"held_message" TEXT,  /* Option < String > */
	"registry_state" TEXT,  /* Option < String > */
	"grant_until" timestamp with time zone,  /* Option < TimestampWithTimeZone > */
	"registry_message" TEXT,  /* Option < String > */
	"registry_worker_restarts" bigint,  /* Option < i64 > */
	"registry_resumes" bigint,  /* Option < i64 > */
	"registry_connection" TEXT,  /* Option < String > */
	"successor_floor" timestamp with time zone,  /* Option < TimestampWithTimeZone > */
	"successor_ahead_ms" bigint  /* Option < i64 > */
)
STRICT VOLATILE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'snowflake_stats_0_3_wrapper';

-- The IMMUTABLE decoders with the epoch as text, read in UTC unless it names
-- a zone (as snowflake_id.epoch is): an untyped literal such as '2025-01-01'
-- resolves to these, and no longer to the timestamptz forms, which read it
-- in the session's TimeZone. Expressions stored before the upgrade keep the
-- function they were made with.
CREATE FUNCTION "snowflake_decode"(
	"id" bigint,
	"epoch" TEXT,
	"node_bits" INT,
	"sequence_bits" INT
) RETURNS TABLE (
	"ts" timestamp with time zone,
	"node_id" INT,
	"sequence" INT
)
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c
AS 'MODULE_PATHNAME', 'snowflake_decode_epoch_text_wrapper';

CREATE FUNCTION "snowflake_timestamp"(
	"id" bigint,
	"epoch" TEXT,
	"node_bits" INT,
	"sequence_bits" INT
) RETURNS timestamp with time zone
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c
AS 'MODULE_PATHNAME', 'snowflake_timestamp_epoch_text_wrapper';

CREATE FUNCTION "snowflake_node"(
	"id" bigint,
	"epoch" TEXT,
	"node_bits" INT,
	"sequence_bits" INT
) RETURNS INT
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c
AS 'MODULE_PATHNAME', 'snowflake_node_epoch_text_wrapper';

CREATE FUNCTION "snowflake_sequence"(
	"id" bigint,
	"epoch" TEXT,
	"node_bits" INT,
	"sequence_bits" INT
) RETURNS INT
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c
AS 'MODULE_PATHNAME', 'snowflake_sequence_epoch_text_wrapper';

CREATE FUNCTION "snowflake_from_timestamp"(
	"ts" timestamp with time zone,
	"epoch" TEXT,
	"node_bits" INT,
	"sequence_bits" INT
) RETURNS bigint
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c
AS 'MODULE_PATHNAME', 'snowflake_from_timestamp_epoch_text_wrapper';

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

-- Public IDs (src/sql/public_id.rs).
CREATE FUNCTION "snowflake_public"("id" bigint, "key_version" INT) RETURNS snowflake
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c
AS 'MODULE_PATHNAME', 'snowflake_public_wrapper';

CREATE FUNCTION "snowflake_private"(
	"public_id" bigint,
	"key_version" INT
) RETURNS bigint
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c
AS 'MODULE_PATHNAME', 'snowflake_private_wrapper';

CREATE FUNCTION "snowflake_public_text"(
	"id" bigint,
	"key_version" INT
) RETURNS TEXT
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c
AS 'MODULE_PATHNAME', 'snowflake_public_text_wrapper';

CREATE FUNCTION "snowflake_private"(
	"public_text" TEXT
) RETURNS bigint
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c
AS 'MODULE_PATHNAME', 'snowflake_private_of_text_wrapper';

CREATE FUNCTION "snowflake_public_keys"() RETURNS TABLE (
	"key_version" INT,
	"check_value" TEXT
)
STABLE STRICT PARALLEL SAFE
LANGUAGE c
AS 'MODULE_PATHNAME', 'snowflake_public_keys_wrapper';
