-- examples/sharding/shard.sql: run on every shard (each with its own
-- snowflake_id.node_id). The table is the same on every shard; the IDs are
-- issued by the shard that stores the row.
CREATE EXTENSION IF NOT EXISTS snowflake_id;

CREATE TABLE orders (
    id         bigint PRIMARY KEY DEFAULT snowflake_next(),
    customer   text NOT NULL,
    item       text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
