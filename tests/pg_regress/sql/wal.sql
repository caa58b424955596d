-- The lease travels in the WAL: the resource manager is registered under
-- the experimental id 128, and lease_sync is a reloadable setting, off by
-- default, that a session cannot change.
SELECT rm_id, rm_name, rm_builtin FROM pg_get_wal_resource_managers() WHERE rm_name = 'snowflake_id';
SHOW snowflake_id.lease_sync;
SELECT context, vartype, boot_val FROM pg_settings WHERE name = 'snowflake_id.lease_sync';
SET snowflake_id.lease_sync = on;
