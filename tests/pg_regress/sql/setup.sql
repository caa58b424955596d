-- The regression cluster preloads snowflake_id with snowflake_id.node_id = 5.
CREATE EXTENSION snowflake_id;
