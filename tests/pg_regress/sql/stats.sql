-- snowflake_stats(): layout, counts, lease.
SET TimeZone = 'UTC';
SELECT node_id, epoch, time_bits, node_bits, sequence_bits, max_clock_drift_ms
FROM snowflake_stats();

CREATE TEMP TABLE before AS SELECT ids_issued FROM snowflake_stats();
SELECT count(snowflake_next()) FROM generate_series(1, 1000);
SELECT s.ids_issued - b.ids_issued AS issued_here,
       snowflake_node(s.last_id) AS last_node,
       s.lease_until >= snowflake_timestamp(s.last_id) AS lease_covers_last_id,
       s.lease_writes > 0 AS lease_written,
       s.drift_errors AS drift_errors
FROM snowflake_stats() s, before b;

-- the lease's health, what holds issuing, the registry's claim (none here)
SELECT s.lease_written_at <= clock_timestamp() AS lease_written_before_now,
       s.lease_waiting, s.lease_failures, s.issuing_held, s.held_message,
       s.registry_state, s.grant_until, s.registry_message
FROM snowflake_stats() s;
-- no takeover: a server that started from its own lease
SELECT successor_floor, successor_ahead_ms FROM snowflake_stats();

-- the settings, and that the node id cannot be changed by a session
SHOW snowflake_id.node_id;
SHOW snowflake_id.epoch;
SHOW snowflake_id.node_bits;
SHOW snowflake_id.sequence_bits;
SHOW snowflake_id.max_clock_drift;
SET snowflake_id.node_id = 6;
SET snowflake_id.epoch = '2026-01-01';
SET snowflake_id.max_clock_drift = '1s';
