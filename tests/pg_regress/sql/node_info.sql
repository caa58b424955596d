-- snowflake_node_info(): what a check of all shards compares, as a function
-- and as a view readable by everyone.
SET TimeZone = 'UTC';
SELECT node_id, epoch, time_bits, node_bits, sequence_bits, in_recovery,
       system_identifier = (SELECT system_identifier FROM pg_control_system()) AS same_system
FROM snowflake_node_info();
SELECT node_id, epoch, time_bits, node_bits, sequence_bits, in_recovery
FROM snowflake_node_info;
SELECT has_table_privilege('public', 'snowflake_node_info', 'SELECT') AS view_public,
       has_function_privilege('public', 'snowflake_node_info()', 'EXECUTE') AS function_public;
-- It works whatever the search_path, as in a postgres_fdw session.
SET search_path = pg_catalog;
SELECT node_id FROM public.snowflake_node_info;
RESET search_path;
