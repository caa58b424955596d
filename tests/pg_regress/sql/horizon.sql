-- snowflake_horizon(): every ID below it that this server issued inside a
-- transaction belongs to a transaction that has ended. The simple cases, in
-- one session (tests/integration/horizon.sh runs writers and pollers at
-- once).
CREATE TABLE outbox (id bigint PRIMARY KEY DEFAULT snowflake_next(), payload text NOT NULL);

-- No transaction in progress: the horizon is above every ID issued so far.
INSERT INTO outbox (payload) VALUES ('committed');
SELECT snowflake_horizon() > (SELECT max(id) FROM outbox) AS above_every_committed_id;

-- An open transaction holds the horizon at or below its first ID, whatever
-- it issues later; when it ends, the horizon moves past its IDs.
BEGIN;
INSERT INTO outbox (payload) VALUES ('open') RETURNING id AS open_id \gset
INSERT INTO outbox (payload) SELECT 'open' FROM generate_series(1, 100);
SELECT snowflake_horizon() <= :open_id AS held_by_the_open_transaction;
COMMIT;
SELECT snowflake_horizon() > (SELECT max(id) FROM outbox) AS past_it_after_commit;

-- A rolled-back transaction releases it too.
BEGIN;
SELECT snowflake_next() AS rolled_back_id \gset
ROLLBACK;
SELECT snowflake_horizon() > :rolled_back_id AS past_it_after_rollback;

-- A transaction that issues no ID does not hold it.
BEGIN;
INSERT INTO outbox (id, payload) VALUES (1, 'given id');
SELECT snowflake_horizon() > (SELECT max(id) FROM outbox) AS not_held_without_an_issued_id;
COMMIT;

-- A prepared transaction holds it after this session has let go of it,
-- until COMMIT PREPARED (or ROLLBACK PREPARED).
BEGIN;
INSERT INTO outbox (payload) VALUES ('prepared') RETURNING id AS prepared_id \gset
PREPARE TRANSACTION 'horizon_p1';
SELECT snowflake_horizon() <= :prepared_id AS held_by_the_prepared_transaction;
INSERT INTO outbox (payload) VALUES ('later');
SELECT snowflake_horizon() <= :prepared_id AS still_held;
COMMIT PREPARED 'horizon_p1';
SELECT snowflake_horizon() > (SELECT max(id) FROM outbox) AS past_it_after_commit_prepared;
BEGIN;
INSERT INTO outbox (payload) VALUES ('prepared, rolled back') RETURNING id AS prepared_id \gset
PREPARE TRANSACTION 'horizon_p2';
SELECT snowflake_horizon() <= :prepared_id AS held_by_the_second_prepared_transaction;
ROLLBACK PREPARED 'horizon_p2';
SELECT snowflake_horizon() > :prepared_id AS past_it_after_rollback_prepared;

-- A prepared transaction that issued no ID holds nothing back (Citus
-- prepares one on every worker for each distributed write): the horizon
-- answers, above every ID, while it is open.
BEGIN;
INSERT INTO outbox (id, payload) VALUES (2, 'given id, prepared');
PREPARE TRANSACTION 'horizon_no_id';
SELECT snowflake_horizon() > (SELECT max(id) FROM outbox) AS not_held_by_a_prepared_transaction_without_ids;
SELECT count(*) AS open_prepared_transactions FROM pg_prepared_xacts WHERE gid = 'horizon_no_id';
COMMIT PREPARED 'horizon_no_id';

-- A consumer pages with two statements: the horizon first, then the rows
-- below it (READ COMMITTED: the read's snapshot comes after the horizon).
SELECT snowflake_horizon() AS h \gset
SELECT count(*) AS rows_below_the_horizon FROM outbox WHERE id > 1 AND id < :h;
DROP TABLE outbox;
