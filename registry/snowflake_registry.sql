-- snowflake_id registry: fenced node-id leases for fleets of snowflake_id
-- servers (docs/registry.md says how to run it, docs/registry-design.md why it is safe).
--
-- Plain SQL and PL/pgSQL for PostgreSQL 15 or later, so it runs where the
-- extension is not installed (a managed service). Install or upgrade, as
-- a role that may create roles and schemas, in the database the servers
-- will reach:
--
--   psql "host=registry.example dbname=registry user=admin" \
--        -v ON_ERROR_STOP=1 -f registry/snowflake_registry.sql
--
-- then give each issuing server's login role the client role, and nothing
-- else:   GRANT snowflake_registry_client TO fleet_node;
-- Running the file again replaces the functions and keeps the data.
--
-- The rules, which make two holders of one node id issue disjoint IDs:
--   * A claim grants a node id up to `until_ms`, a bound on the time field
--     of the IDs (milliseconds since the fleet's epoch) the holder may
--     issue; renewals raise it. A holder never issues past its grant.
--   * `max_until_ms` is at least every grant ever given for the node id.
--     A new holder gets it as its `floor_ms` and issues only IDs whose time
--     is above it. So the IDs of two holders of one node id never overlap,
--     whatever their clocks, pauses and partitions: wall time decides only
--     *when* a node id may pass on (liveness), never whether IDs repeat.
--   * A release lowers `max_until_ms` to what the holder really issued
--     (never below its floor), so a clean restart need not wait.
--   * No grant ends past the registry's clock plus the fleet's
--     `max_grant_ms` at the time it is given. So when the registry finds
--     itself restored from a backup (its timeline or system identifier
--     changed), or an operator says so (fence_after_restore()), every grant
--     it may have lost ends before its clock plus `max_grant_ms`: that
--     becomes every node id's floor (`fleets.fence_ms`), and every claim it
--     knows ends (another server may have taken it over in the lost
--     history), so their holders stop at their grants.
-- Claims of one fleet are serialised by a row lock on the fleet, so
-- servers started at the same moment get distinct ids.

BEGIN;
-- (Quiet: the notices of a first install, "does not exist, skipping".)
SET LOCAL client_min_messages = warning;
-- Every name below resolves in the catalog: nothing a tenant of this
-- database planted on the installer's path (a schema named like the
-- installer, public) runs with the installer's rights.
SET LOCAL search_path = pg_catalog, pg_temp;

DO $$
DECLARE
    r pg_roles;
BEGIN
    SELECT * INTO r FROM pg_roles WHERE rolname = 'snowflake_registry_client';
    IF NOT FOUND THEN
        CREATE ROLE snowflake_registry_client NOLOGIN;
    -- Made before by someone else (a role with CREATEROLE): it must be the
    -- bare group this script makes, or its maker could log in as it.
    ELSIF r.rolcanlogin OR r.rolsuper OR r.rolcreaterole OR r.rolcreatedb OR r.rolreplication
          OR r.rolbypassrls OR EXISTS (SELECT FROM pg_auth_members m WHERE m.member = r.oid) THEN
        RAISE EXCEPTION 'snowflake_registry: the role snowflake_registry_client exists with rights this script does not give it (LOGIN, SUPERUSER, CREATEROLE, CREATEDB, REPLICATION, BYPASSRLS or membership of another role)'
            USING ERRCODE = '42501',
                  HINT = 'Look at who made it (a role with CREATEROLE), remove those rights (ALTER ROLE snowflake_registry_client NOLOGIN ...; REVOKE ... FROM snowflake_registry_client), and install again.';
    END IF;
    IF current_setting('max_prepared_transactions')::int > 0 THEN
        RAISE WARNING 'snowflake_registry: max_prepared_transactions is %: a client of the registry could PREPARE a transaction after a call and keep the rows it locked past its session', current_setting('max_prepared_transactions')
            USING HINT = 'Run the registry on a server with max_prepared_transactions = 0 (the default); a prepared transaction that holds its rows is ended with ROLLBACK PREPARED.';
    END IF;
END
$$;

-- The install takes nothing from others (the class of PostgreSQL's
-- CVE-2022-2625): a schema this script did not make, an object in it that
-- another role owns, or another role that may create objects in it could
-- hold a trigger, a function or an operator that then runs with the
-- installer's rights inside the SECURITY DEFINER functions below. So the
-- schema is made here, or it must be the installer's with everything in it.
DO $$
DECLARE
    schema_oid oid;
    schema_owner oid;
    bad text;
BEGIN
    SELECT n.oid, n.nspowner INTO schema_oid, schema_owner
    FROM pg_namespace n WHERE n.nspname = 'snowflake_registry';
    IF NOT FOUND THEN
        -- (Not IF NOT EXISTS: a schema made meanwhile by another role fails
        -- the install.)
        CREATE SCHEMA snowflake_registry;
        RETURN;
    END IF;
    -- (By OID: a name cast to regrole is read as an identifier, folded to
    -- lower case, so an installer "Admin" would pass for a tenant admin.)
    IF schema_owner <> (SELECT r.oid FROM pg_roles r WHERE r.rolname = current_user) THEN
        RAISE EXCEPTION 'snowflake_registry: the schema "snowflake_registry" belongs to role "%", not to the installing role "%"',
            schema_owner::regrole, current_user
            USING ERRCODE = '42501',
                  DETAIL = 'A schema this script did not make may hold objects that would run with the installer''s rights inside the registry''s functions.',
                  HINT = 'Install and upgrade the registry as the role that owns its schema (SET ROLE). A schema someone else made: look at it, drop it (DROP SCHEMA snowflake_registry CASCADE), and install again.';
    END IF;
    SELECT format('role %s may create objects in the schema "snowflake_registry"',
                  CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE format('"%s"', a.grantee::regrole) END)
    INTO bad
    FROM pg_namespace n, aclexplode(n.nspacl) a
    WHERE n.oid = schema_oid AND a.privilege_type = 'CREATE' AND a.grantee <> schema_owner
    LIMIT 1;
    IF bad IS NULL THEN
        -- Every object in the schema, and every trigger, rule and policy on
        -- its tables, is the schema owner's (the script makes no other).
        SELECT format('%s belongs to role "%s", not to the schema''s owner "%s"', o.what, o.owner::regrole, schema_owner::regrole)
        INTO bad
        FROM (SELECT format('the %s %s', CASE c.relkind WHEN 'v' THEN 'view' WHEN 'S' THEN 'sequence'
                                                         WHEN 'i' THEN 'index' ELSE 'table' END, c.oid::regclass) AS what,
                     c.relowner AS owner
              FROM pg_class c WHERE c.relnamespace = schema_oid
              UNION ALL SELECT format('the function %s', p.oid::regprocedure), p.proowner
              FROM pg_proc p WHERE p.pronamespace = schema_oid
              UNION ALL SELECT format('the type %s', t.oid::regtype), t.typowner
              FROM pg_type t WHERE t.typnamespace = schema_oid
              UNION ALL SELECT format('the operator %s', o.oid::regoperator), o.oprowner
              FROM pg_operator o WHERE o.oprnamespace = schema_oid
              UNION ALL SELECT format('the collation %s', l.collname), l.collowner
              FROM pg_collation l WHERE l.collnamespace = schema_oid
              UNION ALL SELECT format('the conversion %s', v.conname), v.conowner
              FROM pg_conversion v WHERE v.connamespace = schema_oid
              UNION ALL SELECT format('the operator class %s', oc.opcname), oc.opcowner
              FROM pg_opclass oc WHERE oc.opcnamespace = schema_oid
              UNION ALL SELECT format('the operator family %s', f.opfname), f.opfowner
              FROM pg_opfamily f WHERE f.opfnamespace = schema_oid
              UNION ALL SELECT format('the text search configuration %s', ts.cfgname), ts.cfgowner
              FROM pg_ts_config ts WHERE ts.cfgnamespace = schema_oid
              UNION ALL SELECT format('the text search dictionary %s', td.dictname), td.dictowner
              FROM pg_ts_dict td WHERE td.dictnamespace = schema_oid
              UNION ALL SELECT format('the statistics object %s', se.stxname), se.stxowner
              FROM pg_statistic_ext se WHERE se.stxnamespace = schema_oid) o
        WHERE o.owner <> schema_owner
        LIMIT 1;
    END IF;
    IF bad IS NULL THEN
        SELECT format('the %s %s on %s is not one this script makes', x.kind, x.name, x.rel::regclass)
        INTO bad
        FROM (SELECT 'trigger' AS kind, t.tgname::text AS name, t.tgrelid AS rel
              FROM pg_trigger t WHERE NOT t.tgisinternal
                AND (t.tgrelid::regclass::text, t.tgname::text, t.tgfoid::regproc::text) NOT IN (
                    ('snowflake_registry.fleets', 'keep_reach', 'snowflake_registry.keep_reach'),
                    ('snowflake_registry.node_ids', 'keep_floors', 'snowflake_registry.keep_floors'),
                    ('snowflake_registry.node_ids', 'keep_floors_truncate', 'snowflake_registry.keep_floors'))
              UNION ALL SELECT 'rule', r.rulename::text, r.ev_class FROM pg_rewrite r
              WHERE r.rulename <> '_RETURN'
              UNION ALL SELECT 'policy', p.polname::text, p.polrelid FROM pg_policy p) x
        JOIN pg_class c ON c.oid = x.rel
        WHERE c.relnamespace = schema_oid
        LIMIT 1;
    END IF;
    IF bad IS NULL THEN
        -- An extension created in the schema (a trusted one needs only
        -- CREATE on the database): its objects are not this script's.
        SELECT format('the extension %s, owned by role "%s", lives in it', e.extname, e.extowner::regrole)
        INTO bad
        FROM pg_extension e WHERE e.extnamespace = schema_oid
        LIMIT 1;
    END IF;
    IF bad IS NOT NULL THEN
        RAISE EXCEPTION 'snowflake_registry: the install stops: %', bad
            USING ERRCODE = '42501',
                  DETAIL = 'What another role made or owns in the registry''s schema could run with the rights of the registry''s functions (SECURITY DEFINER), or rewrite its floors and tokens.',
                  HINT = 'Look at it and remove it (or REVOKE CREATE ON SCHEMA snowflake_registry FROM that role), then install again as the schema''s owner.';
    END IF;
END
$$;
REVOKE ALL ON SCHEMA snowflake_registry FROM PUBLIC;
GRANT USAGE ON SCHEMA snowflake_registry TO snowflake_registry_client;

