-- snowflake_id, portable edition: the same IDs in plain SQL and PL/pgSQL, for
-- a PostgreSQL where the extension cannot be loaded (a managed service: no
-- library of one's own, no shared_preload_libraries, no superuser).
-- docs/portable.md says what it guarantees against the extension, and how.
--
-- Install (or upgrade: running it again replaces the functions and keeps
-- the configuration and the generator's state) as the role that will own
-- it, any role that may create a schema in the database:
--
--   psql "dbname=app user=app_owner" -v ON_ERROR_STOP=1 -f snowflake_id_portable.sql
--
-- The functions users call (snowflake_next() and the decoders, with the
-- extension's names and signatures) go into the first schema of the
-- search_path (usually public), as CREATE EXTENSION would put them; the
-- state, which no other role may touch, into the schema snowflake_portable.
-- Then set the node id once:
--
--   UPDATE snowflake_portable.config SET node_id = 7;
--
-- # The generator
--
-- The extension keeps the pair (time << sequence_bits | sequence) in one
-- atomic word and takes it with an atomic add. Here the word is the
-- sequence snowflake_portable.pair: nextval() is that add (its carry into
-- the time field borrows the next millisecond), it is not rolled back with
-- the caller's transaction, and it takes no lock a transaction keeps.
--
-- Moving the pair up to the clock (after an idle time, or to reserve a
-- batch) needs setval(), which has no compare-and-swap: a setval() computed
-- from a value read earlier can move the sequence *back* under values
-- other sessions took meanwhile, and they would be handed out again. So
-- every move is a *reserve*, guarded as a seqlock by a second sequence,
-- snowflake_portable.guard:
--   * a reserve holds the advisory lock RESERVE_LOCK (one at a time),
--     makes the guard odd (nextval), takes w := nextval(pair), sets the
--     pair to base + n, where base >= w and >= the clock, makes the guard
--     even again (nextval), and releases the lock; base+1 .. base+n are the
--     reserve's own;
--   * a call reads the guard (odd: a reserve is under way, wait for the
--     lock), takes v := nextval(pair), reads the guard again, and throws v
--     away (a gap, never a duplicate) when the guard changed.
-- A value a call keeps was taken while the guard did not change, so before
-- the reserve made it odd, so before the reserve took w: it is below w,
-- below base + 1, and below every value taken after the setval. A value
-- taken after the guard went odd is thrown away by its taker, so the setval
-- may move the pair back under it harmlessly. Two reserves never overlap
-- (the lock); a reserve that dies half way leaves the guard odd and the
-- lock free, and the next call that waits for the lock finds it so and
-- makes it even (the pair is already above every value kept). The lock is
-- a session lock, held only inside one function, released by an exception
-- handler on every error or cancel, and by PostgreSQL when the session
-- ends.
--
-- The rules of the extension's generator hold for the values kept: unique,
-- increasing in issue order (a call that starts after another returned
-- takes a later value of one sequence); no ID more than max_clock_drift_ms
-- ahead of the clock (a call ahead of it sleeps, and fails with 58000 when
-- the clock is already further behind than the limit plus 200 ms: a clock
-- stepped back); a call reads the pair before it takes, so that failing
-- calls take nothing (they would push the pair ahead of the clock).
--
-- # The lease, restarts, crashes, promotions
--
-- The pair and the guard are UNLOGGED sequences: a setval() of a logged
-- sequence writes WAL and gives the transaction an xid, so its commit
-- waits for a WAL flush, and a reserve (the first call of each
-- millisecond) would cost every read-only transaction a flush. They are
-- reset by a crash and absent on a promoted standby. What must survive is
-- the lease, a logged sequence: no ID is issued with a time above it, and a
-- call that would go beyond extends it (by the lease window: 200 ms, or
-- max_clock_drift_ms when that is smaller, at least 1; one logged setval()
-- per window of ID time) under the reserve lock before it returns. The WAL is written in order, so the commit of any row holding
-- an ID flushes the lease record written before that ID: after a crash or
-- a promotion the lease is at least every committed ID's time.
--
-- IDs handed out in a transaction that never committed (a client that
-- kept an ID its transaction lost) may be above the recovered lease. Two
-- checks find every such loss, and move the pair past the lease and past
-- every time the previous holder of the pair could have issued (its IDs
-- were at most max_clock_drift_ms ahead of a clock that has not yet passed
-- this call's):
--   * a reserve that finds the pair never taken (NULL) while the lease
--     holds a time: a crash reset it, in place (one backend died, the
--     postmaster stayed) or not, or a promotion, or a base backup;
--   * every call compares the incarnation (a hash of the database's name,
--     the pair's file and pg_postmaster_start_time()) with the one
--     recorded in the sequence snowflake_portable.incarnation: a restart,
--     a promotion (the primary's record came with the WAL), a copy of the
--     database (CREATE DATABASE ... TEMPLATE, a dump restored elsewhere or
--     under the same name) or of the data directory differ. With a registry a new incarnation also claims
--     again: a copy must not issue under its original's node id.
-- The jump needs the clock not to have stepped back across the restart;
-- and with a fixed node id nothing can stop an old primary that still runs
-- (split brain), nor a copy that keeps its original's node id. Not seen: a
-- crash before the WAL of a database's very first IDs was flushed (the
-- lease comes back empty), and a data-only restore over the live schema.

-- # Node ids from a registry
--
-- With registry_fleet set, the node id is claimed from the registry
-- (registry/snowflake_registry.sql) through dblink, under the registry
-- lock. The grant in force is one unlogged sequence, grant_word =
-- (until_ms << node_bits) | node_id, read by a call between its two reads
-- of the guard, so the pair and the node id it pairs are of one moment: a
-- new claim installs its word inside a reserve that first moves the pair
-- above the claim's floor. No ID is issued past until_ms: a call whose
-- pair would be beyond renews first (and fails, taking nothing, when the
-- registry cannot be reached); a call with half the grant left renews if
-- no other session is (on the reserve path too). A claim is made with a
-- new secret in each incarnation and never renewed from another (a
-- promoted standby, a restart, a copy of the database or of the data
-- directory all claim anew), so two servers never share a claim. The
-- registry sees only the secret's hash; a claim whose answer was lost is
-- retried revealing its secret (the registry answers the same claim), and
-- the next names a new one. Renewals and resumptions are signed with the
-- key the claim's answer carried (signed_call()): nothing in a call's
-- text, which the registry's pg_stat_activity and log show, can be used
-- again. A claim a fence ended (the registry was restored or
-- failed over) is resumed when the registry allows it, as the extension's
-- worker does, and claimed again when not. Every registry call runs on a
-- dblink connection of its own, polled: a renewal ends after
-- registry_timeout_ms (a cancel or statement_timeout ends it sooner, and
-- the registry's side ends by its own statement_timeout), so a registry
-- that stalls holds no lock for longer. A renewal that still leaves the
-- next ID outside the grant fails (55000) rather than ask again.
--
-- Advisory locks: RESERVE_LOCK, pg_advisory_lock(1936617321, 1) ('snow',
-- 1), and the registry lock, (1936617321, 2), per database like the
-- sequences; an application must not use them. Any role may take an
-- advisory lock (pg_advisory_lock is granted to PUBLIC), so any role that
-- can connect can stall snowflake_next() by holding one: calls then wait
-- as for any lock, within lock_timeout and statement_timeout.
--
-- A call in a READ ONLY transaction fails (nextval() writes), with 25006.

BEGIN;
SET LOCAL client_min_messages = warning;

CREATE SCHEMA IF NOT EXISTS snowflake_portable;
REVOKE ALL ON SCHEMA snowflake_portable FROM PUBLIC;
GRANT USAGE ON SCHEMA snowflake_portable TO PUBLIC;

-- Parses an epoch the way the extension reads snowflake_id.epoch: UTC
-- unless the text names a zone (Z, UTC, +HH, +HHMM, +HH:MM), whatever the
-- session's TimeZone; a whole millisecond. Milliseconds since 1970.
CREATE OR REPLACE FUNCTION snowflake_portable.parse_epoch(p_epoch text)
RETURNS bigint
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    m text[];
    y int; mo int; d int; h int; mi int; s int;
    frac text; zone_ms bigint := 0;
    last_day int;
BEGIN
    m := regexp_match(p_epoch,
        '^\s*(\d{4})-(\d{2})-(\d{2})(?:[ T](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?)?\s*(?:([Zz]|[Uu][Tt][Cc])|([+-])(\d{2}):?(\d{2})?)?\s*$');
    IF m IS NULL THEN
        RAISE EXCEPTION 'snowflake_id: epoch ''%'' is not a valid timestamp', left(p_epoch, 64)
            USING ERRCODE = '22007',
                  HINT = 'Write it like ''2025-01-01 00:00:00+00'': YYYY-MM-DD[ HH:MM[:SS[.fff]]], then Z, UTC, +HH or +HH:MM (UTC when no zone is given).';
    END IF;
    y := m[1]::int; mo := m[2]::int; d := m[3]::int;
    h := coalesce(m[4]::int, 0); mi := coalesce(m[5]::int, 0); s := coalesce(m[6]::int, 0);
    frac := rpad(coalesce(m[7], '0'), 9, '0');
    IF mo NOT BETWEEN 1 AND 12 THEN
        RAISE EXCEPTION 'snowflake_id: epoch ''%'' has a month out of range', p_epoch
            USING ERRCODE = '22007', HINT = 'Write it like ''2025-01-01 00:00:00+00''.';
    END IF;
    last_day := extract(day FROM make_date(y, mo, 1) + interval '1 month' - interval '1 day')::int;
    IF d NOT BETWEEN 1 AND last_day OR h > 23 OR mi > 59 OR s > 59 THEN
        RAISE EXCEPTION 'snowflake_id: epoch ''%'' has a day or time of day out of range', p_epoch
            USING ERRCODE = '22007', HINT = 'Write it like ''2025-01-01 00:00:00+00''.';
    END IF;
    IF right(frac, 6) <> '000000' THEN
        RAISE EXCEPTION 'snowflake_id: epoch ''%'' is not a whole millisecond', p_epoch
            USING ERRCODE = '22007', HINT = 'Give at most three digits of fractional seconds.';
    END IF;
    IF m[9] IS NOT NULL THEN
        IF m[10]::int > 15 OR coalesce(m[11]::int, 0) > 59 THEN
            RAISE EXCEPTION 'snowflake_id: epoch ''%'' has a zone offset out of range', p_epoch
                USING ERRCODE = '22007', HINT = 'A zone offset is at most +15:59.';
        END IF;
        zone_ms := (m[10]::int * 60 + coalesce(m[11]::int, 0)) * 60000::bigint;
        IF m[9] = '-' THEN zone_ms := -zone_ms; END IF;
    END IF;
    RETURN (make_date(y, mo, d) - date '1970-01-01')::bigint * 86400000
         + ((h * 60 + mi) * 60 + s) * 1000::bigint + left(frac, 3)::bigint - zone_ms;
END
$$;

-- The configuration: one row, set by the owner. The epoch and the layout
-- cannot change once IDs were issued (IDs would repeat or stop sorting);
-- the node id can (the owner vouches that no other server issues with the
-- new one), and so can the drift limit.
CREATE TABLE IF NOT EXISTS snowflake_portable.config (
    one bool PRIMARY KEY DEFAULT true CHECK (one),
    epoch text NOT NULL DEFAULT '2025-01-01 00:00:00+00',
    epoch_unix_ms bigint NOT NULL DEFAULT 1735689600000,
    node_bits int NOT NULL DEFAULT 10,
    sequence_bits int NOT NULL DEFAULT 12,
    node_id int,
    max_clock_drift_ms bigint NOT NULL DEFAULT 5000,
    CONSTRAINT layout CHECK (node_bits BETWEEN 0 AND 27 AND sequence_bits BETWEEN 1 AND 28
                             AND node_bits + sequence_bits <= 28),
    CONSTRAINT node_id_in_layout CHECK (node_id BETWEEN 0 AND (1 << node_bits) - 1),
    CONSTRAINT drift CHECK (max_clock_drift_ms BETWEEN 0 AND 3600000)
);
-- Node ids from a registry (registry/snowflake_registry.sql) through
-- dblink: the fleet (NULL: no registry, node_id is the node id) and how far
-- ahead each claim and renewal grants it.
-- (An earlier version's pair_to_id() had a body that depends on the row
-- type and so forbids a new column: dropped, made again below.)
DROP FUNCTION IF EXISTS snowflake_portable.pair_to_id(bigint, int, snowflake_portable.config);
ALTER TABLE snowflake_portable.config
    ADD COLUMN IF NOT EXISTS registry_fleet text,
    ADD COLUMN IF NOT EXISTS registry_grant_ms bigint NOT NULL DEFAULT 30000,
    ADD COLUMN IF NOT EXISTS registry_timeout_ms bigint NOT NULL DEFAULT 5000;
INSERT INTO snowflake_portable.config DEFAULT VALUES ON CONFLICT DO NOTHING;

-- The registry's connection string: a password in it is what dblink needs
-- of a role that is not a superuser, so only the owner may read it (not
-- PUBLIC, nor pg_read_all_settings: it is no setting).
CREATE TABLE IF NOT EXISTS snowflake_portable.registry_connection (
    one bool PRIMARY KEY DEFAULT true CHECK (one),
    conninfo text NOT NULL
);
REVOKE ALL ON snowflake_portable.registry_connection FROM PUBLIC;
REVOKE ALL ON snowflake_portable.config FROM PUBLIC;
GRANT SELECT ON snowflake_portable.config TO PUBLIC;

-- The generator's state (see the header). CACHE 1: every session must
-- take from the one shared value. pg_sequence_last_value() reads NULL
-- from a sequence not yet called (and from an unlogged one after a crash).
CREATE UNLOGGED SEQUENCE IF NOT EXISTS snowflake_portable.pair AS bigint MINVALUE 0 START 0 CACHE 1 NO CYCLE;
CREATE UNLOGGED SEQUENCE IF NOT EXISTS snowflake_portable.guard AS bigint MINVALUE 0 START 0 CACHE 1 NO CYCLE;
CREATE SEQUENCE IF NOT EXISTS snowflake_portable.lease AS bigint MINVALUE 0 START 0 CACHE 1 NO CYCLE;
-- With a registry: the grant in force, (until_ms << node_bits) | node_id,
-- changed only under the registry lock (a new node id also inside a
-- reserve's guard); the claim's number, the secret of the last claim sent
-- (two random 60-bit halves), the incarnation it was made in, the
-- incarnation of a secret whose claim has not been answered yet (0 once
-- it was: the next claim reveals it, as a retry), and its floor; the
-- claim's signing key (two 64-bit halves) and the last call number. Unlogged: a crash or a promotion claims again (a copy of a data
-- directory must not renew its original's claim).
CREATE UNLOGGED SEQUENCE IF NOT EXISTS snowflake_portable.grant_word AS bigint MINVALUE 0 START 0 CACHE 1 NO CYCLE;
CREATE UNLOGGED SEQUENCE IF NOT EXISTS snowflake_portable.claim_id AS bigint MINVALUE 0 START 0 CACHE 1 NO CYCLE;
CREATE UNLOGGED SEQUENCE IF NOT EXISTS snowflake_portable.token_a AS bigint MINVALUE 0 START 0 CACHE 1 NO CYCLE;
CREATE UNLOGGED SEQUENCE IF NOT EXISTS snowflake_portable.token_b AS bigint MINVALUE 0 START 0 CACHE 1 NO CYCLE;
CREATE UNLOGGED SEQUENCE IF NOT EXISTS snowflake_portable.claim_incarnation AS bigint MINVALUE 0 START 0 CACHE 1 NO CYCLE;
CREATE UNLOGGED SEQUENCE IF NOT EXISTS snowflake_portable.token_pending AS bigint MINVALUE 0 START 0 CACHE 1 NO CYCLE;
CREATE UNLOGGED SEQUENCE IF NOT EXISTS snowflake_portable.key_a AS bigint MINVALUE -9223372036854775808 START 0 CACHE 1 NO CYCLE;
CREATE UNLOGGED SEQUENCE IF NOT EXISTS snowflake_portable.key_b AS bigint MINVALUE -9223372036854775808 START 0 CACHE 1 NO CYCLE;
CREATE UNLOGGED SEQUENCE IF NOT EXISTS snowflake_portable.call_number AS bigint MINVALUE 0 START 1 CACHE 1 NO CYCLE;
-- The id of the registry the last claim was made at (its UUID in two
-- halves; 0 and 0: none yet). Logged: a restart, a crash or a promoted
-- standby claims only at that registry (claim_keyed()'s p_registry_id), not
-- at another one under the same address, which knows none of the floors.
CREATE SEQUENCE IF NOT EXISTS snowflake_portable.registry_id_a AS bigint MINVALUE -9223372036854775808 START 0 CACHE 1 NO CYCLE;
CREATE SEQUENCE IF NOT EXISTS snowflake_portable.registry_id_b AS bigint MINVALUE -9223372036854775808 START 0 CACHE 1 NO CYCLE;
-- The first millisecond the claim in force may issue in (its floor + 1).
CREATE UNLOGGED SEQUENCE IF NOT EXISTS snowflake_portable.claim_floor AS bigint MINVALUE 0 START 0 CACHE 1 NO CYCLE;
-- When the registry last failed to answer (ms since 1970): calls that wait
-- for a renewal within a second of a failure fail at once instead of each
-- waiting out its own connection attempt.
CREATE UNLOGGED SEQUENCE IF NOT EXISTS snowflake_portable.registry_failed_at AS bigint MINVALUE 0 START 0 CACHE 1 NO CYCLE;
CREATE SEQUENCE IF NOT EXISTS snowflake_portable.incarnation AS bigint MINVALUE 0 START 0 CACHE 1 NO CYCLE;
REVOKE ALL ON SEQUENCE snowflake_portable.pair, snowflake_portable.guard,
    snowflake_portable.lease, snowflake_portable.incarnation, snowflake_portable.grant_word,
    snowflake_portable.claim_id, snowflake_portable.token_a, snowflake_portable.token_b,
    snowflake_portable.claim_incarnation, snowflake_portable.token_pending,
    snowflake_portable.key_a, snowflake_portable.key_b, snowflake_portable.call_number,
    snowflake_portable.registry_id_a, snowflake_portable.registry_id_b,
    snowflake_portable.claim_floor, snowflake_portable.registry_failed_at FROM PUBLIC;

-- Whether this session holds the advisory lock (1936617321, p_lock): an
-- exception handler lets it go only then (not while it was waited for).
CREATE OR REPLACE FUNCTION snowflake_portable.holds_lock(p_lock int)
RETURNS bool
LANGUAGE sql VOLATILE
AS $$
SELECT EXISTS (SELECT FROM pg_catalog.pg_locks l
               WHERE l.locktype = 'advisory' AND l.pid = pg_catalog.pg_backend_pid() AND l.granted
                 AND l.classid = 1936617321 AND l.objid = p_lock AND l.objsubid = 2)
$$;

-- What an exception handler does with the lock it may hold.
CREATE OR REPLACE FUNCTION snowflake_portable.release_if_held(p_lock int)
RETURNS void
LANGUAGE sql VOLATILE
AS $$
SELECT pg_catalog.pg_advisory_unlock(1936617321, p_lock) WHERE snowflake_portable.holds_lock(p_lock)
$$;

CREATE OR REPLACE FUNCTION snowflake_portable.check_config()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NEW.node_bits IS NULL OR NEW.sequence_bits IS NULL OR NEW.node_bits NOT BETWEEN 0 AND 27
       OR NEW.sequence_bits NOT BETWEEN 1 AND 28 OR NEW.node_bits + NEW.sequence_bits > 28 THEN
        RAISE EXCEPTION 'snowflake_id: node_bits % and sequence_bits % are not a layout', NEW.node_bits, NEW.sequence_bits
            USING ERRCODE = '22023', HINT = 'node_bits 0 to 27, sequence_bits 1 to 28, together at most 28 (the default: 10 and 12).';
    END IF;
    IF NEW.node_id NOT BETWEEN 0 AND (1 << NEW.node_bits) - 1 THEN
        RAISE EXCEPTION 'snowflake_id: node id % does not fit in % node bits', NEW.node_id, NEW.node_bits
            USING ERRCODE = '22023', HINT = format('Give a node id from 0 to %s.', (1 << NEW.node_bits) - 1);
    END IF;
    IF NEW.registry_fleet IS NOT NULL AND length(NEW.registry_fleet) NOT BETWEEN 1 AND 63 THEN
        RAISE EXCEPTION 'snowflake_id: registry_fleet must be 1 to 63 characters'
            USING ERRCODE = '22023', HINT = 'Give the fleet''s name (default: ''default''), or NULL for no registry.';
    END IF;
    IF NEW.registry_grant_ms IS NULL OR NEW.registry_grant_ms NOT BETWEEN 1000 AND 3600000 THEN
        RAISE EXCEPTION 'snowflake_id: registry_grant_ms % is out of range', NEW.registry_grant_ms
            USING ERRCODE = '22023', HINT = 'Give 1000 to 3600000 milliseconds (the default: 30000).';
    END IF;
    IF NEW.registry_timeout_ms IS NULL OR NEW.registry_timeout_ms NOT BETWEEN 100 AND 600000 THEN
        RAISE EXCEPTION 'snowflake_id: registry_timeout_ms % is out of range', NEW.registry_timeout_ms
            USING ERRCODE = '22023', HINT = 'Give 100 to 600000 milliseconds (the default: 5000).';
    END IF;
    IF NEW.max_clock_drift_ms IS NULL OR NEW.max_clock_drift_ms NOT BETWEEN 0 AND 3600000 THEN
        RAISE EXCEPTION 'snowflake_id: max_clock_drift_ms % is out of range', NEW.max_clock_drift_ms
            USING ERRCODE = '22023', HINT = 'Give 0 to 3600000 milliseconds (the default: 5000).';
    END IF;
    NEW.epoch_unix_ms := snowflake_portable.parse_epoch(NEW.epoch);
    IF TG_OP = 'UPDATE' AND (NEW.registry_fleet, NEW.node_id) IS DISTINCT FROM (OLD.registry_fleet, OLD.node_id) THEN
        -- Another fleet or another node id to claim: the next call claims.
        -- (The registry lock, to the end of this transaction: a renewal
        -- under way would install the old claim's grant over the 0, and
        -- one after reads the configuration committed.)
        PERFORM pg_advisory_xact_lock(1936617321, 2);
        PERFORM setval('snowflake_portable.grant_word', 0);
        -- (A claim still unanswered was for the old ones: a new token.)
        PERFORM setval('snowflake_portable.token_pending', 0);
    END IF;
    IF NEW.epoch_unix_ms > (extract(epoch FROM clock_timestamp()) * 1000)::bigint THEN
        RAISE EXCEPTION 'snowflake_id: epoch ''%'' is in the future', NEW.epoch
            USING ERRCODE = '22023', HINT = 'The epoch is time zero of the IDs: a time in the past.';
    END IF;
    IF TG_OP = 'UPDATE'
       AND (NEW.epoch_unix_ms, NEW.node_bits, NEW.sequence_bits)
           IS DISTINCT FROM (OLD.epoch_unix_ms, OLD.node_bits, OLD.sequence_bits)
       AND pg_sequence_last_value('snowflake_portable.lease') IS NOT NULL THEN
        RAISE EXCEPTION 'snowflake_id: the epoch and the layout cannot change once IDs were issued'
            USING ERRCODE = '55000',
                  DETAIL = format('They are %s and %s/%s/%s (time/node/sequence bits).', OLD.epoch,
                                  63 - OLD.node_bits - OLD.sequence_bits, OLD.node_bits, OLD.sequence_bits),
                  HINT = 'IDs under another epoch or layout would repeat or stop sorting. Change only node_id or max_clock_drift_ms.';
    END IF;
    RETURN NEW;
END
$$;
CREATE OR REPLACE TRIGGER check_config BEFORE INSERT OR UPDATE ON snowflake_portable.config
    FOR EACH ROW EXECUTE FUNCTION snowflake_portable.check_config();

-- The error of a call whose next ID (at p_ms) lies further ahead of the
-- clock than the drift limit plus 200 ms allows: the clock stepped back
-- (58000), or, with a registry, a new claim's floor lies ahead (55000: a
-- wait, as the extension's).
CREATE OR REPLACE FUNCTION snowflake_portable.fail_ahead(p_ms bigint, p_now_ms bigint, p_epoch_unix_ms bigint,
    p_max_drift_ms bigint, p_registry bool)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_registry AND p_ms <= coalesce(pg_sequence_last_value('snowflake_portable.claim_floor'), -1) THEN
        RAISE EXCEPTION 'snowflake_id: the node id claimed from the registry may issue only above a floor % ms ahead of the clock', p_ms - p_now_ms
            USING ERRCODE = '55000',
                  DETAIL = format('The floor is %s.', to_timestamp((p_ms + p_epoch_unix_ms) / 1000.0)),
                  HINT = 'This database claimed its node id again after the registry ended its claim (a fence after the registry was restored or failed over, a pause past the grant): it issues only above every ID an earlier holder may have issued. Issuing resumes by itself when the clock is near the floor.';
    END IF;
    RAISE EXCEPTION 'snowflake_id: the clock is % ms behind the last issued ID, more than max_clock_drift_ms (% ms) allows',
        p_ms - p_now_ms, p_max_drift_ms
        USING ERRCODE = '58000',
              DETAIL = format('The last issued ID''s time is %s.', to_timestamp((p_ms + p_epoch_unix_ms) / 1000.0)),
              HINT = 'The clock stepped back (fix its time source), or raise snowflake_portable.config.max_clock_drift_ms to issue ahead of it.';
END
$$;

-- Reserves `p_count` pairs above the clock, `p_floor_ms` and every value
-- taken so far, under the guard (see the header); `first` is the first,
-- NULL when `p_only_if_behind` and the pair is no longer behind the clock
-- or the floor (another reserve moved it: take again). p_count 0 only moves
-- the pair. A call that finds the guard odd comes here to wait. A batch
-- that would span more than max_clock_drift_ms milliseconds from where the
-- pair stands starts at the next millisecond instead (the rest of this one
-- is a gap), so that every batch within the bound fits.
-- With a registry (p_registry): `word` is the grant in force inside the
-- guard, whose node id the range is issued under; a range it does not
-- cover takes nothing and returns `word` -1 and, as `first`, the
-- millisecond the grant must reach (renew, then reserve again).
-- p_new_word, when given, is installed inside the guard, after the pair
-- has moved to p_floor_ms and to the next millisecond (a new node id may
-- be smaller: IDs stay in issue order): a new claim's node id is never
-- seen with a pair below its floor.
CREATE OR REPLACE FUNCTION snowflake_portable.reserve(
    p_count bigint, p_floor_ms bigint, p_only_if_behind bool,
    p_epoch_unix_ms bigint, p_node_bits int, p_sequence_bits int, p_max_drift_ms bigint,
    p_registry bool, p_new_word bigint, OUT first bigint, OUT word bigint)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    w bigint;
    base bigint;
    now_ms bigint;
    lease_ms bigint;
    first_ms bigint;
    end_ms bigint;
    time_limit bigint := 1::bigint << (63 - p_node_bits - p_sequence_bits);
BEGIN
    LOOP
        BEGIN
            PERFORM pg_advisory_lock(1936617321, 1);
            IF coalesce(pg_sequence_last_value('snowflake_portable.guard') % 2, 1) = 1 THEN
                -- Never taken (an install, or a crash reset it): its first
                -- nextval() gives 0, which a call reads as it reads NULL;
                -- take it now, so that the step below changes the value.
                -- Or odd: a reserve that died half way (its session ended
                -- inside it) left it so; the pair is above every value kept.
                PERFORM nextval('snowflake_portable.guard');
            END IF;
            now_ms := floor(date_part('epoch', clock_timestamp()) * 1000)::bigint - p_epoch_unix_ms;
            IF p_only_if_behind
               AND coalesce(pg_sequence_last_value('snowflake_portable.pair'), -1) >> p_sequence_bits
                   >= greatest(now_ms, p_floor_ms) THEN
                PERFORM pg_advisory_unlock(1936617321, 1);
                RETURN;
            END IF;
            PERFORM nextval('snowflake_portable.guard');  -- guard: odd
            IF pg_sequence_last_value('snowflake_portable.pair') IS NULL THEN
                lease_ms := pg_sequence_last_value('snowflake_portable.lease');
                IF lease_ms IS NOT NULL THEN
                    -- IDs were issued and the pair is gone: a crash (in
                    -- place, or of the whole server) or a promotion reset
                    -- it. Past the lease and every time it could have
                    -- reached (see the header).
                    PERFORM setval('snowflake_portable.pair',
                        ((greatest(lease_ms, now_ms + p_max_drift_ms) + 1) << p_sequence_bits) - 1);
                END IF;
            END IF;
            w := nextval('snowflake_portable.pair');  -- the reserve's take
            IF p_new_word IS NOT NULL THEN
                p_floor_ms := greatest(p_floor_ms, (w >> p_sequence_bits) + 1);
            END IF;
            base := greatest(w, (greatest(now_ms, p_floor_ms) << p_sequence_bits) - 1);
            first_ms := (base + 1) >> p_sequence_bits;
            end_ms := (base + greatest(p_count, 1)) >> p_sequence_bits;
            IF p_count > 1 AND end_ms - first_ms > p_max_drift_ms THEN
                -- From the next millisecond's first pair.
                base := ((first_ms + 1) << p_sequence_bits) - 1;
                first_ms := first_ms + 1;
                end_ms := (base + p_count) >> p_sequence_bits;
            END IF;
            IF end_ms >= time_limit THEN
                RAISE EXCEPTION 'snowflake_id: the time field is used up'
                    USING ERRCODE = '54000',
                          HINT = 'The layout''s time field ends; a new epoch or layout is a new ID space.';
            END IF;
            word := pg_sequence_last_value('snowflake_portable.grant_word');
            IF p_registry AND p_count > 0 AND p_new_word IS NULL
               AND (word IS NULL OR end_ms > word >> p_node_bits) THEN
                -- Not in the grant: take nothing; the caller renews to
                -- cover end_ms (returned as `first`).
                PERFORM nextval('snowflake_portable.guard');  -- guard: even
                PERFORM pg_advisory_unlock(1936617321, 1);
                word := -1;
                first := end_ms;
                RETURN;
            END IF;
            IF p_count > 0 AND end_ms - now_ms > p_max_drift_ms THEN
                -- Ahead of the drift limit: take nothing (the guard goes
                -- even with the pair at w, a gap of one) and wait outside
                -- the lock, or fail when the clock is far behind.
                PERFORM nextval('snowflake_portable.guard');  -- guard: even
                PERFORM pg_advisory_unlock(1936617321, 1);
                IF (w >> p_sequence_bits) - now_ms > p_max_drift_ms + 200 THEN
                    PERFORM snowflake_portable.fail_ahead(w >> p_sequence_bits, now_ms, p_epoch_unix_ms,
                                                          p_max_drift_ms, p_registry);
                END IF;
                IF end_ms - first_ms > p_max_drift_ms THEN
                    RAISE EXCEPTION 'snowflake_id: a batch of % IDs spans % ms, more than max_clock_drift_ms (% ms) allows',
                        p_count, end_ms - first_ms, p_max_drift_ms
                        USING ERRCODE = '54000', HINT = 'Ask for fewer IDs at once.';
                END IF;
                PERFORM pg_sleep((end_ms - now_ms - p_max_drift_ms) / 1000.0);
                CONTINUE;
            END IF;
            -- The lease first: nothing of the range may be handed out
            -- before it covers it.
            IF end_ms > coalesce(pg_sequence_last_value('snowflake_portable.lease'), -1) THEN
                PERFORM setval('snowflake_portable.lease', end_ms + greatest(1, least(200, p_max_drift_ms)));
            END IF;
            PERFORM setval('snowflake_portable.pair', base + p_count);
            IF p_new_word IS NOT NULL THEN
                PERFORM setval('snowflake_portable.grant_word', p_new_word);
                word := p_new_word;
            END IF;
            PERFORM nextval('snowflake_portable.guard');  -- guard: even
            PERFORM pg_advisory_unlock(1936617321, 1);
            first := base + 1;
            RETURN;
        EXCEPTION WHEN OTHERS OR query_canceled THEN
            -- Inside the lock (not while waiting for it): leave the guard
            -- even if it can be (in a READ ONLY transaction it cannot: the
            -- next reserve makes it even) and the lock free, then fail as
            -- asked.
            IF snowflake_portable.holds_lock(1) THEN
                BEGIN
                    IF pg_sequence_last_value('snowflake_portable.guard') % 2 = 1 THEN
                        PERFORM nextval('snowflake_portable.guard');
                    END IF;
                EXCEPTION WHEN OTHERS OR query_canceled THEN
                    NULL;
                END;
                PERFORM pg_advisory_unlock(1936617321, 1);
            END IF;
            RAISE;
        END;
    END LOOP;
END
$$;

-- Extends the lease to cover `p_ms` and a window more (200 ms, or the
-- drift limit when smaller: a restart resumes after the lease, within the
-- limit plus the 200 ms a call may wait), under the reserve lock so that
-- the lease only grows.
CREATE OR REPLACE FUNCTION snowflake_portable.extend_lease(p_ms bigint, p_max_drift_ms bigint)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pg_advisory_lock(1936617321, 1);
    IF p_ms > coalesce(pg_sequence_last_value('snowflake_portable.lease'), -1) THEN
        PERFORM setval('snowflake_portable.lease', p_ms + greatest(1, least(200, p_max_drift_ms)));
    END IF;
    PERFORM pg_advisory_unlock(1936617321, 1);
EXCEPTION WHEN OTHERS OR query_canceled THEN
    PERFORM snowflake_portable.release_if_held(1);
    RAISE;
END
$$;

-- This incarnation: the database by its name (a copy has another; two
-- databases of one server never share one) and the file of the pair (a
-- database dropped and restored under its name, or a restore that drops
-- and creates the schema's objects, has another), and the server's start.
-- The same in every session (no setting of the session's enters it). (A
-- body in quotes: the sequence is looked up when called, not tied to it.)
CREATE OR REPLACE FUNCTION snowflake_portable.incarnation()
RETURNS bigint
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
SELECT hashtextextended(current_database()::text COLLATE "C" || '/'
                        || pg_relation_filenode('snowflake_portable.pair'::regclass)::text,
                        (date_part('epoch', pg_postmaster_start_time()) * 1000000)::bigint)
       & 9223372036854775807
$$;

-- What a call does when the incarnation recorded is not this one (see the
-- header): past the lease and every time the previous incarnation could
-- have issued; with a registry, a new claim. Under the registry lock, so
-- that no claim made in this incarnation is forgotten by a late second
-- session.
CREATE OR REPLACE FUNCTION snowflake_portable.new_incarnation(c snowflake_portable.config, p_incarnation bigint)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    now_ms bigint;
    lease_ms bigint;
BEGIN
    BEGIN
        PERFORM pg_advisory_lock(1936617321, 2);
        IF pg_sequence_last_value('snowflake_portable.incarnation') IS DISTINCT FROM p_incarnation THEN
            lease_ms := pg_sequence_last_value('snowflake_portable.lease');
            IF lease_ms IS NOT NULL THEN
                now_ms := floor(date_part('epoch', clock_timestamp()) * 1000)::bigint - c.epoch_unix_ms;
                PERFORM snowflake_portable.reserve(0, greatest(now_ms + c.max_clock_drift_ms, lease_ms) + 1, false,
                    c.epoch_unix_ms, c.node_bits, c.sequence_bits, c.max_clock_drift_ms, false, NULL);
            END IF;
            -- A claim of another incarnation is never renewed: claim again.
            PERFORM setval('snowflake_portable.grant_word', 0);
            PERFORM setval('snowflake_portable.incarnation', p_incarnation);
        END IF;
        PERFORM pg_advisory_unlock(1936617321, 2);
    EXCEPTION WHEN OTHERS OR query_canceled THEN
        PERFORM snowflake_portable.release_if_held(2);
        RAISE;
    END;
END
$$;

-- Runs one of the registry's functions through dblink; its one row. On a
-- connection of its own, polled (dblink() itself waits in libpq, where
-- neither a cancel nor statement_timeout reaches it): no answer by
-- p_deadline (one for all the calls of a renewal) is 08006, and the
-- connection is dropped. The connection string gets, unless it has them,
-- a connect_timeout (the time left, in whole seconds, at least 2, as
-- libpq counts them: dblink_connect() waits in libpq too) and options
-- setting the registry session's statement_timeout to registry_timeout_ms
-- (so that a call given up here ends there too, and keeps no backend of
-- the registry waiting on a lock).
CREATE OR REPLACE FUNCTION snowflake_portable.registry_call(p_sql text, p_columns text, p_deadline timestamptz,
    p_timeout_ms bigint)
RETURNS record
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    dblink_schema name;
    conninfo text;
    conn constant text := 'snowflake_portable_registry';
    uri bool;
    busy int;
    r record;
BEGIN
    SELECT n.nspname INTO dblink_schema
    FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'dblink';
    IF NOT FOUND THEN
        RAISE EXCEPTION 'snowflake_id: dblink is not installed in this database'
            USING ERRCODE = '55000',
                  HINT = 'Node ids from a registry are claimed through dblink: CREATE EXTENSION dblink (as a role that may), or set registry_fleet to NULL and a node_id.';
    END IF;
    SELECT rc.conninfo INTO conninfo FROM snowflake_portable.registry_connection rc;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'snowflake_id: no registry connection string'
            USING ERRCODE = '55000',
                  HINT = 'INSERT INTO snowflake_portable.registry_connection (conninfo) VALUES (''host=... dbname=... user=... password=... connect_timeout=5'');';
    END IF;
    uri := conninfo ~ '^postgres(ql)?://';
    IF conninfo !~ 'connect_timeout' THEN
        conninfo := conninfo || CASE WHEN NOT uri THEN ' ' WHEN conninfo ~ '\?' THEN '&' ELSE '?' END
                             || 'connect_timeout='
                             || greatest(2, ceil(date_part('epoch', p_deadline - clock_timestamp())))::bigint::text;
    END IF;
    IF conninfo !~ 'options' THEN
        conninfo := conninfo || CASE WHEN NOT uri THEN ' options=''-c statement_timeout=' || p_timeout_ms || ''''
                                     WHEN conninfo ~ '\?' THEN '&options=-c%20statement_timeout%3D' || p_timeout_ms
                                     ELSE '?options=-c%20statement_timeout%3D' || p_timeout_ms END;
    END IF;
    BEGIN
        -- (A connection left by a call that failed half way.)
        EXECUTE format('SELECT %I.dblink_disconnect($1) WHERE $1 = ANY (%I.dblink_get_connections())',
                       dblink_schema, dblink_schema) USING conn;
        EXECUTE format('SELECT %I.dblink_connect($1, $2)', dblink_schema) USING conn, conninfo;
        EXECUTE format('SELECT %I.dblink_send_query($1, $2)', dblink_schema) USING conn, p_sql;
        LOOP
            EXECUTE format('SELECT %I.dblink_is_busy($1)', dblink_schema) INTO busy USING conn;
            EXIT WHEN busy = 0;
            IF clock_timestamp() > p_deadline THEN
                RAISE EXCEPTION 'snowflake_id: the registry did not answer within registry_timeout_ms (% ms)', p_timeout_ms
                    USING ERRCODE = '08006',
                          HINT = 'Issuing resumes by itself once the registry answers: check it (a lock, a pause, the network).';
            END IF;
            PERFORM pg_sleep(0.002);  -- (interruptible: a cancel ends the wait)
        END LOOP;
        EXECUTE format('SELECT * FROM %I.dblink_get_result($1) AS t(%s)', dblink_schema, p_columns) INTO STRICT r USING conn;
        EXECUTE format('SELECT %I.dblink_disconnect($1)', dblink_schema) USING conn;
    EXCEPTION WHEN OTHERS OR query_canceled THEN
        -- (The query on the registry's side ends at the statement_timeout
        -- the connection set; an answer lost so is repeated by a retry,
        -- which reveals the claim's secret.)
        BEGIN
            EXECUTE format('SELECT %I.dblink_disconnect($1) WHERE $1 = ANY (%I.dblink_get_connections())',
                           dblink_schema, dblink_schema) USING conn;
        EXCEPTION WHEN OTHERS OR query_canceled THEN
            NULL;
        END;
        RAISE;
    END;
    RETURN r;
END
$$;

-- The text of a signed call of the claim in force (renew_signed() or
-- resume_signed(), registry/snowflake_registry.sql): the next call number,
-- the call's arguments and the proof, sha256(key || hex(sha256(text))) over
-- the text the registry's call_text() makes of them. Under the registry
-- lock (one call at a time, numbered in order).
CREATE OR REPLACE FUNCTION snowflake_portable.signed_call(p_function text, p_fleet text, p_node_id bigint,
    VARIADIC p_args bigint[])
RETURNS text
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    claim bigint := pg_sequence_last_value('snowflake_portable.claim_id');
    call bigint := nextval('snowflake_portable.call_number');
    key text := lpad(to_hex(coalesce(pg_sequence_last_value('snowflake_portable.key_a'), 0)), 16, '0')
             || lpad(to_hex(coalesce(pg_sequence_last_value('snowflake_portable.key_b'), 0)), 16, '0');
    text text := concat_ws('|', p_function, p_node_id, claim, call, array_to_string(p_args, '|'), p_fleet);
BEGIN
    RETURN format('SELECT snowflake_registry.%s_signed(%L, %s, %s, %s, %s, %L)', p_function, p_fleet, p_node_id,
                  claim, call, array_to_string(p_args, ', '),
                  encode(sha256(convert_to(key || encode(sha256(convert_to(text, 'UTF8')), 'hex'), 'UTF8')), 'hex'));
END
$$;

-- Makes the grant cover IDs up to p_ms (and half a grant more): renews the
-- claim, resumes it when a fence ended it, or claims a node id (again) when
-- there is none in this incarnation or it cannot be resumed. Under the
-- registry lock: waits for it with p_wait; without, returns at once if
-- another session holds it, and a failure is not an error (the call it
-- serves is still in its grant), but a cancel is.
CREATE OR REPLACE FUNCTION snowflake_portable.ensure_grant(c snowflake_portable.config, p_ms bigint, p_wait bool)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    incarnation bigint := snowflake_portable.incarnation();
    node_mask bigint := (1::bigint << c.node_bits) - 1;
    word bigint;
    now_ms bigint;
    new_until bigint;
    secret text;
    previous_secret text;
    registry_id text;
    claiming bool := false;
    r record;
    claim_again bool := true;
    failed_state text;
    recent_failure bool := false;
    deadline timestamptz;
BEGIN
    BEGIN
        -- (Taken inside the block, so that a cancel right after it still
        -- reaches the handler that lets it go.)
        IF p_wait THEN
            PERFORM pg_advisory_lock(1936617321, 2);
        ELSIF NOT pg_try_advisory_lock(1936617321, 2) THEN
            RETURN;
        END IF;
        -- (As this statement's snapshot sees it: in READ COMMITTED, as
        -- committed now, after a change of the fleet or node id, which
        -- waited for this lock and set grant_word to 0.)
        SELECT * INTO c FROM snowflake_portable.config;
        deadline := clock_timestamp() + c.registry_timeout_ms * interval '1 millisecond';
        word := coalesce(pg_sequence_last_value('snowflake_portable.grant_word'), 0);
        now_ms := floor(date_part('epoch', clock_timestamp()) * 1000)::bigint - c.epoch_unix_ms;
        IF p_wait AND word >> c.node_bits < p_ms
           AND now_ms + c.epoch_unix_ms - coalesce(pg_sequence_last_value('snowflake_portable.registry_failed_at'), 0) < 1000 THEN
            recent_failure := true;  -- (not a new failure of the registry's)
            RAISE EXCEPTION 'snowflake_id: the registry could not be reached, and the grant does not cover the next ID'
                USING ERRCODE = '08001',
                      DETAIL = format('The last attempt failed %s ms ago.',
                                      now_ms + c.epoch_unix_ms - pg_sequence_last_value('snowflake_portable.registry_failed_at')),
                      HINT = 'Issuing resumes by itself once the registry answers: check it and snowflake_portable.registry_connection.';
        END IF;
        IF word <> 0 AND pg_sequence_last_value('snowflake_portable.claim_incarnation') = incarnation THEN
            IF word >> c.node_bits >= p_ms + c.registry_grant_ms / 2 THEN
                claim_again := false;  -- another session renewed meanwhile
            ELSE
                BEGIN
                    r := snowflake_portable.registry_call(snowflake_portable.signed_call(
                        'renew', c.registry_fleet, word & node_mask, greatest(now_ms, p_ms, 0), c.registry_grant_ms),
                        'until_ms bigint', deadline, c.registry_timeout_ms);
                    new_until := r.until_ms;
                EXCEPTION WHEN sqlstate '55000' THEN
                    new_until := 0;  -- the claim is lost: resumed below, or claimed again
                END;
                IF new_until = 0 THEN
                    -- A fence ended the claim (the registry was restored or
                    -- failed over): resume it when the registry can vouch
                    -- that no one took the node id over meanwhile.
                    BEGIN
                        r := snowflake_portable.registry_call(snowflake_portable.signed_call(
                            'resume', c.registry_fleet, word & node_mask, word >> c.node_bits,
                            greatest(now_ms, p_ms, 0), c.registry_grant_ms),
                            'until_ms bigint', deadline, c.registry_timeout_ms);
                        new_until := r.until_ms;
                    EXCEPTION WHEN sqlstate '55000' THEN
                        new_until := 0;  -- not resumable: claim again
                    END;
                END IF;
                claim_again := new_until = 0;
                IF new_until > word >> c.node_bits THEN
                    PERFORM setval('snowflake_portable.grant_word', (new_until << c.node_bits) | (word & node_mask));
                END IF;
            END IF;
        END IF;
        IF claim_again THEN
            -- A new secret for each claim sent; the secret of the last one
            -- sent in this incarnation that has no answer yet (lost, or
            -- timed out) is revealed: the registry answers that claim if it
            -- was made (one made by an earlier attempt, if that one's retry
            -- failed too, ends with its grant). A claim is never continued
            -- from another incarnation.
            IF pg_sequence_last_value('snowflake_portable.token_pending') = incarnation THEN
                previous_secret := lpad(to_hex(pg_sequence_last_value('snowflake_portable.token_a')), 15, '0')
                                || lpad(to_hex(pg_sequence_last_value('snowflake_portable.token_b')), 15, '0');
            END IF;
            PERFORM setval('snowflake_portable.token_a', ('x' || substr(md5(gen_random_uuid()::text), 1, 15))::bit(60)::bigint);
            PERFORM setval('snowflake_portable.token_b', ('x' || substr(md5(gen_random_uuid()::text), 1, 15))::bit(60)::bigint);
            PERFORM setval('snowflake_portable.token_pending', incarnation);
            secret := lpad(to_hex(pg_sequence_last_value('snowflake_portable.token_a')), 15, '0')
                   || lpad(to_hex(pg_sequence_last_value('snowflake_portable.token_b')), 15, '0');
            registry_id := CASE WHEN coalesce(pg_sequence_last_value('snowflake_portable.registry_id_a'), 0) <> 0
                                  OR coalesce(pg_sequence_last_value('snowflake_portable.registry_id_b'), 0) <> 0
                                THEN format('%L::uuid', lpad(to_hex(pg_sequence_last_value('snowflake_portable.registry_id_a')), 16, '0')
                                                      || lpad(to_hex(pg_sequence_last_value('snowflake_portable.registry_id_b')), 16, '0'))
                                ELSE 'NULL' END;
            claiming := true;
            r := snowflake_portable.registry_call(format(
                'SELECT c.*, (SELECT i.registry_id::text FROM snowflake_registry.registry_identity() i) '
                'FROM snowflake_registry.claim_keyed(%L, %s, %s, %s, %s, %s, %L, %s, 0, %L, %s, %L, %s, %s, %s) c',
                c.registry_fleet, c.epoch_unix_ms, c.node_bits, c.sequence_bits,
                coalesce(c.node_id::text, 'NULL'), CASE WHEN word <> 0 THEN (word & node_mask)::text ELSE 'NULL' END,
                encode(sha256(convert_to(secret, 'UTF8')), 'hex'),
                CASE WHEN previous_secret IS NULL THEN 'NULL' ELSE format('ARRAY[%L]', previous_secret) END,
                coalesce(host(inet_server_addr()), 'local'), coalesce(inet_server_port(), 0),
                'portable:' || current_database(), greatest(now_ms, p_ms, 0), c.registry_grant_ms, registry_id),
                'node_id int, claim_id bigint, floor_ms bigint, until_ms bigint, signing_key text, registry_id text',
                deadline, c.registry_timeout_ms);
            claiming := false;
            IF r.node_id NOT BETWEEN 0 AND node_mask OR r.until_ms < r.floor_ms OR coalesce(r.signing_key, '') !~ '^[0-9a-f]{32}$'
               OR coalesce(r.registry_id, '') !~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN
                RAISE EXCEPTION 'snowflake_id: the registry''s answer to a claim is not one it can give (node id %, floor %, until %)',
                    r.node_id, r.floor_ms, r.until_ms
                    USING ERRCODE = '08P01', HINT = 'Check that the connection string reaches a snowflake_id registry.';
            END IF;
            -- Answered: the next claim reveals nothing (before the claim is
            -- put in force: a claim whose IDs may be issued is never left
            -- to be revealed).
            PERFORM setval('snowflake_portable.token_pending', 0);
            PERFORM setval('snowflake_portable.claim_id', r.claim_id);
            PERFORM setval('snowflake_portable.key_a', ('x' || substr(r.signing_key, 1, 16))::bit(64)::bigint);
            PERFORM setval('snowflake_portable.key_b', ('x' || substr(r.signing_key, 17, 16))::bit(64)::bigint);
            PERFORM setval('snowflake_portable.registry_id_a', ('x' || substr(replace(r.registry_id, '-', ''), 1, 16))::bit(64)::bigint);
            PERFORM setval('snowflake_portable.registry_id_b', ('x' || substr(replace(r.registry_id, '-', ''), 17, 16))::bit(64)::bigint);
            PERFORM setval('snowflake_portable.claim_floor', greatest(r.floor_ms + 1, 0));
            -- The pair above the floor and the new node id, inside one
            -- reserve's guard.
            PERFORM snowflake_portable.reserve(0, r.floor_ms + 1, false, c.epoch_unix_ms, c.node_bits,
                c.sequence_bits, c.max_clock_drift_ms, true, (r.until_ms << c.node_bits) | r.node_id);
            PERFORM setval('snowflake_portable.claim_incarnation', incarnation);
        END IF;
        PERFORM pg_advisory_unlock(1936617321, 2);
    EXCEPTION WHEN OTHERS OR query_canceled THEN
        PERFORM snowflake_portable.release_if_held(2);
        GET STACKED DIAGNOSTICS failed_state = RETURNED_SQLSTATE;
        -- A claim the registry refused with an error (its transaction
        -- rolled back: none was made) is not revealed later, so a claim
        -- someone else made under its hash is never answered to this
        -- database. One with no answer (08...), or cancelled, may have been
        -- made: it stays to be revealed.
        IF claiming AND failed_state NOT LIKE '08%' AND failed_state <> '57014' THEN
            BEGIN
                PERFORM setval('snowflake_portable.token_pending', 0);
            EXCEPTION WHEN OTHERS THEN
                NULL;  -- (a READ ONLY transaction)
            END;
        END IF;
        IF failed_state LIKE '08%' AND NOT recent_failure THEN
            BEGIN
                PERFORM setval('snowflake_portable.registry_failed_at', floor(date_part('epoch', clock_timestamp()) * 1000)::bigint);
            EXCEPTION WHEN OTHERS THEN
                NULL;  -- (a READ ONLY transaction: only the fast failure is lost)
            END;
        END IF;
        IF p_wait OR failed_state = '57014' THEN
            RAISE;
        END IF;
        RETURN;
    END;
    IF p_wait AND coalesce(pg_sequence_last_value('snowflake_portable.grant_word'), 0) >> c.node_bits < p_ms THEN
        -- Renewed, and still short: the registry grants at most its clock
        -- plus the fleet's max_grant_ms. Fail rather than ask again.
        RAISE EXCEPTION 'snowflake_id: the registry''s grant ends at %, before the next ID''s time %',
            to_timestamp(((pg_sequence_last_value('snowflake_portable.grant_word') >> c.node_bits) + c.epoch_unix_ms) / 1000.0),
            to_timestamp((p_ms + c.epoch_unix_ms) / 1000.0)
            USING ERRCODE = '55000',
                  HINT = 'The registry grants at most its clock plus the fleet''s max_grant_ms: check that this server''s clock is not ahead of the registry''s, and keep max_clock_drift_ms and batches below that.';
    END IF;
END
$$;

-- Renews this database's claim if it is due: for a pg_cron job, which
-- keeps the grant ahead when calls are rare (calls renew too).
--   SELECT cron.schedule('snowflake-renew', '10 seconds', 'SELECT snowflake_portable.renew()');
CREATE OR REPLACE FUNCTION snowflake_portable.renew()
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c snowflake_portable.config;
    incarnation bigint := snowflake_portable.incarnation();
BEGIN
    SELECT * INTO c FROM snowflake_portable.config;
    IF c.registry_fleet IS NOT NULL AND NOT pg_is_in_recovery() THEN
        IF pg_sequence_last_value('snowflake_portable.incarnation') IS DISTINCT FROM incarnation THEN
            PERFORM snowflake_portable.new_incarnation(c, incarnation);
        END IF;
        PERFORM snowflake_portable.ensure_grant(c,
            floor(date_part('epoch', clock_timestamp()) * 1000)::bigint - c.epoch_unix_ms, true);
    END IF;
END
$$;

-- Issues `p_count` pairs; `first` is the first (the others follow it),
-- `node_id` the node id they are issued under. The one function behind
-- snowflake_next() and the batches. (Without a search_path of its own,
-- which would cost each call a setting's save and restore: only the owner
-- may call it, and its callers pin pg_catalog, pg_temp.)
CREATE OR REPLACE FUNCTION snowflake_portable.issue(p_count bigint, c snowflake_portable.config,
    OUT first bigint, OUT node_id int)
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    registry bool := c.registry_fleet IS NOT NULL;
    incarnation bigint := snowflake_portable.incarnation();
    g bigint;
    v bigint;
    w bigint;
    ms bigint;
    now_ms bigint;
    r record;
    time_limit bigint := 1::bigint << (63 - c.node_bits - c.sequence_bits);
BEGIN
    -- On every call (a session's setting could be forged by its client).
    IF pg_sequence_last_value('snowflake_portable.incarnation') IS DISTINCT FROM incarnation THEN
        IF pg_is_in_recovery() THEN
            RAISE EXCEPTION 'snowflake_id: IDs are not issued on a standby'
                USING ERRCODE = '25006',
                      HINT = 'Call snowflake_next() on the primary (target_session_attrs=read-write in the connection string). A promoted standby issues IDs.';
        END IF;
        PERFORM snowflake_portable.new_incarnation(c, incarnation);
    END IF;
    IF c.node_id IS NULL AND NOT registry THEN
        RAISE EXCEPTION 'snowflake_id: the node id is not set'
            USING ERRCODE = '55000',
                  HINT = format('Give this database a node id no other server of the fleet has, from 0 to %s: UPDATE snowflake_portable.config SET node_id = ...; or claim one from a registry (registry_fleet).',
                                (1 << c.node_bits) - 1);
    END IF;
    LOOP
        now_ms := floor(date_part('epoch', clock_timestamp()) * 1000)::bigint - c.epoch_unix_ms;
        IF p_count = 1 THEN
            -- The pair as it stands, read before taking: a call that
            -- fails or reserves takes nothing (failing calls must not push
            -- the pair ahead of a clock stepped back, and a take behind the
            -- clock would be thrown away).
            ms := coalesce(pg_sequence_last_value('snowflake_portable.pair'), -1) >> c.sequence_bits;
            IF ms - now_ms > c.max_clock_drift_ms + 200 THEN
                PERFORM snowflake_portable.fail_ahead(ms, now_ms, c.epoch_unix_ms, c.max_clock_drift_ms, registry);
            END IF;
            IF registry AND coalesce(pg_sequence_last_value('snowflake_portable.grant_word'), 0) >> c.node_bits
                            <= greatest(ms, now_ms) THEN
                -- No grant for the next ID: renew or claim first.
                PERFORM snowflake_portable.ensure_grant(c, greatest(ms, now_ms) + 1, true);
                CONTINUE;
            END IF;
            -- (NULL: never called since the install or a crash, as 0.)
            g := coalesce(pg_sequence_last_value('snowflake_portable.guard'), 0);
            IF ms >= now_ms AND g % 2 = 0 THEN
                v := nextval('snowflake_portable.pair');
                IF registry THEN
                    w := pg_sequence_last_value('snowflake_portable.grant_word');
                END IF;
                IF coalesce(pg_sequence_last_value('snowflake_portable.guard'), 0) = g THEN
                    ms := v >> c.sequence_bits;
                    IF ms >= time_limit THEN
                        RAISE EXCEPTION 'snowflake_id: the time field is used up'
                            USING ERRCODE = '54000',
                                  HINT = 'The layout''s time field ends; a new epoch or layout is a new ID space.';
                    END IF;
                    IF registry AND ms > w >> c.node_bits THEN
                        -- Beyond the grant (v is a gap): renew, take again.
                        PERFORM snowflake_portable.ensure_grant(c, ms, true);
                        CONTINUE;
                    END IF;
                    -- Ahead of the limit (a burst borrowed the future; the
                    -- clock was at most 200 ms further behind before the
                    -- take): hold the pair and wait for the clock.
                    WHILE ms - now_ms > c.max_clock_drift_ms LOOP
                        PERFORM pg_sleep((ms - now_ms - c.max_clock_drift_ms) / 1000.0);
                        now_ms := floor(date_part('epoch', clock_timestamp()) * 1000)::bigint - c.epoch_unix_ms;
                    END LOOP;
                    IF ms > coalesce(pg_sequence_last_value('snowflake_portable.lease'), -1) THEN
                        PERFORM snowflake_portable.extend_lease(ms, c.max_clock_drift_ms);
                    END IF;
                    IF registry THEN
                        IF (w >> c.node_bits) - ms < c.registry_grant_ms / 2 THEN
                            -- Half the grant left: renew now if no one else
                            -- is (a failure waits for the next call).
                            PERFORM snowflake_portable.ensure_grant(c, ms, false);
                        END IF;
                        node_id := w & ((1::bigint << c.node_bits) - 1);
                    ELSE
                        node_id := c.node_id;
                    END IF;
                    first := v;
                    RETURN;
                END IF;
                CONTINUE;  -- a reserve ran meanwhile: v is a gap
            END IF;
        END IF;
        -- Behind the clock, a reserve under way, or a batch: reserve.
        r := snowflake_portable.reserve(p_count, 0, p_count = 1,
            c.epoch_unix_ms, c.node_bits, c.sequence_bits, c.max_clock_drift_ms, registry, NULL);
        IF r.word = -1 THEN
            PERFORM snowflake_portable.ensure_grant(c, r.first, true);
        ELSIF r.first IS NOT NULL THEN
            first := r.first;
            IF registry THEN
                IF (r.word >> c.node_bits) - ((r.first + p_count - 1) >> c.sequence_bits) < c.registry_grant_ms / 2 THEN
                    -- Half the grant left, as above.
                    PERFORM snowflake_portable.ensure_grant(c, (r.first + p_count - 1) >> c.sequence_bits, false);
                END IF;
                node_id := r.word & ((1::bigint << c.node_bits) - 1);
            ELSE
                node_id := c.node_id;
            END IF;
            RETURN;
        END IF;
    END LOOP;
END
$$;

-- A pair and a node id to their ID. (A body in quotes, inlined all the
-- same: one parsed in place would depend on the row type of config, and
-- forbid adding a column to it in a later version.)
CREATE OR REPLACE FUNCTION snowflake_portable.pair_to_id(p bigint, node_id int, c snowflake_portable.config)
RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
SELECT ((p >> c.sequence_bits) << (c.node_bits + c.sequence_bits))
       | (node_id::bigint << c.sequence_bits)
       | (p & ((1::bigint << c.sequence_bits) - 1))
$$;

-- (The functions of earlier versions, gone.)
DROP FUNCTION IF EXISTS snowflake_portable.start_session(snowflake_portable.config);
DROP FUNCTION IF EXISTS snowflake_portable.registry_call(text, text);
DROP FUNCTION IF EXISTS snowflake_portable.registry_call(text, text, bigint);
REVOKE ALL ON FUNCTION snowflake_portable.check_config(), snowflake_portable.holds_lock(int),
    snowflake_portable.release_if_held(int),
    snowflake_portable.fail_ahead(bigint, bigint, bigint, bigint, bool),
    snowflake_portable.new_incarnation(snowflake_portable.config, bigint), snowflake_portable.incarnation(),
    snowflake_portable.extend_lease(bigint, bigint),
    snowflake_portable.reserve(bigint, bigint, bool, bigint, int, int, bigint, bool, bigint),
    snowflake_portable.issue(bigint, snowflake_portable.config),
    snowflake_portable.registry_call(text, text, timestamptz, bigint),
    snowflake_portable.ensure_grant(snowflake_portable.config, bigint, bool),
    snowflake_portable.renew(),
    snowflake_portable.pair_to_id(bigint, int, snowflake_portable.config) FROM PUBLIC;

-- The functions users call: the extension's names and signatures, in the
-- first schema of the search_path. Each issuing function runs as the owner
-- (SECURITY DEFINER, its search_path pinned), so that no other role needs,
-- or gets, any right on the sequences: a setval() by anyone else could
-- make IDs repeat.

CREATE OR REPLACE FUNCTION snowflake_next()
RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c snowflake_portable.config;
    id bigint;
BEGIN
    SELECT * INTO c FROM snowflake_portable.config;
    SELECT snowflake_portable.pair_to_id(i.first, i.node_id, c) INTO id FROM snowflake_portable.issue(1, c) i;
    RETURN id;
END
$$;

-- A batch is one reserve: n consecutive pairs, so n consecutive IDs in one
-- millisecond unless the batch crosses into the next (as the extension's).
CREATE OR REPLACE FUNCTION snowflake_next_batch_array(n int)
RETURNS bigint[]
LANGUAGE plpgsql VOLATILE SECURITY DEFINER PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c snowflake_portable.config;
    i record;
    bound bigint;
BEGIN
    SELECT * INTO c FROM snowflake_portable.config;
    -- At most what fits in max_clock_drift_ms + 1 milliseconds, and 10^8.
    bound := least(100000000, (c.max_clock_drift_ms + 1) << c.sequence_bits);
    IF n IS NULL OR n < 1 OR n > bound THEN
        RAISE EXCEPTION 'snowflake_id: a batch of % IDs is out of range', coalesce(n::text, 'NULL')
            USING ERRCODE = '22023',
                  HINT = format('Ask for 1 to %s IDs at once (what fits in max_clock_drift_ms + 1 milliseconds, at most 10^8).', bound);
    END IF;
    SELECT * INTO i FROM snowflake_portable.issue(n, c);
    RETURN ARRAY(SELECT snowflake_portable.pair_to_id(p, i.node_id, c) FROM generate_series(i.first, i.first + n - 1) p);
END
$$;

CREATE OR REPLACE FUNCTION snowflake_next_batch(n int)
RETURNS SETOF bigint
LANGUAGE sql VOLATILE PARALLEL UNSAFE
RETURN unnest(snowflake_next_batch_array(n));

-- Decoding with the layout given: IMMUTABLE, the epoch as text read in UTC
-- unless it names a zone (an untyped literal takes this form), or as a
-- timestamptz value.
CREATE OR REPLACE FUNCTION snowflake_portable.check_id(id bigint, node_bits int, sequence_bits int)
RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF node_bits IS NULL OR sequence_bits IS NULL OR node_bits NOT BETWEEN 0 AND 27
       OR sequence_bits NOT BETWEEN 1 AND 28 OR node_bits + sequence_bits > 28 THEN
        RAISE EXCEPTION 'snowflake_id: node_bits % and sequence_bits % are not a layout', node_bits, sequence_bits
            USING ERRCODE = '22023',
                  HINT = 'node_bits 0 to 27, sequence_bits 1 to 28, together at most 28.';
    END IF;
    IF id < 0 THEN
        RAISE EXCEPTION 'snowflake_id: % is not an ID: IDs are not negative', id
            USING ERRCODE = '22003', HINT = 'Decode an ID that snowflake_next() returned.';
    END IF;
END
$$;

-- Milliseconds since 1970 as a timestamptz, exactly (a float8 division
-- would be off by microseconds far from 1970); outside the range of
-- timestamptz (4714 BC to 294276 AD), 22008. (No exception block: it
-- would make the function unsafe in a parallel query.)
CREATE OR REPLACE FUNCTION snowflake_portable.unix_ms_to_timestamptz(unix_ms bigint)
RETURNS timestamptz
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    rem bigint := ((unix_ms % 1000) + 1000) % 1000;
BEGIN
    IF unix_ms NOT BETWEEN -210866803200000 AND 9224318015999999 THEN
        RAISE EXCEPTION 'snowflake_id: the time % ms after 1970 is out of the range of timestamptz', unix_ms
            USING ERRCODE = '22008', HINT = 'The ID''s time field, under this epoch and layout, ends past what timestamptz can hold.';
    END IF;
    RETURN to_timestamp(((unix_ms - rem) / 1000)::float8) + rem * interval '1 millisecond';
END
$$;

-- A finite timestamptz epoch in milliseconds since 1970.
CREATE OR REPLACE FUNCTION snowflake_portable.epoch_ms(epoch timestamptz)
RETURNS bigint
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NOT isfinite(epoch) THEN
        RAISE EXCEPTION 'snowflake_id: the epoch is infinite' USING ERRCODE = '22008', HINT = 'Give a finite epoch.';
    END IF;
    RETURN floor(extract(epoch FROM epoch) * 1000)::bigint;
END
$$;

-- An ID's time under an epoch in milliseconds since 1970.
CREATE OR REPLACE FUNCTION snowflake_portable.timestamp_ms(id bigint, epoch_unix_ms bigint, node_bits int, sequence_bits int)
RETURNS timestamptz
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM snowflake_portable.check_id(id, node_bits, sequence_bits);
    RETURN snowflake_portable.unix_ms_to_timestamptz((id >> (node_bits + sequence_bits)) + epoch_unix_ms);
END
$$;

CREATE OR REPLACE FUNCTION snowflake_timestamp(id bigint, epoch text, node_bits int, sequence_bits int)
RETURNS timestamptz
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN snowflake_portable.timestamp_ms(id, snowflake_portable.parse_epoch(epoch), node_bits, sequence_bits);

CREATE OR REPLACE FUNCTION snowflake_timestamp(id bigint, epoch timestamptz, node_bits int, sequence_bits int)
RETURNS timestamptz
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN snowflake_portable.timestamp_ms(id, snowflake_portable.epoch_ms(epoch), node_bits, sequence_bits);

CREATE OR REPLACE FUNCTION snowflake_node(id bigint, epoch text, node_bits int, sequence_bits int)
RETURNS int
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM snowflake_portable.check_id(id, node_bits, sequence_bits);
    RETURN ((id >> sequence_bits) & ((1::bigint << node_bits) - 1))::int;
END
$$;

CREATE OR REPLACE FUNCTION snowflake_node(id bigint, epoch timestamptz, node_bits int, sequence_bits int)
RETURNS int
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN snowflake_node(id, '1970-01-01'::text, node_bits, sequence_bits);

CREATE OR REPLACE FUNCTION snowflake_sequence(id bigint, epoch text, node_bits int, sequence_bits int)
RETURNS int
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM snowflake_portable.check_id(id, node_bits, sequence_bits);
    RETURN (id & ((1::bigint << sequence_bits) - 1))::int;
END
$$;

CREATE OR REPLACE FUNCTION snowflake_sequence(id bigint, epoch timestamptz, node_bits int, sequence_bits int)
RETURNS int
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN snowflake_sequence(id, '1970-01-01'::text, node_bits, sequence_bits);

CREATE OR REPLACE FUNCTION snowflake_decode(id bigint, epoch text, node_bits int, sequence_bits int)
RETURNS TABLE (ts timestamptz, node_id int, sequence int)
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE ROWS 1
RETURN (snowflake_timestamp(id, epoch, node_bits, sequence_bits), snowflake_node(id, epoch, node_bits, sequence_bits),
        snowflake_sequence(id, epoch, node_bits, sequence_bits));

CREATE OR REPLACE FUNCTION snowflake_decode(id bigint, epoch timestamptz, node_bits int, sequence_bits int)
RETURNS TABLE (ts timestamptz, node_id int, sequence int)
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE ROWS 1
RETURN (snowflake_timestamp(id, epoch, node_bits, sequence_bits), snowflake_node(id, epoch, node_bits, sequence_bits),
        snowflake_sequence(id, epoch, node_bits, sequence_bits));

-- The smallest ID at `ts` under an epoch in milliseconds since 1970.
CREATE OR REPLACE FUNCTION snowflake_portable.from_timestamp_ms(ts timestamptz, epoch_unix_ms bigint, node_bits int, sequence_bits int)
RETURNS bigint
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    ms numeric;
BEGIN
    PERFORM snowflake_portable.check_id(0, node_bits, sequence_bits);
    IF NOT isfinite(ts) THEN
        RAISE EXCEPTION 'snowflake_id: an infinite time has no ID' USING ERRCODE = '22008', HINT = 'Give a finite timestamptz.';
    END IF;
    ms := floor(extract(epoch FROM ts) * 1000) - epoch_unix_ms;
    IF ms < 0 OR ms >= 2::numeric ^ (63 - node_bits - sequence_bits) THEN
        RAISE EXCEPTION 'snowflake_id: % is outside the ID time range', ts
            USING ERRCODE = '22008',
                  HINT = format('IDs cover %s to %s.', to_timestamp(epoch_unix_ms::float8 / 1000),
                                to_timestamp((epoch_unix_ms + (2::numeric ^ (63 - node_bits - sequence_bits)) - 1)::float8 / 1000));
    END IF;
    RETURN ms::bigint << (node_bits + sequence_bits);
END
$$;

CREATE OR REPLACE FUNCTION snowflake_from_timestamp(ts timestamptz, epoch text, node_bits int, sequence_bits int)
RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN snowflake_portable.from_timestamp_ms(ts, snowflake_portable.parse_epoch(epoch), node_bits, sequence_bits);

CREATE OR REPLACE FUNCTION snowflake_from_timestamp(ts timestamptz, epoch timestamptz, node_bits int, sequence_bits int)
RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN snowflake_portable.from_timestamp_ms(ts, snowflake_portable.epoch_ms(epoch), node_bits, sequence_bits);

CREATE OR REPLACE FUNCTION snowflake_id_span(span interval, node_bits int, sequence_bits int)
RETURNS bigint
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    ms numeric;
BEGIN
    PERFORM snowflake_portable.check_id(0, node_bits, sequence_bits);
    ms := extract(epoch FROM justify_hours(span)) * 1000;  -- a day counts as 24 hours
    IF extract(month FROM span) <> 0 OR extract(year FROM span) <> 0 OR ms <= 0 OR ms <> floor(ms) THEN
        RAISE EXCEPTION 'snowflake_id: % is not a positive whole number of milliseconds without months', span
            USING ERRCODE = '22023', HINT = 'Give days, hours, minutes or seconds: a month has no fixed length.';
    END IF;
    IF ms >= 2::numeric ^ (63 - node_bits - sequence_bits) THEN
        RAISE EXCEPTION 'snowflake_id: % is longer than the time field', span
            USING ERRCODE = '22003', HINT = 'Give a shorter span.';
    END IF;
    RETURN ms::bigint << (node_bits + sequence_bits);
END
$$;

-- The same under this database's configuration: STABLE.
CREATE OR REPLACE FUNCTION snowflake_timestamp(id bigint)
RETURNS timestamptz LANGUAGE sql STABLE STRICT PARALLEL SAFE
RETURN (SELECT snowflake_timestamp(id, c.epoch, c.node_bits, c.sequence_bits) FROM snowflake_portable.config c);

CREATE OR REPLACE FUNCTION snowflake_node(id bigint)
RETURNS int LANGUAGE sql STABLE STRICT PARALLEL SAFE
RETURN (SELECT snowflake_node(id, c.epoch, c.node_bits, c.sequence_bits) FROM snowflake_portable.config c);

CREATE OR REPLACE FUNCTION snowflake_sequence(id bigint)
RETURNS int LANGUAGE sql STABLE STRICT PARALLEL SAFE
RETURN (SELECT snowflake_sequence(id, c.epoch, c.node_bits, c.sequence_bits) FROM snowflake_portable.config c);

CREATE OR REPLACE FUNCTION snowflake_decode(id bigint)
RETURNS TABLE (ts timestamptz, node_id int, sequence int) LANGUAGE sql STABLE STRICT PARALLEL SAFE ROWS 1
RETURN (SELECT (snowflake_timestamp(id, c.epoch, c.node_bits, c.sequence_bits),
                snowflake_node(id, c.epoch, c.node_bits, c.sequence_bits),
                snowflake_sequence(id, c.epoch, c.node_bits, c.sequence_bits))
        FROM snowflake_portable.config c);

CREATE OR REPLACE FUNCTION snowflake_from_timestamp(ts timestamptz)
RETURNS bigint LANGUAGE sql STABLE STRICT PARALLEL SAFE
RETURN (SELECT snowflake_from_timestamp(ts, c.epoch, c.node_bits, c.sequence_bits) FROM snowflake_portable.config c);

CREATE OR REPLACE FUNCTION snowflake_id_span(span interval)
RETURNS bigint LANGUAGE sql STABLE STRICT PARALLEL SAFE
RETURN (SELECT snowflake_id_span(span, c.node_bits, c.sequence_bits) FROM snowflake_portable.config c);

-- (What the decoders call as their caller. PUBLIC has it by default; said
-- for a database whose default privileges say otherwise.)
GRANT EXECUTE ON FUNCTION snowflake_portable.check_id(bigint, int, int),
    snowflake_portable.epoch_ms(timestamptz), snowflake_portable.timestamp_ms(bigint, bigint, int, int),
    snowflake_portable.unix_ms_to_timestamptz(bigint),
    snowflake_portable.from_timestamp_ms(timestamptz, bigint, int, int), snowflake_portable.parse_epoch(text) TO PUBLIC;

COMMIT;