-- One ID space: every server of a fleet has the fleet's epoch and layout.
-- A fleet, "default" too, is created on purpose by the registry's owner,
-- with its epoch, layout and longest grant (create_fleet(); the install
-- makes "default" with the extension's defaults): a claim never creates or
-- shapes one, so no client can give a fleet an epoch or layout that
-- refuses every other server, or take all its node ids with one bit.
CREATE TABLE IF NOT EXISTS snowflake_registry.fleets (
    fleet text PRIMARY KEY CHECK (fleet <> '' AND length(fleet) <= 63),
    epoch_unix_ms bigint NOT NULL,
    node_bits int NOT NULL CHECK (node_bits BETWEEN 0 AND 28),
    sequence_bits int NOT NULL CHECK (sequence_bits BETWEEN 0 AND 28),
    -- The longest grant ahead of the registry's clock (ms): bounds how far
    -- a holder with a wrong clock can push a node id's floor, and how far
    -- the fence after a restore or failover lies ahead (how long a server
    -- whose claim the fence ended waits to issue again, less its
    -- max_clock_drift). At most an hour is used. New fleets: a minute (two
    -- grants of the servers' default 30 s).
    max_grant_ms bigint NOT NULL DEFAULT 60000 CHECK (max_grant_ms > 0),
    created_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
-- The fence after a restore (ms since the epoch): every floor is at least
-- this. (Columns added after the first release: ALTER for upgrades.)
ALTER TABLE snowflake_registry.fleets ADD COLUMN IF NOT EXISTS fence_ms bigint NOT NULL DEFAULT -1;
ALTER TABLE snowflake_registry.fleets ADD COLUMN IF NOT EXISTS fenced_at timestamptz;
ALTER TABLE snowflake_registry.fleets ADD COLUMN IF NOT EXISTS fenced_why text;
-- Fleets made from now on get a minute (those made before keep theirs:
-- lower it with an UPDATE, which keep_reach() makes safe).
ALTER TABLE snowflake_registry.fleets ALTER COLUMN max_grant_ms SET DEFAULT 60000;
-- How far a grant given under an earlier, longer max_grant_ms may reach
-- (ms since 1970, on the registry's clock; -1: nowhere): a fence never
-- lies below it.
ALTER TABLE snowflake_registry.fleets ADD COLUMN IF NOT EXISTS reach_until_unix_ms bigint NOT NULL DEFAULT -1;
-- (NULL: a fleet an older script made, whose first claim was to record
-- them; create_fleet() gives them now.)
ALTER TABLE snowflake_registry.fleets ALTER COLUMN epoch_unix_ms DROP NOT NULL,
    ALTER COLUMN node_bits DROP NOT NULL, ALTER COLUMN sequence_bits DROP NOT NULL;

-- Lowering a fleet's max_grant_ms does not shorten the grants already
-- given under the longer one: until they have all ended, a fence must
-- still reach them. Every grant ended before the registry's clock plus the
-- old bound, so that is kept as the fleet's reach (a fleet never claimed
-- has given none).
CREATE OR REPLACE FUNCTION snowflake_registry.keep_reach()
RETURNS trigger LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NEW.max_grant_ms < OLD.max_grant_ms
       AND EXISTS (SELECT FROM snowflake_registry.node_ids n WHERE n.fleet = OLD.fleet) THEN
        NEW.reach_until_unix_ms := greatest(OLD.reach_until_unix_ms,
            floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint + least(OLD.max_grant_ms, 3600000));
    END IF;
    RETURN NEW;
END
$$;
DROP TRIGGER IF EXISTS keep_reach ON snowflake_registry.fleets;
CREATE TRIGGER keep_reach BEFORE UPDATE OF max_grant_ms ON snowflake_registry.fleets
    FOR EACH ROW EXECUTE FUNCTION snowflake_registry.keep_reach();

-- The registry's own identity while its records are whole: a change (a
-- restore from a backup or a snapshot with recovery, a failover, a
-- pg_dump copy) means committed claims may be lost, and fences the fleet.
CREATE TABLE IF NOT EXISTS snowflake_registry.incarnation (
    only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    system_identifier numeric(20) NOT NULL,
    timeline int NOT NULL,
    since timestamptz NOT NULL,
    -- The last fence, on the registry's clock (ms since 1970) plus an hour:
    -- the floor of a fleet created after it (its lost history may have
    -- existed before the restore).
    fenced_until_unix_ms bigint NOT NULL DEFAULT -1,
    -- What a new timeline with the same system identifier means: 'fence'
    -- (a restore, or a failover that may have lost commits), or 'trust'
    -- (failovers only to synchronous standbys, that lose nothing: then
    -- restores need fence_after_restore() by hand).
    on_new_timeline text NOT NULL DEFAULT 'fence' CHECK (on_new_timeline IN ('fence', 'trust'))
);

-- Every fence: when, why, and up to where (for the operator).
CREATE TABLE IF NOT EXISTS snowflake_registry.fences (
    fenced_at timestamptz NOT NULL,
    fleet text NOT NULL REFERENCES snowflake_registry.fleets,
    fence_ms bigint NOT NULL,
    claims_ended int NOT NULL,
    why text NOT NULL
);

-- Every claim ever made (also the history that who_issued(), "who issued
-- this ID", reads): the holder, and the ID-time range it was granted.
CREATE TABLE IF NOT EXISTS snowflake_registry.grants (
    claim_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    fleet text NOT NULL REFERENCES snowflake_registry.fleets,
    node_id int NOT NULL,
    system_identifier numeric(20) NOT NULL,
    host text NOT NULL,
    port int NOT NULL,
    data_directory text NOT NULL,
    -- The holder issues IDs with a time in (floor_ms, until_ms].
    floor_ms bigint NOT NULL,
    until_ms bigint NOT NULL,
    claimed_at timestamptz NOT NULL,
    renewed_at timestamptz NOT NULL,
    ended_at timestamptz,
    -- released | taken over | fenced (after a restore of the registry)
    ended text
);
CREATE INDEX IF NOT EXISTS grants_node ON snowflake_registry.grants (fleet, node_id, claim_id);
-- How often a fence ended the claim and its holder resumed it (resume()),
-- and when last.
ALTER TABLE snowflake_registry.grants ADD COLUMN IF NOT EXISTS resumed int NOT NULL DEFAULT 0;
ALTER TABLE snowflake_registry.grants ADD COLUMN IF NOT EXISTS resumed_at timestamptz;

-- The current (or last) claim of each node id that was ever claimed.
CREATE TABLE IF NOT EXISTS snowflake_registry.node_ids (
    fleet text NOT NULL REFERENCES snowflake_registry.fleets,
    node_id int NOT NULL CHECK (node_id >= 0),
    claim_id bigint NOT NULL,
    -- The holder's secret for this claim: renewals and the release must
    -- show it, so a client cannot extend or end another server's claim.
    token text NOT NULL,
    system_identifier numeric(20) NOT NULL,
    host text NOT NULL,
    port int NOT NULL,
    data_directory text NOT NULL,
    floor_ms bigint NOT NULL,
    until_ms bigint NOT NULL,
    -- Every grant ever given for this node id ends at or before this.
    max_until_ms bigint NOT NULL,
    renew_every_ms bigint NOT NULL,
    claimed_at timestamptz NOT NULL,
    renewed_at timestamptz NOT NULL,
    released_at timestamptz,
    PRIMARY KEY (fleet, node_id)
);
-- A retried claim finds its first answer by its token. (Token first: an
-- index led by the fleet alone was chosen for the probes of a node id,
-- fleet = $1 AND node_id = $2, in cached generic plans, and read every row
-- of the fleet for each: claims from the pool ran 7 times slower.)
DROP INDEX IF EXISTS snowflake_registry.node_ids_token;
CREATE INDEX IF NOT EXISTS node_ids_by_token ON snowflake_registry.node_ids (token, fleet);
-- A keyed claim (claim_keyed(): servers of this release) has a key that
-- its holder signs every later call with: only claim_keyed()'s answer
-- carries it, never a query's text or the registry's log. Its token is
-- 'keyed:' and the hash of the holder's secret. last_call: the highest call
-- number signed so far; a call is accepted once, with a higher number.
-- NULL key: a claim made with a plain token (claim(), older releases).
ALTER TABLE snowflake_registry.node_ids ADD COLUMN IF NOT EXISTS signing_key text;
ALTER TABLE snowflake_registry.node_ids ADD COLUMN IF NOT EXISTS last_call bigint NOT NULL DEFAULT 0;

-- Since when this registry keeps every claim until its grant ends (no
-- takeover of a live claim, the rule resume() rests on): a registry that
-- had claims under an older script took over claims still live, and a
-- history it may lose (a restore, a failover) may hold such a takeover
-- until max_grant_ms after the upgrade. -infinity: installed with the rule.
CREATE TABLE IF NOT EXISTS snowflake_registry.rules (
    only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    claims_kept_live_since timestamptz NOT NULL
);
INSERT INTO snowflake_registry.rules (only_row, claims_kept_live_since)
SELECT true, CASE WHEN EXISTS (SELECT FROM snowflake_registry.node_ids) THEN clock_timestamp()
                  ELSE '-infinity' END
ON CONFLICT DO NOTHING;
-- The registry's own id, made at its install and kept by every copy of its
-- data (a backup, a restore, a standby, pg_upgrade, pg_dump): a server
-- checks it at each connection (registry_identity()), so that another
-- registry under the same address (a new install, an impostor) is noticed,
-- apart from a restore of this one (the same id; its fence does the rest).
ALTER TABLE snowflake_registry.rules ADD COLUMN IF NOT EXISTS registry_id uuid;
UPDATE snowflake_registry.rules SET registry_id = gen_random_uuid() WHERE registry_id IS NULL;

-- The rows of node_ids hold the floors: deleting one would hand its node
-- id out again from floor -1, under IDs its earlier holders issued. No
-- cleaning up deletes them (a released or expired node id is handed out
-- again with its floor; nothing needs removing).
CREATE OR REPLACE FUNCTION snowflake_registry.keep_floors()
RETURNS trigger LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION 'snowflake_registry: the rows of node_ids are never deleted'
        USING ERRCODE = '55000',
              DETAIL = 'Each row holds its node id''s floor, above every ID its earlier holders were granted: without it the next holder would start from nothing and could issue their IDs again.',
              HINT = 'Released and expired node ids need no cleaning up: they are handed out again with their floors. To see them: SELECT * FROM snowflake_registry.holders;';
END
$$;
CREATE OR REPLACE TRIGGER keep_floors BEFORE DELETE ON snowflake_registry.node_ids
    FOR EACH ROW EXECUTE FUNCTION snowflake_registry.keep_floors();
CREATE OR REPLACE TRIGGER keep_floors_truncate BEFORE TRUNCATE ON snowflake_registry.node_ids
    FOR EACH STATEMENT EXECUTE FUNCTION snowflake_registry.keep_floors();

REVOKE ALL ON ALL TABLES IN SCHEMA snowflake_registry FROM PUBLIC;

-- Makes this transaction's commit durable whatever the registry's
-- synchronous_commit (a managed service or a busy server may run with
-- 'off'): a claim, renewal or release the holder was told of must survive
-- a crash of the registry, or a fixed-id claimant after it gets a floor
-- below a grant still in use, with nothing to fence (the same timeline
-- and system identifier). 'off' and 'local' become 'on' (which waits for
-- the synchronous standbys, if any, so a failover to one loses nothing);
-- 'remote_write' and 'remote_apply' are kept. Set with is_local: it holds
-- to the end of the caller's transaction, past the function's own SET
-- clauses (those restore only the settings they name).
CREATE OR REPLACE FUNCTION snowflake_registry.durable_commit()
RETURNS void LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF current_setting('synchronous_commit') IN ('off', 'local', 'false', 'no', '0') THEN
        PERFORM set_config('synchronous_commit', 'on', true);
    END IF;
END
$$;

-- The bounds of a holder's present and of the grant it asks for (ms): a
-- grant of at most an hour, as snowflake_id.registry_grant allows, so that
-- no sum overflows and the renewal interval (a sixth of it) stays a valid
-- interval for is_live() and the holders view.
CREATE OR REPLACE FUNCTION snowflake_registry.valid_times(p_holder_now_ms bigint, p_grant_ms bigint)
RETURNS boolean LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT coalesce(p_holder_now_ms BETWEEN 0 AND 4611686018427387903
                      AND p_grant_ms BETWEEN 1 AND 3600000, false) $$;

-- The registry's clock as the fleet's ID time.
CREATE OR REPLACE FUNCTION snowflake_registry.now_ms(p_epoch_unix_ms bigint)
RETURNS bigint LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint - p_epoch_unix_ms $$;

-- This server's system identifier and timeline. Fails on a standby (the
-- registry must be written), with a SQLSTATE the servers do not take for a
-- lost claim.
CREATE OR REPLACE FUNCTION snowflake_registry.identity(OUT system_identifier numeric, OUT timeline int)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF pg_is_in_recovery() THEN
        RAISE EXCEPTION 'snowflake_registry: this server is a standby'
            USING ERRCODE = '25006',
                  HINT = 'Reach the registry''s primary (target_session_attrs=read-write).';
    END IF;
    SELECT c.system_identifier INTO system_identifier FROM pg_control_system() c;
    -- The timeline WAL is written on now (the first 8 hex digits of the
    -- current WAL file's name): a promotion or the end of a recovery from a
    -- backup starts a new one.
    timeline := ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int;
END
$$;

-- Fences every fleet: no grant this registry gave, including those a
-- restore lost, ends past its clock plus the fleet's max_grant_ms; that
-- becomes every node id's floor, and every claim it knows ends (their
-- holders resume them, or issue up to their grants and claim again).
DROP FUNCTION IF EXISTS snowflake_registry.fence(text);
CREATE OR REPLACE FUNCTION snowflake_registry.fence(p_why text, p_longest_grant_ms bigint DEFAULT NULL)
RETURNS TABLE (fleet text, fenced_until timestamptz, claims_ended int)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    f snowflake_registry.fleets;
    new_fence bigint;
    ended int;
BEGIN
    FOR f IN SELECT * FROM snowflake_registry.fleets ORDER BY fleets.fleet FOR NO KEY UPDATE LOOP
        -- Never claimed: nothing granted to fence. Its first claim starts
        -- at the registry's last fence (claim_by_token()).
        CONTINUE WHEN f.epoch_unix_ms IS NULL
                      OR NOT EXISTS (SELECT FROM snowflake_registry.node_ids n WHERE n.fleet = f.fleet);
        new_fence := greatest(f.fence_ms, snowflake_registry.now_ms(f.epoch_unix_ms)
                              + coalesce(p_longest_grant_ms, least(f.max_grant_ms, 3600000)),
                              CASE WHEN f.reach_until_unix_ms < 0 THEN -1
                                   ELSE f.reach_until_unix_ms - f.epoch_unix_ms END);
        UPDATE snowflake_registry.fleets g SET fence_ms = new_fence, fenced_at = clock_timestamp(), fenced_why = p_why
        WHERE g.fleet = f.fleet;
        -- node_ids, then grants: the order renew and release lock them in.
        WITH e AS (
            UPDATE snowflake_registry.node_ids n SET released_at = clock_timestamp()
            WHERE n.fleet = f.fleet AND n.released_at IS NULL
            RETURNING n.claim_id)
        UPDATE snowflake_registry.grants g SET ended_at = clock_timestamp(), ended = 'fenced'
        FROM e WHERE g.claim_id = e.claim_id;
        GET DIAGNOSTICS ended = ROW_COUNT;
        INSERT INTO snowflake_registry.fences VALUES (clock_timestamp(), f.fleet, new_fence, ended, p_why);
        RAISE WARNING 'snowflake_registry: fleet "%" fenced: every floor is now at least %, % claims ended (%)',
            f.fleet, to_timestamp((f.epoch_unix_ms + new_fence) / 1000.0), ended, p_why;
        fleet := f.fleet;
        fenced_until := to_timestamp((f.epoch_unix_ms + new_fence) / 1000.0);
        claims_ended := ended;
        RETURN NEXT;
    END LOOP;
    -- Fleets this registry does not know may have had claims in the lost
    -- history too (a backup taken before their first claim, or before the
    -- registry's first claim at all): their first claim starts here. Their
    -- max_grant_ms is unknown, so the fence reaches as far as any grant
    -- can (an hour), or as far as the operator says. Recorded even where
    -- no identity was: the fence must hold whatever the registry knew.
    INSERT INTO snowflake_registry.incarnation AS i (only_row, system_identifier, timeline, since, fenced_until_unix_ms)
    SELECT true, me.system_identifier, me.timeline, clock_timestamp(),
           floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint
           + least(coalesce(p_longest_grant_ms, 3600000), 3600000)
    FROM snowflake_registry.identity() me
    ON CONFLICT (only_row) DO UPDATE
        SET fenced_until_unix_ms = greatest(i.fenced_until_unix_ms, EXCLUDED.fenced_until_unix_ms)
    RETURNING i.fenced_until_unix_ms INTO new_fence;
    RAISE WARNING 'snowflake_registry: the first claim of a fleet this registry does not know starts after % (%)',
        to_timestamp(new_fence / 1000.0), p_why;
END
$$;

-- Called first by claim, renew and release: fences the fleets once if the
-- registry's identity changed since it was recorded. True if this call
-- fenced (its transaction must commit, or the fence is undone).
DROP FUNCTION IF EXISTS snowflake_registry.check_incarnation();
CREATE FUNCTION snowflake_registry.check_incarnation()
RETURNS boolean
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    me record;
    inc snowflake_registry.incarnation;
BEGIN
    me := snowflake_registry.identity();
    SELECT * INTO inc FROM snowflake_registry.incarnation;
    IF FOUND AND (inc.system_identifier, inc.timeline) = (me.system_identifier, me.timeline) THEN
        RETURN false;
    END IF;
    -- Never recorded: installing this script records the identity, so a
    -- registry without one lost it (its row removed, or its history rolled
    -- back past the install): it cannot tell what it granted, so it fences
    -- (once: a concurrent call waits for this insert, then finds the row).
    IF NOT FOUND THEN
        INSERT INTO snowflake_registry.incarnation (only_row, system_identifier, timeline, since)
        VALUES (true, me.system_identifier, me.timeline, clock_timestamp())
        ON CONFLICT DO NOTHING;
        IF FOUND THEN
            PERFORM snowflake_registry.fence(
                'the registry had no identity recorded (snowflake_registry.incarnation was empty): it may have lost claims');
            RETURN true;
        END IF;
    END IF;
    -- Changed: once, under the row's lock.
    SELECT * INTO STRICT inc FROM snowflake_registry.incarnation FOR UPDATE;
    IF (inc.system_identifier, inc.timeline) = (me.system_identifier, me.timeline) THEN
        RETURN false;
    END IF;
    IF inc.system_identifier = me.system_identifier AND inc.on_new_timeline = 'trust' THEN
        RAISE WARNING 'snowflake_registry: new timeline % (was %), trusted as a failover that lost nothing (on_new_timeline = trust): no fence',
            me.timeline, inc.timeline;
        UPDATE snowflake_registry.incarnation SET timeline = me.timeline, since = clock_timestamp();
        RETURN false;
    END IF;
    PERFORM snowflake_registry.fence(format(
        'the registry''s system identifier and timeline changed from %s/%s to %s/%s: restored from a backup, failed over, or copied, so it may have lost claims',
        inc.system_identifier, inc.timeline, me.system_identifier, me.timeline));
    UPDATE snowflake_registry.incarnation SET system_identifier = me.system_identifier,
        timeline = me.timeline, since = clock_timestamp();
    RETURN true;
END
$$;

-- For operators, after a restore the registry cannot notice (a disk
-- snapshot, a copy of its data directory, a base backup started without
-- recovery.signal: the same timeline): fences every fleet as
-- check_incarnation() does. p_longest_grant_ms: the fence's reach when
-- max_grant_ms was raised after the backup (the restored value is older).
DROP FUNCTION IF EXISTS snowflake_registry.fence_after_restore(text);
CREATE OR REPLACE FUNCTION snowflake_registry.fence_after_restore(
    p_longest_grant_ms bigint DEFAULT NULL, p_why text DEFAULT 'fenced by hand (fence_after_restore)')
RETURNS TABLE (fleet text, fenced_until timestamptz, claims_ended int)
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT * FROM snowflake_registry.fence(p_why, p_longest_grant_ms) $$;

-- A claim's holder, in words, for messages.
CREATE OR REPLACE FUNCTION snowflake_registry.holder_text(n snowflake_registry.node_ids)
RETURNS text LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT format('%s:%s (data directory %s, system identifier %s, claimed %s, renewed %s ago)',
                  n.host, n.port, n.data_directory, n.system_identifier,
                  to_char(n.claimed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS') || ' UTC',
                  date_trunc('second', clock_timestamp() - n.renewed_at))
$$;

-- Whether a fence ended a node id's claim (its holder may resume it).
CREATE OR REPLACE FUNCTION snowflake_registry.fenced(n snowflake_registry.node_ids)
RETURNS boolean LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT n.released_at IS NOT NULL AND EXISTS (
        SELECT FROM snowflake_registry.grants g WHERE g.claim_id = n.claim_id AND g.ended = 'fenced')
$$;

-- Whether a node id's claim still stands, so that no other claim may take
-- the node id: its grant not yet past on the registry's clock, and not
-- released (a claim a fence ended stands too: its holder may resume it).
-- A claim whose holder stopped renewing stands to its grant's end: the
-- next holder could issue only above that end anyway (its floor). So no
-- history of the registry holds a takeover of a claim before its grant
-- ended: what lets resume() continue a claim after a fence.
CREATE OR REPLACE FUNCTION snowflake_registry.is_live(n snowflake_registry.node_ids, p_now_ms bigint)
RETURNS boolean LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT n.until_ms >= p_now_ms AND (n.released_at IS NULL OR snowflake_registry.fenced(n))
$$;

-- Who holds a row lock of p_table, in words, for the messages of a call
-- that gave up waiting: the fleet's operator can end that session. Runs as
-- the registry's owner, who sees every session. The row's xmax names the
-- locking transaction: a session's (pg_locks), or a prepared transaction's
-- (pg_prepared_xacts), which outlives every session. A lock taken in a
-- subtransaction (lock_fleet and lock_node wait for a contended row in
-- one) leaves the subtransaction's id, which pg_locks no longer shows once
-- it ends; then the holders are the other sessions that hold the table's
-- RowShareLock (every row lock takes it, to the transaction's end), all
-- named, the one in the transaction open longest first.
CREATE OR REPLACE FUNCTION snowflake_registry.locker_text(p_table regclass, p_xmax xid)
RETURNS text LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT coalesce(
        (SELECT format('prepared transaction %L (role "%s", prepared at %s): it holds its locks until ROLLBACK PREPARED %L',
                       p.gid, p.owner, to_char(p.prepared AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS') || ' UTC', p.gid)
         FROM pg_prepared_xacts p WHERE p.transaction = p_xmax),
        (SELECT string_agg(format('registry process %s (role "%s", application "%s", client %s, %s, in a transaction open since %s)',
                                  a.pid, a.usename, a.application_name, coalesce(host(a.client_addr), 'local'), a.state,
                                  to_char(a.xact_start AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS') || ' UTC'),
                           ' or ' ORDER BY a.xact_start, a.pid)
         FROM pg_stat_activity a
         WHERE a.pid IN (SELECT l.pid FROM pg_locks l
                         WHERE l.locktype = 'transactionid' AND l.transactionid = p_xmax AND l.granted)),
        (SELECT 'one of ' || string_agg(format('registry process %s (role "%s", application "%s", client %s, %s, in a transaction open since %s)',
                                  a.pid, a.usename, a.application_name, coalesce(host(a.client_addr), 'local'), a.state,
                                  to_char(a.xact_start AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS') || ' UTC'),
                           ', ' ORDER BY a.xact_start, a.pid)
         FROM pg_stat_activity a
         WHERE a.pid <> pg_backend_pid() AND a.pid IN (
             SELECT l.pid FROM pg_locks l
             WHERE l.locktype = 'relation' AND l.relation = p_table AND l.mode = 'RowShareLock' AND l.granted
               AND l.database = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database()))),
        (SELECT 'one of the prepared transactions ' || string_agg(format('%L', p.gid), ', ' ORDER BY p.prepared)
                || ' (ROLLBACK PREPARED ends one)'
         FROM pg_prepared_xacts p WHERE p.database = current_database()),
        'a session of the registry that has ended since')
$$;

-- The row locks a call waits for, for at most about a second in all: a
-- client of the registry that keeps its transaction open after a call
-- holds the rows that call locked, and no other server's call may wait on
-- it longer than that. A row that is free is locked at once, in the
-- caller's transaction itself (SKIP LOCKED: no wait, no subtransaction, so
-- that a call that waits on it later can name its holder exactly). A
-- contended row is waited for in the lock queue, which is fair (claims of
-- many servers starting at once each wait their turn), with a lock_timeout
-- of half a second for each of the two locks a wait may take (the tuple's,
-- then its holder's transaction's); the error names the holder.
CREATE OR REPLACE FUNCTION snowflake_registry.lock_fleet(p_fleet text)
RETURNS snowflake_registry.fleets
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    f snowflake_registry.fleets;
BEGIN
    -- (NO KEY UPDATE: serialises the fleet's claims, and lets the foreign
    -- key checks of other calls' writes to node_ids and grants, which take
    -- KEY SHARE on the fleet's row, pass while a claim holds it.)
    SELECT * INTO f FROM snowflake_registry.fleets g WHERE g.fleet = p_fleet FOR NO KEY UPDATE SKIP LOCKED;
    IF FOUND OR NOT EXISTS (SELECT FROM snowflake_registry.fleets g WHERE g.fleet = p_fleet) THEN
        RETURN f;
    END IF;
    RETURN snowflake_registry.wait_for_fleet(p_fleet);
END
$$;

CREATE OR REPLACE FUNCTION snowflake_registry.wait_for_fleet(p_fleet text)
RETURNS snowflake_registry.fleets
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET lock_timeout = '500ms'
AS $$
DECLARE
    f snowflake_registry.fleets;
BEGIN
    SELECT * INTO f FROM snowflake_registry.fleets g WHERE g.fleet = p_fleet FOR NO KEY UPDATE;
    RETURN f;
EXCEPTION WHEN lock_not_available THEN
    RAISE EXCEPTION 'the claims of fleet "%" wait on %', p_fleet,
        snowflake_registry.locker_text('snowflake_registry.fleets',
            (SELECT g.xmax FROM snowflake_registry.fleets g WHERE g.fleet = p_fleet))
        USING ERRCODE = '55P03',
              DETAIL = 'A claim locks its fleet''s row until its transaction ends; that session keeps one open.',
              HINT = 'Clients of the registry call its functions in transactions of their own. End that session (SELECT pg_terminate_backend(pid)); the servers retry by themselves.';
END
$$;

CREATE OR REPLACE FUNCTION snowflake_registry.lock_node(p_fleet text, p_node_id int)
RETURNS snowflake_registry.node_ids
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    cur snowflake_registry.node_ids;
BEGIN
    SELECT * INTO cur FROM snowflake_registry.node_ids n
    WHERE n.fleet = p_fleet AND n.node_id = p_node_id FOR UPDATE SKIP LOCKED;
    IF FOUND OR NOT EXISTS (SELECT FROM snowflake_registry.node_ids n
                            WHERE n.fleet = p_fleet AND n.node_id = p_node_id) THEN
        RETURN cur;
    END IF;
    RETURN snowflake_registry.wait_for_node(p_fleet, p_node_id);
END
$$;

CREATE OR REPLACE FUNCTION snowflake_registry.wait_for_node(p_fleet text, p_node_id int)
RETURNS snowflake_registry.node_ids
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET lock_timeout = '500ms'
AS $$
DECLARE
    cur snowflake_registry.node_ids;
BEGIN
    SELECT * INTO cur FROM snowflake_registry.node_ids n
    WHERE n.fleet = p_fleet AND n.node_id = p_node_id FOR UPDATE;
    RETURN cur;
EXCEPTION WHEN lock_not_available THEN
    RAISE EXCEPTION 'the calls for node id % of fleet "%" wait on %', p_node_id, p_fleet,
        snowflake_registry.locker_text('snowflake_registry.node_ids',
            (SELECT n.xmax FROM snowflake_registry.node_ids n WHERE n.fleet = p_fleet AND n.node_id = p_node_id))
        USING ERRCODE = '55P03',
              DETAIL = 'A claim, renewal, release or resumption locks the node id''s row until its transaction ends; that session keeps one open.',
              HINT = 'Clients of the registry call its functions in transactions of their own. End that session (SELECT pg_terminate_backend(pid)); the servers retry by themselves.';
END
$$;

-- Claims a node id for a starting server. p_node_id: the id the server is
-- configured with (NULL: any free one, p_preferred first). Returns the id,
-- the claim, the floor (issue only IDs with a time above it) and the grant.
DROP FUNCTION IF EXISTS snowflake_registry.claim_by_token(text, bigint, int, int, int, int, text, numeric, text, int, text, bigint, bigint, boolean, text[]);
CREATE FUNCTION snowflake_registry.claim_by_token(
    p_fleet text, p_epoch_unix_ms bigint, p_node_bits int, p_sequence_bits int,
    p_node_id int, p_preferred int, p_token text,
    p_system_identifier numeric, p_host text, p_port int, p_data_directory text,
    p_holder_now_ms bigint, p_grant_ms bigint, p_retry boolean, p_revealed text[])
RETURNS TABLE (node_id int, claim_id bigint, floor_ms bigint, until_ms bigint, signing_key text)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    f snowflake_registry.fleets;
    cur snowflake_registry.node_ids;
    now_ms bigint;
    max_node int;
    chosen int;
    new_floor bigint;
    new_until bigint;
    new_claim bigint;
    holders text;
    -- A keyed claim's signing key, new with every answer (122 random bits):
    -- whoever got an earlier answer (an onlooker that sent the holder's own
    -- retry first, or made a claim under a hash of the holder's it saw)
    -- holds a key that no longer signs once the holder's retry is
    -- answered. The holder issues only under the last answer it got.
    new_key text := CASE WHEN p_token LIKE 'keyed:%' THEN replace(gen_random_uuid()::text, '-', '') END;
BEGIN
    -- Every argument bounded: a client may be wrong or hostile, and what it
    -- stores is read by every later claim and by the holders view.
    IF p_fleet IS NULL OR p_token IS NULL OR length(p_token) NOT BETWEEN 16 AND 128
       OR p_epoch_unix_ms IS NULL OR p_epoch_unix_ms NOT BETWEEN -4611686018427387903 AND 4611686018427387903
       OR p_node_bits IS NULL OR p_node_bits NOT BETWEEN 0 AND 28
       OR p_sequence_bits IS NULL OR p_sequence_bits NOT BETWEEN 0 AND 28
       OR p_system_identifier IS NULL OR p_system_identifier NOT BETWEEN 0 AND 18446744073709551615
       OR p_host IS NULL OR length(p_host) > 255 OR p_port IS NULL OR p_port NOT BETWEEN 0 AND 65535
       OR p_data_directory IS NULL OR length(p_data_directory) > 1024
       OR NOT snowflake_registry.valid_times(p_holder_now_ms, p_grant_ms) THEN
        RAISE EXCEPTION 'snowflake_registry: invalid claim arguments'
            USING ERRCODE = '22023',
                  HINT = 'A token of 16 to 128 characters, node and sequence bits of 0 to 28, a host of at most 255 characters, a port of 0 to 65535, a data directory of at most 1024 characters, a present of 0 to 2^62 ms, a grant of 1 ms to 1 hour.';
    END IF;
    PERFORM snowflake_registry.durable_commit();
    PERFORM snowflake_registry.check_incarnation();
    -- Serialises the claims of this fleet.
    f := snowflake_registry.lock_fleet(p_fleet);
    IF f.fleet IS NULL THEN
        SELECT coalesce(string_agg(format('"%s"', g.fleet), ', ' ORDER BY g.fleet), 'none') INTO holders
        FROM (SELECT g.fleet FROM snowflake_registry.fleets g ORDER BY g.fleet LIMIT 20) g;
        RAISE EXCEPTION 'fleet "%" does not exist in this registry', p_fleet
            USING ERRCODE = '42704',
                  DETAIL = 'Its fleets (the first 20): ' || holders || '.',
                  HINT = format('Check snowflake_id.registry_fleet (and the dbname of snowflake_id.registry) for a typo. A new fleet is created by the registry''s owner, with its epoch (ms since 1970), node and sequence bits: SELECT snowflake_registry.create_fleet(%L, %s, %s, %s);',
                                p_fleet, p_epoch_unix_ms, p_node_bits, p_sequence_bits);
    END IF;
    -- (A fleet an older script made, to be shaped by its first claim.)
    IF f.epoch_unix_ms IS NULL THEN
        RAISE EXCEPTION 'fleet "%" has no epoch and layout yet', p_fleet
            USING ERRCODE = '55000',
                  DETAIL = 'A claim never gives a fleet its epoch and layout: the first claim of a client could then refuse every other server.',
                  HINT = format('The registry''s owner gives them: SELECT snowflake_registry.create_fleet(%L, %s, %s, %s);',
                                p_fleet, p_epoch_unix_ms, p_node_bits, p_sequence_bits);
    END IF;
    -- The fleet's first claim starts at the registry's last fence, if any
    -- (a fleet of the same name may have had claims in a history a restore
    -- lost; fence() passes over a fleet without claims).
    IF NOT EXISTS (SELECT FROM snowflake_registry.node_ids n WHERE n.fleet = p_fleet) THEN
        UPDATE snowflake_registry.fleets g
        SET fence_ms = greatest(g.fence_ms,
                coalesce((SELECT CASE WHEN i.fenced_until_unix_ms < 0 THEN -1
                                      ELSE i.fenced_until_unix_ms - g.epoch_unix_ms END
                          FROM snowflake_registry.incarnation i), -1))
        WHERE g.fleet = p_fleet
        RETURNING * INTO STRICT f;
    END IF;
    IF (f.epoch_unix_ms, f.node_bits, f.sequence_bits)
       IS DISTINCT FROM (p_epoch_unix_ms, p_node_bits, p_sequence_bits) THEN
        RAISE EXCEPTION 'fleet "%" issues IDs with epoch % ms and layout %/%/% (time/node/sequence bits), this server with epoch % ms and layout %/%/%',
            p_fleet, f.epoch_unix_ms, 63 - f.node_bits - f.sequence_bits, f.node_bits, f.sequence_bits,
            p_epoch_unix_ms, 63 - p_node_bits - p_sequence_bits, p_node_bits, p_sequence_bits
            USING ERRCODE = '22023',
                  HINT = 'Servers of one fleet must share snowflake_id.epoch, node_bits and sequence_bits, or their IDs collide: give this server the fleet''s settings, or another snowflake_id.registry_fleet.';
    END IF;
    now_ms := snowflake_registry.now_ms(f.epoch_unix_ms);
    max_node := (1 << f.node_bits) - 1;

    -- A keyed claim's retry revealed the secrets of the claims it repeats
    -- (p_revealed: their tokens): the live one of them, if one was made by
    -- a server of the retry's identity, takes this claim's token and is
    -- answered as a retry; a revealed secret is spent. (Under the fleet's
    -- lock: a claim still being made has committed or failed by now. The
    -- identity: a claim another client made under a hash it saw, with its
    -- own identity, is not handed to the server whose hash it was.)
    IF p_revealed IS NOT NULL THEN
        UPDATE snowflake_registry.node_ids n SET token = p_token
        WHERE (n.fleet, n.node_id) = (SELECT o.fleet, o.node_id FROM snowflake_registry.node_ids o
                                      WHERE o.fleet = p_fleet AND o.released_at IS NULL AND o.token = ANY (p_revealed)
                                        AND (o.system_identifier, o.host, o.port, o.data_directory)
                                            = (p_system_identifier, p_host, p_port, p_data_directory)
                                      ORDER BY o.claim_id DESC LIMIT 1);
        p_retry := p_retry OR FOUND;
    END IF;

    -- The same token again: a retry of a claim whose answer was lost (it
    -- committed all the same), or a request that arrived after its retry.
    -- The same answer, never a second claim: that would take over the
    -- first (a fixed node id would then wait for its own grant).
    SELECT * INTO cur FROM snowflake_registry.node_ids n
    WHERE n.fleet = p_fleet AND n.token = p_token AND n.released_at IS NULL;
    IF FOUND THEN
        -- (A keyed claim's first request names a secret's hash never used:
        -- one seen in flight and sent again gets no answer, nor its key.)
        IF NOT p_retry THEN
            RAISE EXCEPTION 'snowflake_registry: this claim''s secret was used already'
                USING ERRCODE = '22023',
                      HINT = 'Each claim names the hash of a new secret; a retry reveals the secrets of the claims it repeats (p_previous_secrets).';
        END IF;
        IF p_node_id IS NOT NULL AND p_node_id <> cur.node_id THEN
            RAISE EXCEPTION 'snowflake_registry: this claim''s token holds node id %, not %', cur.node_id, p_node_id
                USING ERRCODE = '22023';
        END IF;
        -- (A new key, and its calls numbered from 0: what any earlier
        -- answer's key signed, or burnt, counts for nothing.)
        IF new_key IS NOT NULL THEN
            UPDATE snowflake_registry.node_ids n SET signing_key = new_key, last_call = 0
            WHERE n.fleet = p_fleet AND n.node_id = cur.node_id;
        END IF;
        RETURN QUERY SELECT cur.node_id, cur.claim_id, cur.floor_ms, cur.until_ms, new_key;
        RETURN;
    END IF;

    IF p_node_id IS NOT NULL THEN
        IF p_node_id < 0 OR p_node_id > max_node THEN
            RAISE EXCEPTION 'node id % is outside fleet "%" (0 .. %)', p_node_id, p_fleet, max_node
                USING ERRCODE = '22023';
        END IF;
        SELECT * INTO cur FROM snowflake_registry.node_ids n
        WHERE n.fleet = p_fleet AND n.node_id = p_node_id;
        -- A live claim is never taken over, whoever asks: the identity a
        -- server reports can be repeated by any client (and by a copy of
        -- its data directory), and the claim's token, the only proof,
        -- never leaves its holder's memory. A live claim of a server that
        -- looks like this one is its own run before a crash (or a copy):
        -- it passes on when its grant ends, which costs a restarted server
        -- little more than the wait for the floor (that same end, less
        -- max_clock_drift) it had anyway. (See is_live() and resume().)
        IF FOUND AND snowflake_registry.is_live(cur, now_ms) THEN
            IF (cur.system_identifier, cur.host, cur.port, cur.data_directory)
               IS NOT DISTINCT FROM (p_system_identifier, p_host, p_port, p_data_directory) THEN
                RAISE EXCEPTION 'node id % of fleet "%" is held by this server''s previous run, or a copy of its data directory: %',
                    p_node_id, p_fleet, snowflake_registry.holder_text(cur)
                    USING ERRCODE = '55000',
                          DETAIL = format('Its grant covers IDs up to %s. A live claim is never taken over: only its holder knows its token.',
                                          to_timestamp((f.epoch_unix_ms + cur.until_ms) / 1000.0)),
                          HINT = 'After a crash the claim passes on when its grant ends (at most snowflake_id.registry_grant after the crash): this server claims it then by itself. If a copy of this data directory runs, stop one of the two.';
            END IF;
            RAISE EXCEPTION 'node id % of fleet "%" is held by %', p_node_id, p_fleet, snowflake_registry.holder_text(cur)
                USING ERRCODE = '55000',
                      DETAIL = format('Its grant covers IDs up to %s.', to_timestamp((f.epoch_unix_ms + cur.until_ms) / 1000.0)),
                      HINT = 'Two servers with one node id issue colliding IDs. Give this server another snowflake_id.node_id, or leave it unset to take a free one; the node id passes on when its holder stops (at once after a clean shutdown, else when its grant ends).';
        END IF;
        chosen := p_node_id;
    ELSE
        -- The id this data directory held last, if no one holds it now:
        -- never claimed, released, or last held by this same data
        -- directory (system identifier, host and path) with its grant
        -- past. A lapsed grant of another holder is not taken this way:
        -- a copy of a data directory remembers its original's node id,
        -- and the original may only have missed its renewals (a registry
        -- outage lapses every grant at once) and be about to renew.
        IF p_preferred BETWEEN 0 AND max_node THEN
            SELECT * INTO cur FROM snowflake_registry.node_ids n
            WHERE n.fleet = p_fleet AND n.node_id = p_preferred;
            IF NOT FOUND
               OR (cur.released_at IS NOT NULL AND NOT snowflake_registry.fenced(cur))
               OR (NOT snowflake_registry.is_live(cur, now_ms) AND cur.system_identifier = p_system_identifier
                   AND cur.host = p_host AND cur.data_directory = p_data_directory) THEN
                chosen := p_preferred;
            END IF;
        END IF;
        -- Else the lowest id never claimed: one index probe per id below it
        -- (an anti-join over the whole table took 100 ms at 1000 ids; see
        -- bench/registry.sh).
        IF chosen IS NULL THEN
            FOR i IN 0 .. max_node LOOP
                IF NOT EXISTS (SELECT FROM snowflake_registry.node_ids n
                               WHERE n.fleet = p_fleet AND n.node_id = i) THEN
                    chosen := i;
                    EXIT;
                END IF;
            END LOOP;
        END IF;
        -- Else one whose holder released it or whose grant is past, the
        -- one whose grants ended first (its new holder waits least).
        IF chosen IS NULL THEN
            SELECT n.node_id INTO chosen FROM snowflake_registry.node_ids n
            WHERE n.fleet = p_fleet AND NOT snowflake_registry.is_live(n, now_ms)
            ORDER BY n.max_until_ms, n.node_id LIMIT 1;
        END IF;
        IF chosen IS NULL THEN
            SELECT string_agg(format('%s: %s', n.node_id, snowflake_registry.holder_text(n)), E'\n' ORDER BY n.node_id)
            INTO holders
            FROM (SELECT * FROM snowflake_registry.node_ids n WHERE n.fleet = p_fleet ORDER BY n.node_id LIMIT 50) n;
            RAISE EXCEPTION 'all % node ids of fleet "%" are held', max_node + 1, p_fleet
                USING ERRCODE = '53400',
                      DETAIL = 'Holders (the first 50):' || E'\n' || holders,
                      HINT = 'A node id returns to the pool when its holder releases it (a clean shutdown) or its grant has passed. Stop servers that are not needed, or start a new fleet with more snowflake_id.node_bits.';
        END IF;
    END IF;

    cur := snowflake_registry.lock_node(p_fleet, chosen);
    -- Chosen before its row was locked: a renewal or a resumption may have
    -- made the claim live again meanwhile (a renewal may extend a grant
    -- past its end). Never taken then: resume() rests on that.
    IF cur.fleet IS NOT NULL AND snowflake_registry.is_live(cur, now_ms) THEN
        RAISE EXCEPTION 'node id % of fleet "%" was renewed while this claim chose it', chosen, p_fleet
            USING ERRCODE = '40001',
                  HINT = 'The claim is retried by itself.';
    END IF;
    -- -1: never granted, any time is free (unless fenced).
    new_floor := greatest(CASE WHEN cur.fleet IS NOT NULL THEN cur.max_until_ms ELSE -1 END, f.fence_ms);
    -- The grant reaches p_grant_ms past the holder's present or the floor,
    -- and never more than max_grant_ms past the registry's clock (the bound
    -- the fence rests on): with a floor that far ahead, it starts empty
    -- and renewals extend it as the registry's clock advances.
    new_until := greatest(new_floor, least(greatest(p_holder_now_ms, new_floor) + p_grant_ms,
                                           now_ms + least(f.max_grant_ms, 3600000)));
    IF cur.fleet IS NOT NULL AND cur.released_at IS NULL THEN
        UPDATE snowflake_registry.grants g SET ended_at = clock_timestamp(), ended = 'taken over'
        WHERE g.claim_id = cur.claim_id;
    END IF;
    INSERT INTO snowflake_registry.grants
        (fleet, node_id, system_identifier, host, port, data_directory, floor_ms, until_ms, claimed_at, renewed_at)
    VALUES (p_fleet, chosen, p_system_identifier, p_host, p_port, p_data_directory, new_floor, new_until,
            clock_timestamp(), clock_timestamp())
    RETURNING grants.claim_id INTO new_claim;
    INSERT INTO snowflake_registry.node_ids AS n
        (fleet, node_id, claim_id, token, system_identifier, host, port, data_directory,
         floor_ms, until_ms, max_until_ms, renew_every_ms, claimed_at, renewed_at, released_at,
         signing_key, last_call)
    VALUES (p_fleet, chosen, new_claim, p_token, p_system_identifier, p_host, p_port, p_data_directory,
            new_floor, new_until, new_until, greatest(p_grant_ms / 6, 100), clock_timestamp(), clock_timestamp(), NULL,
            new_key, 0)
    ON CONFLICT ON CONSTRAINT node_ids_pkey DO UPDATE SET
        claim_id = EXCLUDED.claim_id, token = EXCLUDED.token,
        signing_key = EXCLUDED.signing_key, last_call = 0,
        system_identifier = EXCLUDED.system_identifier, host = EXCLUDED.host, port = EXCLUDED.port,
        data_directory = EXCLUDED.data_directory, floor_ms = EXCLUDED.floor_ms,
        until_ms = EXCLUDED.until_ms, max_until_ms = greatest(n.max_until_ms, EXCLUDED.until_ms),
        renew_every_ms = EXCLUDED.renew_every_ms, claimed_at = EXCLUDED.claimed_at,
        renewed_at = EXCLUDED.renewed_at, released_at = NULL;
    RETURN QUERY SELECT chosen, new_claim, new_floor, new_until, new_key;
END
$$;

-- A signed call whose number the claim has used (a replay, or two calls
-- with one number at once): refused, its effect rolled back.
CREATE OR REPLACE FUNCTION snowflake_registry.refuse_used_call(p_call bigint, p_claim_id bigint)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION 'snowflake_registry: call number % of claim % was used already', p_call, p_claim_id
        USING ERRCODE = '22023',
              HINT = 'A signed call is accepted once: its holder numbers each call above the last.';
END
$$;

-- Raises the holder's grant to p_grant_ms past its present (never lowers it).
-- Fails with 55000 when the claim is no longer the holder's.
DROP FUNCTION IF EXISTS snowflake_registry.renew_by_token(text, int, bigint, text, bigint, bigint, bigint);
CREATE OR REPLACE FUNCTION snowflake_registry.renew_by_token(
    p_fleet text, p_node_id int, p_claim_id bigint, p_token text, p_holder_now_ms bigint, p_grant_ms bigint,
    p_call bigint, p_proof text)
RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    f snowflake_registry.fleets;
    cur snowflake_registry.node_ids;
    new_until bigint;
    -- A signed call's text, hashed (the proof is sha256(key || this)).
    text_hash text;
BEGIN
    IF NOT snowflake_registry.valid_times(p_holder_now_ms, p_grant_ms) THEN
        RAISE EXCEPTION 'snowflake_registry: invalid renewal arguments'
            USING ERRCODE = '22023',
                  HINT = 'A present of 0 to 2^62 ms and a grant of 1 ms to 1 hour.';
    END IF;
    IF p_proof IS NOT NULL THEN
        PERFORM snowflake_registry.check_signed(p_call, p_proof);
        text_hash := encode(sha256(convert_to(concat_ws('|', 'renew', p_node_id, p_claim_id, p_call,
                                                        p_holder_now_ms, p_grant_ms, p_fleet), 'UTF8')), 'hex');
    END IF;
    PERFORM snowflake_registry.durable_commit();
    IF snowflake_registry.check_incarnation() THEN
        -- This call fenced, and ended the caller's claim: answer without
        -- an extension (0 raises nothing) so that the fence commits; an
        -- error would roll it back. The next renewal is told the claim is
        -- lost.
        RETURN 0;
    END IF;
    -- The row is locked only for its own claim and token, or a proof that
    -- holds with an unused call number: a wrong one (another client, an
    -- onlooker, a replay) takes no lock that the holder's renewals would
    -- wait on if its transaction stayed open. (The row's conditions are
    -- met before it is locked.) First without a wait or a subtransaction:
    -- a renewal is the registry's most frequent call, and its row is
    -- rarely locked.
    IF p_proof IS NULL THEN
        SELECT * INTO cur FROM snowflake_registry.node_ids n
        WHERE n.fleet = p_fleet AND n.node_id = p_node_id AND n.claim_id = p_claim_id AND n.token = p_token
        FOR UPDATE SKIP LOCKED;
    ELSE
        SELECT * INTO cur FROM snowflake_registry.node_ids n
        WHERE n.fleet = p_fleet AND n.node_id = p_node_id AND n.claim_id = p_claim_id AND n.last_call < p_call
          AND encode(sha256(convert_to(n.signing_key || text_hash, 'UTF8')), 'hex') = p_proof
        FOR UPDATE SKIP LOCKED;
        p_token := CASE WHEN FOUND THEN cur.token END;
    END IF;
    IF cur.fleet IS NULL THEN
        SELECT * INTO cur FROM snowflake_registry.node_ids n
        WHERE n.fleet = p_fleet AND n.node_id = p_node_id;
        IF p_proof IS NOT NULL THEN
            p_token := snowflake_registry.signed_token(cur, p_claim_id, p_call, text_hash, p_proof);
        END IF;
        IF cur.claim_id = p_claim_id AND cur.token = p_token THEN
            cur := snowflake_registry.lock_node(p_fleet, p_node_id);
        END IF;
    END IF;
    -- The fleet's row is read after the claim's lock: a fence that held
    -- that lock has committed by now, and its fenced_at names the fence
    -- that ended the claim (read before, it named none, and a claim the
    -- fence ended was answered "released", which its holder does not
    -- resume: tests/integration/registry_fence_race.sh).
    SELECT * INTO f FROM snowflake_registry.fleets WHERE fleet = p_fleet;
    IF cur.fleet IS NULL OR cur.claim_id IS DISTINCT FROM p_claim_id OR cur.token IS DISTINCT FROM p_token
       OR cur.released_at IS NOT NULL THEN
        RAISE EXCEPTION 'the claim on node id % of fleet "%" is lost: %', p_node_id, p_fleet,
            -- (The caller's own claim, ended by a fence, is reported as such
            -- whatever the row holds now, also after a second fence: its
            -- holder claims the node id again above the fence, which covers
            -- every grant the registry lost. A claim taken over before the
            -- fence stays a takeover.)
            CASE WHEN cur.fleet IS NULL THEN 'the registry does not know it'
                 WHEN f.fenced_at IS NOT NULL AND EXISTS (
                          SELECT FROM snowflake_registry.grants g
                          WHERE g.claim_id = p_claim_id AND g.fleet = p_fleet AND g.node_id = p_node_id
                            AND g.ended = 'fenced')
                     THEN format('the registry ended every claim at %s: %s', f.fenced_at, f.fenced_why)
                 WHEN cur.claim_id IS DISTINCT FROM p_claim_id THEN 'it was taken over by ' || snowflake_registry.holder_text(cur)
                 WHEN cur.token IS DISTINCT FROM p_token THEN 'the registry knows another claim with this number (it was restored from a backup)'
                 ELSE 'it was released' END
            USING ERRCODE = '55000',
                  HINT = 'This server issues IDs until its grant ends. Its registry worker resumes the claim after a fence (the registry ended every claim), or claims the node id again by itself, which succeeds once no other server holds it.';
    END IF;
    -- Even past its end on the registry's clock the grant may be renewed:
    -- no one took the id, and the next floor counts the new grant.
    new_until := greatest(cur.until_ms,
                          least(greatest(p_holder_now_ms, cur.floor_ms) + p_grant_ms,
                                snowflake_registry.now_ms(f.epoch_unix_ms) + least(f.max_grant_ms, 3600000)));
    -- (A signed call's number is spent in the same update: one update of
    -- the row per call, so no foreign key check waits on the fleet's row.)
    UPDATE snowflake_registry.node_ids n SET until_ms = new_until,
        max_until_ms = greatest(n.max_until_ms, new_until), renewed_at = clock_timestamp(),
        renew_every_ms = greatest(p_grant_ms / 6, 100), last_call = coalesce(p_call, n.last_call)
    WHERE n.fleet = p_fleet AND n.node_id = p_node_id AND (p_call IS NULL OR n.last_call < p_call);
    IF NOT FOUND THEN
        PERFORM snowflake_registry.refuse_used_call(p_call, p_claim_id);
    END IF;
    UPDATE snowflake_registry.grants g SET until_ms = new_until, renewed_at = clock_timestamp()
    WHERE g.claim_id = p_claim_id;
    RETURN new_until;
END
$$;

-- Ends a claim at a clean shutdown: the holder issued no ID with a time
-- after p_issued_until_ms (and will not), so the next holder's floor is
-- that, not the whole grant.
DROP FUNCTION IF EXISTS snowflake_registry.release_by_token(text, int, bigint, text, bigint, bigint);
CREATE OR REPLACE FUNCTION snowflake_registry.release_by_token(
    p_fleet text, p_node_id int, p_claim_id bigint, p_token text, p_issued_until_ms bigint,
    p_call bigint, p_proof text)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    cur snowflake_registry.node_ids;
    issued bigint;
BEGIN
    IF p_proof IS NOT NULL THEN
        PERFORM snowflake_registry.check_signed(p_call, p_proof);
    END IF;
    PERFORM snowflake_registry.durable_commit();
    PERFORM snowflake_registry.check_incarnation();
    -- (A wrong claim, token or proof takes no lock: see renew().)
    SELECT * INTO cur FROM snowflake_registry.node_ids n
    WHERE n.fleet = p_fleet AND n.node_id = p_node_id;
    IF p_proof IS NOT NULL THEN
        p_token := snowflake_registry.signed_token(cur, p_claim_id, p_call,
            encode(sha256(convert_to(concat_ws('|', 'release', p_node_id, p_claim_id, p_call,
                                               p_issued_until_ms, p_fleet), 'UTF8')), 'hex'), p_proof);
    END IF;
    IF cur.claim_id = p_claim_id AND cur.token = p_token THEN
        cur := snowflake_registry.lock_node(p_fleet, p_node_id);
    END IF;
    IF cur.fleet IS NULL OR cur.claim_id IS DISTINCT FROM p_claim_id OR cur.token IS DISTINCT FROM p_token
       OR cur.released_at IS NOT NULL THEN
        RETURN;
    END IF;
    -- Never below the floor (earlier holders' grants), never above the grant.
    issued := least(greatest(p_issued_until_ms, cur.floor_ms), cur.until_ms);
    UPDATE snowflake_registry.node_ids n SET until_ms = issued,
        max_until_ms = greatest(cur.floor_ms, issued), released_at = clock_timestamp(),
        last_call = coalesce(p_call, n.last_call)
    WHERE n.fleet = p_fleet AND n.node_id = p_node_id AND (p_call IS NULL OR n.last_call < p_call);
    IF NOT FOUND THEN
        PERFORM snowflake_registry.refuse_used_call(p_call, p_claim_id);
    END IF;
    UPDATE snowflake_registry.grants g SET until_ms = issued, ended_at = clock_timestamp(), ended = 'released'
    WHERE g.claim_id = p_claim_id;
END
$$;

-- Continues a claim a fence ended, for its holder, which still runs and
-- reports the grant it holds (p_held_until_ms): a failover of the registry
-- or a pg_upgrade (both fence: they cannot be told from a restore) then
-- costs the fleet nothing. Fails with 55000 when it cannot be proven safe;
-- the holder then claims the node id again above the fence, as before.
--
-- Why it is safe. The fence assumes the registry lost some history. What
-- that history may hold for this node id: earlier holders, whose grants lie
-- below this claim's floor (it was given above them); renewals of this
-- claim, which the holder reports (the node id's floors are raised to its
-- grant); and the claim's end. A release is its holder's own act (a holder
-- that resumes did not release), and no claim takes the node id before
-- the claim's grant has ended on the registry's clock (is_live()). So the
-- claim resumes only
--   * with its token (only its holder has it), as the node id's last claim
--     the registry knows, ended by a fence and by nothing else, and
--   * while its grant (the later of the one reported and the one the
--     registry knows; the lost history's is at least both) has not ended
--     on the registry's clock, with a second to spare for the clocks of
--     two registry hosts: a takeover in the lost history would have come
--     after that end, so after now.
-- It rests on the registry's clock not being behind the one it had, as
-- the fence does. The resumed claim keeps its number and floor;
-- who_issued() reads its one grant row. Two holders reporting one node id
-- cannot both pass: the one that is not the last claim the registry knows
-- is refused.
DROP FUNCTION IF EXISTS snowflake_registry.resume_by_token(text, int, bigint, text, bigint, bigint, bigint, bigint);
CREATE OR REPLACE FUNCTION snowflake_registry.resume_by_token(
    p_fleet text, p_node_id int, p_claim_id bigint, p_token text,
    p_held_until_ms bigint, p_holder_now_ms bigint, p_grant_ms bigint, p_call bigint, p_proof text)
RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    f snowflake_registry.fleets;
    cur snowflake_registry.node_ids;
    now_ms bigint;
    cap bigint;
    new_until bigint;
BEGIN
    IF p_fleet IS NULL OR p_node_id IS NULL OR p_claim_id IS NULL OR (p_token IS NULL AND p_proof IS NULL)
       OR NOT snowflake_registry.valid_times(p_holder_now_ms, p_grant_ms)
       OR p_held_until_ms IS NULL OR p_held_until_ms NOT BETWEEN 0 AND 4611686018427387903 THEN
        RAISE EXCEPTION 'snowflake_registry: invalid resume arguments'
            USING ERRCODE = '22023',
                  HINT = 'A fleet, node id, claim and token, a present and a grant end of 0 to 2^62 ms, and a grant of 1 ms to 1 hour.';
    END IF;
    PERFORM snowflake_registry.durable_commit();
    -- (A fence made by this call ends this claim too; it commits with the
    -- resumption.)
    PERFORM snowflake_registry.check_incarnation();
    SELECT * INTO f FROM snowflake_registry.fleets WHERE fleet = p_fleet;
    -- (A wrong claim, token or proof takes no lock: see renew().)
    SELECT * INTO cur FROM snowflake_registry.node_ids n
    WHERE n.fleet = p_fleet AND n.node_id = p_node_id;
    IF p_proof IS NOT NULL THEN
        PERFORM snowflake_registry.check_signed(p_call, p_proof);
        p_token := snowflake_registry.signed_token(cur, p_claim_id, p_call,
            encode(sha256(convert_to(concat_ws('|', 'resume', p_node_id, p_claim_id, p_call,
                                               p_held_until_ms, p_holder_now_ms, p_grant_ms, p_fleet), 'UTF8')), 'hex'),
            p_proof);
    END IF;
    IF cur.claim_id = p_claim_id AND cur.token = p_token THEN
        cur := snowflake_registry.lock_node(p_fleet, p_node_id);
    END IF;
    IF cur.fleet IS NULL OR f.epoch_unix_ms IS NULL OR cur.claim_id IS DISTINCT FROM p_claim_id
       OR cur.token IS DISTINCT FROM p_token THEN
        RAISE EXCEPTION 'the claim on node id % of fleet "%" cannot be resumed: the registry does not know it as the node id''s last claim', p_node_id, p_fleet
            USING ERRCODE = '55000',
                  DETAIL = 'Restored from a backup older than the claim, or another server claimed the node id after the claim''s grant ended.',
                  HINT = 'The server claims the node id again above the fence, by itself.';
    END IF;
    IF cur.released_at IS NOT NULL AND NOT snowflake_registry.fenced(cur) THEN
        RAISE EXCEPTION 'the claim on node id % of fleet "%" cannot be resumed: it was released', p_node_id, p_fleet
            USING ERRCODE = '55000';
    END IF;
    now_ms := snowflake_registry.now_ms(f.epoch_unix_ms);
    cap := least(f.max_grant_ms, 3600000);
    IF coalesce((SELECT r.claims_kept_live_since FROM snowflake_registry.rules r), 'infinity')
       > clock_timestamp() - make_interval(secs => (cap + 1000) / 1000.0) THEN
        RAISE EXCEPTION 'the claim on node id % of fleet "%" cannot be resumed: this registry script was installed over older claims less than max_grant_ms ago', p_node_id, p_fleet
            USING ERRCODE = '55000',
                  DETAIL = 'The older script let a live claim be taken over; a history the registry lost may hold such a takeover until every grant given under it has ended.',
                  HINT = 'The server claims the node id again above the fence, by itself.';
    END IF;
    IF greatest(cur.until_ms, p_held_until_ms) < now_ms + 1000 THEN
        RAISE EXCEPTION 'the claim on node id % of fleet "%" cannot be resumed: its grant ended at %', p_node_id, p_fleet,
            to_timestamp((f.epoch_unix_ms + greatest(cur.until_ms, p_held_until_ms)) / 1000.0)
            USING ERRCODE = '55000',
                  DETAIL = 'After its grant''s end another server may have taken the node id over in the history the registry lost.',
                  HINT = 'The server claims the node id again above the fence, by itself.';
    END IF;
    -- Every grant ends before the registry's clock plus max_grant_ms when
    -- given (a second more for the clocks of two registry hosts).
    IF p_held_until_ms > now_ms + cap + 1000 THEN
        RAISE EXCEPTION 'the claim on node id % of fleet "%" cannot be resumed: the grant reported (% ms) lies past what the registry gives (% ms)',
            p_node_id, p_fleet, p_held_until_ms, now_ms + cap
            USING ERRCODE = '55000',
                  HINT = 'Is the registry''s clock behind the one it had before? The server claims the node id again above the fence, by itself.';
    END IF;
    new_until := greatest(cur.until_ms, p_held_until_ms,
                          least(greatest(p_holder_now_ms, cur.floor_ms) + p_grant_ms, now_ms + cap));
    UPDATE snowflake_registry.node_ids n SET until_ms = new_until,
        max_until_ms = greatest(n.max_until_ms, new_until), renewed_at = clock_timestamp(),
        renew_every_ms = greatest(p_grant_ms / 6, 100), released_at = NULL, last_call = coalesce(p_call, n.last_call)
    WHERE n.fleet = p_fleet AND n.node_id = p_node_id AND (p_call IS NULL OR n.last_call < p_call);
    IF NOT FOUND THEN
        PERFORM snowflake_registry.refuse_used_call(p_call, p_claim_id);
    END IF;
    -- (Not fenced: a retry whose first answer was lost, renewed.)
    UPDATE snowflake_registry.grants g SET until_ms = new_until, renewed_at = clock_timestamp(),
        ended_at = NULL, ended = NULL,
        resumed = g.resumed + CASE WHEN cur.released_at IS NULL THEN 0 ELSE 1 END,
        resumed_at = CASE WHEN cur.released_at IS NULL THEN g.resumed_at ELSE clock_timestamp() END
    WHERE g.claim_id = p_claim_id;
    RETURN new_until;
END
$$;

-- # The calls clients make
--
-- A server of this release makes a keyed claim and signs every later call;
-- servers of older releases use the plain token functions further down.
-- What an onlooker sees of a keyed claim's calls (pg_stat_activity on the
-- registry, its log at any log_statement or log_min_error_statement,
-- pg_stat_statements) proves nothing it can use again:
--   * claim_keyed() names the hash of a new random secret; its answer (and
--     only its answer, which no log or view shows) carries the claim's
--     signing key. A retry of a claim whose answer was lost reveals the
--     secret and names the hash of a new one: the registry answers the
--     retry only while the revealed secret's hash is still the claim's,
--     and then replaces it (claim_by_token()), so a revealed secret is
--     spent. (An onlooker
--     that wins that race in flight gets a claim whose holder never had
--     its answer, so issued nothing under it; the holder claims again.)
--   * renew_signed(), release_signed() and resume_signed() name a call
--     number higher than any the claim signed before, and a proof:
--     sha256(key || hex(sha256(the call's text))), the call's text being
--     its function, node id, claim, call number, arguments and fleet,
--     joined by '|' (signed_token()). A proof is accepted once; a wrong one
--     (or one already spent) takes no lock and changes nothing.

DROP FUNCTION IF EXISTS snowflake_registry.call_text(text, text, int, bigint, bigint, bigint[]);
DROP FUNCTION IF EXISTS snowflake_registry.call_proof(text, text);
DROP FUNCTION IF EXISTS snowflake_registry.signed_token(text, int, bigint, bigint, text, text);
DROP FUNCTION IF EXISTS snowflake_registry.signed_token(text, text, int, bigint, bigint, bigint[], text);

-- A signed call's number and proof, as given: refused (22023) if missing
-- or not 64 hex digits.
CREATE OR REPLACE FUNCTION snowflake_registry.check_signed(p_call bigint, p_proof text)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_call IS NULL OR p_proof IS NULL OR p_proof !~ '^[0-9a-f]{64}$' THEN
        RAISE EXCEPTION 'snowflake_registry: a signed call needs a call number and a proof (64 hex digits)'
            USING ERRCODE = '22023';
    END IF;
END
$$;

-- The token a signed call of claim p_claim_id is taken for, read without a
-- lock (a wrong proof takes none): the row's, when the proof holds over the
-- call's text (p_text_hash: sha256 of its function, node id, claim, call
-- number, arguments and fleet, joined by '|', the fleet last as the one
-- field that may hold one), else '-' (no token). A call number not above
-- the claim's last is refused (22023).
CREATE OR REPLACE FUNCTION snowflake_registry.signed_token(
    cur snowflake_registry.node_ids, p_claim_id bigint, p_call bigint, p_text_hash text, p_proof text)
RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF cur.claim_id IS DISTINCT FROM p_claim_id OR cur.signing_key IS NULL
       OR encode(sha256(convert_to(cur.signing_key || p_text_hash, 'UTF8')), 'hex') <> p_proof THEN
        RETURN '-';
    END IF;
    IF p_call <= cur.last_call THEN
        RAISE EXCEPTION 'snowflake_registry: call number % of claim % was used already (the last is %)',
            p_call, p_claim_id, cur.last_call
            USING ERRCODE = '22023',
                  HINT = 'A signed call is accepted once: its holder numbers each call above the last. A proof seen elsewhere and sent again is refused.';
    END IF;
    RETURN cur.token;
END
$$;

-- A keyed claim: as claim() (the same rules), but the caller names the
-- hash (sha256, hex) of a new random secret of its own instead of a
-- token, and the answer carries the claim's signing key (32 hex digits,
-- new with each answer).
-- A retry of claims whose answers were lost reveals their secrets in
-- p_previous_secrets (at most 16; and names a new hash): it gets the answer
-- and key of the one that was made, if it is live and none of them was
-- revealed before; else it is a new claim. (A request delayed past its
-- retry makes a claim of its own, which its sender never learns of: it
-- ends with its grant.) p_registry_id: the registry the caller last
-- claimed from; another registry refuses (55000) before anything else.
DROP FUNCTION IF EXISTS snowflake_registry.claim_keyed(text, bigint, int, int, int, int, text, text, numeric, text, int, text, bigint, bigint);
DROP FUNCTION IF EXISTS snowflake_registry.claim_keyed(text, bigint, int, int, int, int, text, text[], numeric, text, int, text, bigint, bigint);
CREATE OR REPLACE FUNCTION snowflake_registry.claim_keyed(
    p_fleet text, p_epoch_unix_ms bigint, p_node_bits int, p_sequence_bits int,
    p_node_id int, p_preferred int, p_secret_hash text, p_previous_secrets text[],
    p_system_identifier numeric, p_host text, p_port int, p_data_directory text,
    p_holder_now_ms bigint, p_grant_ms bigint, p_registry_id uuid DEFAULT NULL)
RETURNS TABLE (node_id int, claim_id bigint, floor_ms bigint, until_ms bigint, signing_key text)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_secret_hash IS NULL OR p_secret_hash !~ '^[0-9a-f]{64}$'
       OR cardinality(p_previous_secrets) > 16
       OR EXISTS (SELECT FROM unnest(p_previous_secrets) x WHERE x IS NULL OR length(x) NOT BETWEEN 16 AND 128) THEN
        RAISE EXCEPTION 'snowflake_registry: invalid claim arguments'
            USING ERRCODE = '22023',
                  HINT = 'The hash of the secret is sha256 as 64 hex digits; at most 16 previous secrets, of 16 to 128 characters each.';
    END IF;
    IF p_registry_id IS NOT NULL AND p_registry_id IS DISTINCT FROM (SELECT r.registry_id FROM snowflake_registry.rules r) THEN
        RAISE EXCEPTION 'this registry (id %) is not the one the caller last claimed from (id %)',
            (SELECT r.registry_id FROM snowflake_registry.rules r), p_registry_id
            USING ERRCODE = '55000',
                  DETAIL = 'Another registry knows none of the floors the caller''s claims rested on.',
                  HINT = 'A restore of the registry keeps its id; a new install at the address does not. If it replaces the old registry on purpose, run SELECT snowflake_registry.fence_after_restore(); on it, then forget the old id (the extension: remove snowflake_id.node from the data directory; the plain-SQL edition: SELECT setval(''snowflake_portable.registry_id_a'', 0), setval(''snowflake_portable.registry_id_b'', 0)).';
    END IF;
    RETURN QUERY SELECT * FROM snowflake_registry.claim_by_token(
        p_fleet, p_epoch_unix_ms, p_node_bits, p_sequence_bits, p_node_id, p_preferred,
        'keyed:' || p_secret_hash, p_system_identifier, p_host, p_port, p_data_directory,
        p_holder_now_ms, p_grant_ms, false,
        CASE WHEN p_previous_secrets IS NOT NULL
             THEN ARRAY(SELECT 'keyed:' || encode(sha256(convert_to(x, 'UTF8')), 'hex') FROM unnest(p_previous_secrets) x) END);
END
$$;

-- renew() for a keyed claim, signed: the text of ('renew', fleet, node id,
-- claim, call, holder_now_ms, grant_ms).
CREATE OR REPLACE FUNCTION snowflake_registry.renew_signed(
    p_fleet text, p_node_id int, p_claim_id bigint, p_call bigint,
    p_holder_now_ms bigint, p_grant_ms bigint, p_proof text)
RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    -- (A wrong proof is answered as a wrong token is: the claim is lost to
    -- the caller.)
    RETURN snowflake_registry.renew_by_token(p_fleet, p_node_id, p_claim_id, NULL, p_holder_now_ms, p_grant_ms,
                                             p_call, coalesce(p_proof, ''));
END
$$;

-- release() for a keyed claim, signed: the text of ('release', fleet, node
-- id, claim, call, issued_until_ms). A wrong proof changes nothing.
CREATE OR REPLACE FUNCTION snowflake_registry.release_signed(
    p_fleet text, p_node_id int, p_claim_id bigint, p_call bigint, p_issued_until_ms bigint, p_proof text)
RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM snowflake_registry.release_by_token(p_fleet, p_node_id, p_claim_id, NULL, p_issued_until_ms,
                                                p_call, coalesce(p_proof, ''));
END
$$;

-- resume() for a keyed claim, signed: the text of ('resume', fleet, node id,
-- claim, call, held_until_ms, holder_now_ms, grant_ms).
CREATE OR REPLACE FUNCTION snowflake_registry.resume_signed(
    p_fleet text, p_node_id int, p_claim_id bigint, p_call bigint,
    p_held_until_ms bigint, p_holder_now_ms bigint, p_grant_ms bigint, p_proof text)
RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN snowflake_registry.resume_by_token(p_fleet, p_node_id, p_claim_id, NULL, p_held_until_ms,
                                              p_holder_now_ms, p_grant_ms, p_call, coalesce(p_proof, ''));
END
$$;

-- Which registry answers: its id (rules.registry_id) and its cluster's
-- system identifier now. Servers ask it on each new connection.
CREATE OR REPLACE FUNCTION snowflake_registry.registry_identity(OUT registry_id uuid, OUT system_identifier numeric)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
SELECT r.registry_id, i.system_identifier FROM snowflake_registry.rules r, snowflake_registry.identity() i
$$;

-- The plain token functions, for servers of older releases (their claims
-- have no key): the token travels in every call, where an onlooker may
-- read it, so upgrade those servers. A keyed claim is never reached
-- through them.
CREATE OR REPLACE FUNCTION snowflake_registry.plain_token(p_token text)
RETURNS text
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_token LIKE 'keyed:%' THEN
        RAISE EXCEPTION 'snowflake_registry: a keyed claim is renewed, released and resumed only with signed calls'
            USING ERRCODE = '22023',
                  HINT = 'renew_signed(), release_signed(), resume_signed().';
    END IF;
    RETURN p_token;
END
$$;

CREATE OR REPLACE FUNCTION snowflake_registry.claim(
    p_fleet text, p_epoch_unix_ms bigint, p_node_bits int, p_sequence_bits int,
    p_node_id int, p_preferred int, p_token text,
    p_system_identifier numeric, p_host text, p_port int, p_data_directory text,
    p_holder_now_ms bigint, p_grant_ms bigint)
RETURNS TABLE (node_id int, claim_id bigint, floor_ms bigint, until_ms bigint)
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
SELECT c.node_id, c.claim_id, c.floor_ms, c.until_ms
FROM snowflake_registry.claim_by_token(p_fleet, p_epoch_unix_ms, p_node_bits, p_sequence_bits,
    p_node_id, p_preferred, snowflake_registry.plain_token(p_token), p_system_identifier, p_host, p_port,
    p_data_directory, p_holder_now_ms, p_grant_ms, true, NULL) c
$$;

CREATE OR REPLACE FUNCTION snowflake_registry.renew(
    p_fleet text, p_node_id int, p_claim_id bigint, p_token text, p_holder_now_ms bigint, p_grant_ms bigint)
RETURNS bigint
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
SELECT snowflake_registry.renew_by_token(p_fleet, p_node_id, p_claim_id, snowflake_registry.plain_token(p_token),
                                         p_holder_now_ms, p_grant_ms, NULL, NULL)
$$;

CREATE OR REPLACE FUNCTION snowflake_registry.release(
    p_fleet text, p_node_id int, p_claim_id bigint, p_token text, p_issued_until_ms bigint)
RETURNS void
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
SELECT snowflake_registry.release_by_token(p_fleet, p_node_id, p_claim_id, snowflake_registry.plain_token(p_token),
                                           p_issued_until_ms, NULL, NULL)
$$;

CREATE OR REPLACE FUNCTION snowflake_registry.resume(
    p_fleet text, p_node_id int, p_claim_id bigint, p_token text,
    p_held_until_ms bigint, p_holder_now_ms bigint, p_grant_ms bigint)
RETURNS bigint
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
SELECT snowflake_registry.resume_by_token(p_fleet, p_node_id, p_claim_id, snowflake_registry.plain_token(p_token),
                                          p_held_until_ms, p_holder_now_ms, p_grant_ms, NULL, NULL)
$$;

-- For the registry's owner: a new fleet (one ID space), with its epoch (ms
-- since 1970), layout and longest grant; servers name it in
-- snowflake_id.registry_fleet and must have its epoch and layout. Not
-- granted to the client role: a claim for a fleet that does not exist, or
-- with another epoch or layout, is refused, so neither a typo nor a client
-- can start or shape an ID space. Made again with the same values it does
-- nothing; a fleet no claim was made in yet (the install's "default") takes
-- new values; one with claims keeps its epoch and layout (55000). (Its
-- first claim starts at the registry's last fence.)
DROP FUNCTION IF EXISTS snowflake_registry.create_fleet(text);
CREATE OR REPLACE FUNCTION snowflake_registry.create_fleet(
    p_fleet text, p_epoch_unix_ms bigint DEFAULT 1735689600000, p_node_bits int DEFAULT 10,
    p_sequence_bits int DEFAULT 12, p_max_grant_ms bigint DEFAULT 60000)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    f snowflake_registry.fleets;
BEGIN
    IF p_fleet IS NULL OR p_fleet = '' OR length(p_fleet) > 63 THEN
        RAISE EXCEPTION 'snowflake_registry: a fleet name is 1 to 63 characters'
            USING ERRCODE = '22023';
    END IF;
    IF p_epoch_unix_ms IS NULL OR p_epoch_unix_ms NOT BETWEEN -4611686018427387903 AND 4611686018427387903
       OR p_node_bits IS NULL OR p_sequence_bits IS NULL OR p_node_bits < 0 OR p_sequence_bits < 0
       OR p_node_bits + p_sequence_bits > 28
       OR p_max_grant_ms IS NULL OR p_max_grant_ms NOT BETWEEN 1 AND 3600000 THEN
        RAISE EXCEPTION 'snowflake_registry: invalid fleet arguments'
            USING ERRCODE = '22023',
                  HINT = 'An epoch in ms since 1970, node and sequence bits of 0 to 28 together (at least 35 time bits), a longest grant of 1 ms to 1 hour.';
    END IF;
    PERFORM snowflake_registry.durable_commit();
    SELECT * INTO f FROM snowflake_registry.fleets g WHERE g.fleet = p_fleet FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        INSERT INTO snowflake_registry.fleets (fleet, epoch_unix_ms, node_bits, sequence_bits, max_grant_ms)
        VALUES (p_fleet, p_epoch_unix_ms, p_node_bits, p_sequence_bits, p_max_grant_ms);
        RETURN;
    END IF;
    IF (f.epoch_unix_ms, f.node_bits, f.sequence_bits, f.max_grant_ms)
       IS NOT DISTINCT FROM (p_epoch_unix_ms, p_node_bits, p_sequence_bits, p_max_grant_ms) THEN
        RAISE NOTICE 'snowflake_registry: fleet "%" exists already', p_fleet;
        RETURN;
    END IF;
    IF EXISTS (SELECT FROM snowflake_registry.node_ids n WHERE n.fleet = p_fleet) THEN
        RAISE EXCEPTION 'fleet "%" has claims, with epoch % ms and layout %/%/% (time/node/sequence bits) and max_grant_ms %',
            p_fleet, f.epoch_unix_ms, 63 - f.node_bits - f.sequence_bits, f.node_bits, f.sequence_bits, f.max_grant_ms
            USING ERRCODE = '55000',
                  HINT = 'Its IDs were made with its epoch and layout: another one is another fleet (another name). To change its longest grant: UPDATE snowflake_registry.fleets SET max_grant_ms = ... WHERE fleet = ...;';
    END IF;
    UPDATE snowflake_registry.fleets g SET epoch_unix_ms = p_epoch_unix_ms, node_bits = p_node_bits,
        sequence_bits = p_sequence_bits, max_grant_ms = p_max_grant_ms
    WHERE g.fleet = p_fleet;
END
$$;

-- For operators: every node id's holder and grant.
CREATE OR REPLACE VIEW snowflake_registry.holders AS
SELECT n.fleet, n.node_id, n.host, n.port, n.data_directory, n.system_identifier,
       CASE WHEN n.released_at IS NOT NULL AND EXISTS (SELECT FROM snowflake_registry.grants g
                                                      WHERE g.claim_id = n.claim_id AND g.ended = 'fenced') THEN 'fenced'
            WHEN n.released_at IS NOT NULL THEN 'released'
            WHEN n.until_ms < snowflake_registry.now_ms(f.epoch_unix_ms) THEN 'expired'
            WHEN n.renewed_at > clock_timestamp() - make_interval(secs => 3 * n.renew_every_ms / 1000.0) THEN 'held'
            ELSE 'stale' END AS state,
       to_timestamp((f.epoch_unix_ms + n.until_ms) / 1000.0) AS grant_until,
       to_timestamp((f.epoch_unix_ms + greatest(n.max_until_ms, f.fence_ms)) / 1000.0) AS next_floor,
       n.claimed_at, n.renewed_at, n.released_at
FROM snowflake_registry.node_ids n JOIN snowflake_registry.fleets f USING (fleet);

-- For operators: which server issued an ID of a fleet. The ID's node id
-- and time field (the fleet's layout and epoch) select the one grant of
-- that node id whose range (floor_ms, until_ms] holds the time: the grants
-- of one node id cover disjoint ranges (each new holder starts above every
-- earlier grant, and a holder never issues past its own), so there is at
-- most one, also for a holder that was paused and taken over, or a copy.
-- The answer is the server that was granted the ID's range: if the fleet
-- issued the ID, that server did (the registry does not know which IDs of
-- a range were really issued). No row: no grant of this registry covers
-- it (issued before the server used the registry, by a server outside it,
-- or not an ID of this fleet). Not granted to the client role; grant it to
-- a monitoring role if wanted.
CREATE OR REPLACE FUNCTION snowflake_registry.who_issued(p_fleet text, p_id bigint)
RETURNS TABLE (node_id int, id_time timestamptz, claim_id bigint, system_identifier numeric,
               host text, port int, data_directory text,
               granted_from timestamptz, granted_until timestamptz,
               claimed_at timestamptz, ended_at timestamptz, ended text)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    f snowflake_registry.fleets;
    id_ms bigint;
    id_node int;
BEGIN
    SELECT * INTO f FROM snowflake_registry.fleets WHERE fleets.fleet = p_fleet;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'snowflake_registry: no fleet "%"', p_fleet
            USING ERRCODE = '22023',
                  HINT = 'The fleets: SELECT fleet FROM snowflake_registry.fleets;';
    END IF;
    IF p_id < 0 THEN
        RAISE EXCEPTION 'snowflake_registry: % is not an ID (IDs are not negative)', p_id
            USING ERRCODE = '22023';
    END IF;
    id_ms := p_id >> (f.node_bits + f.sequence_bits);
    id_node := ((p_id >> f.sequence_bits) & ((1::bigint << f.node_bits) - 1))::int;
    RETURN QUERY
    SELECT g.node_id, to_timestamp((f.epoch_unix_ms + id_ms) / 1000.0), g.claim_id,
           g.system_identifier, g.host, g.port, g.data_directory,
           to_timestamp((f.epoch_unix_ms + g.floor_ms) / 1000.0),
           to_timestamp((f.epoch_unix_ms + g.until_ms) / 1000.0),
           g.claimed_at, g.ended_at, g.ended
    FROM snowflake_registry.grants g
    WHERE g.fleet = p_fleet AND g.node_id = id_node
      AND g.floor_ms < id_ms AND id_ms <= g.until_ms;
END
$$;

-- The registry's identity, recorded at install (and at an upgrade from a
-- script that recorded it only at the first claim): a backup taken from
-- now on carries it, so that a restore with recovery (a new timeline) is
-- noticed even when the backup predates every claim. (Moving a registry
-- with pg_dump: restore the whole dump into an empty database, which
-- brings the old identity along and so fences; or fence by hand.)
INSERT INTO snowflake_registry.incarnation (only_row, system_identifier, timeline, since)
SELECT true, i.system_identifier, i.timeline, clock_timestamp() FROM snowflake_registry.identity() i
ON CONFLICT DO NOTHING;

-- The fleet "default", with the extension's defaults (epoch 2025-01-01,
-- 10 node bits, 12 sequence bits, a minute's longest grant); an existing
-- one is kept. Before its first claim its owner may give it others:
-- SELECT snowflake_registry.create_fleet('default', <epoch ms>, <node bits>, <sequence bits>);
INSERT INTO snowflake_registry.fleets (fleet, epoch_unix_ms, node_bits, sequence_bits)
VALUES ('default', 1735689600000, 10, 12)
ON CONFLICT DO NOTHING;

REVOKE ALL ON ALL FUNCTIONS IN SCHEMA snowflake_registry FROM PUBLIC;
GRANT EXECUTE ON FUNCTION snowflake_registry.claim(text, bigint, int, int, int, int, text, numeric, text, int, text, bigint, bigint),
                          snowflake_registry.renew(text, int, bigint, text, bigint, bigint),
                          snowflake_registry.release(text, int, bigint, text, bigint),
                          snowflake_registry.resume(text, int, bigint, text, bigint, bigint, bigint),
                          snowflake_registry.claim_keyed(text, bigint, int, int, int, int, text, text[], numeric, text, int, text, bigint, bigint, uuid),
                          snowflake_registry.renew_signed(text, int, bigint, bigint, bigint, bigint, text),
                          snowflake_registry.release_signed(text, int, bigint, bigint, bigint, text),
                          snowflake_registry.resume_signed(text, int, bigint, bigint, bigint, bigint, bigint, text),
                          snowflake_registry.registry_identity()
    TO snowflake_registry_client;

COMMIT;
