# shellcheck shell=bash
# Shared by bench/run.sh and bench/profile.sh: the release build in a private
# copy of the PostgreSQL installation, the benchmark cluster and its schema.
#
#   . bench/lib.sh; bench_build OUTDIR
#   . tests/integration/lib.sh      # at the top level: it declares globals and traps
#   bench_cluster
#
# bench_build builds the extension with `cargo pgrx package` (release) for
# the server of $BENCH_PG_CONFIG and copies that server's installation into
# OUTDIR/pg/..., with the package on top (Debian's 15: /usr/lib/postgresql/15
# and /usr/share/postgresql/15; a server of scripts/postgres.sh: its whole
# directory). PostgreSQL finds its lib and share directories relative to its
# binaries, so a cluster started from that copy loads this build of
# snowflake_id, whatever is installed on the machine (and `cargo pgrx
# install` by someone else cannot replace the library under a running
# benchmark). It then exports PG_BIN for tests/integration/lib.sh.

BENCH=${BENCH:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}
ROOT=${ROOT:-$(cd "$BENCH/.." && pwd)}
# shellcheck source=../scripts/postgres.sh
. "$ROOT/scripts/postgres.sh"
# shellcheck source=../scripts/rust.sh
. "$ROOT/scripts/rust.sh"
BENCH_PG_CONFIG=${BENCH_PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}

# bench_build OUTDIR: set-up, build, private tree in OUTDIR/pg (each run its
# own, so runs never share one). Logs go to OUTDIR.
bench_build() {
  local out=$1 pkg="$1/package" tree="$1/pg" bindir
  bash "$ROOT/scripts/setup.sh" > "$out/setup.log" 2>&1 || { cat "$out/setup.log"; return 1; }
  echo "building snowflake_id (cargo pgrx package, release) for $("$BENCH_PG_CONFIG" --version)"
  (cd "$ROOT" && cargo pgrx package --pg-config "$BENCH_PG_CONFIG" --out-dir "$pkg") > "$out/build.log" 2>&1 ||
    { tail -30 "$out/build.log"; return 1; }
  rm -rf "$tree"
  bindir=$("$BENCH_PG_CONFIG" --bindir)
  copy_postgres_tree "$BENCH_PG_CONFIG" "$tree" || return 1
  cp -a "$pkg/." "$tree/"
  rm -rf "$pkg"
  chmod -R a+rX "$tree"
  export PG_BIN="$tree$bindir"
  [ "$("$PG_BIN/pg_config" --pkglibdir)" = "$tree$("$BENCH_PG_CONFIG" --pkglibdir)" ] ||
    { echo "the private PostgreSQL tree does not relocate" >&2; return 1; }
}

# bench_cluster: a throwaway cluster named `bench` (tests/integration/lib.sh:
# 127.0.0.1, its own port in $PORT, stopped when the script exits) with the
# generators and baselines installed. Settings: memory enough that a
# 10,000,000-row generate_series stays in memory, no autovacuum, JIT or
# parallel query to blur the figures, checkpoints only when the benchmark
# asks, a key of public IDs (version 1), and max_clock_drift = 60s so that snowflake_id is not throttled
# (bench/run.sh lowers it for the throttled run). fsync stays on: the WAL
# flushes that sequences cause are part of what is measured.
bench_cluster() {
  PORT=$(free_port)
  cluster_init bench "$PORT" \
    "snowflake_id.public_id_keys = 'public_id.keys'" \
    "snowflake_id.node_id = 1" \
    "snowflake_id.max_clock_drift = '60s'" \
    "shared_buffers = '2GB'" \
    "work_mem = '1GB'" \
    "max_wal_size = '16GB'" \
    "checkpoint_timeout = '1h'" \
    "autovacuum = off" \
    "jit = off" \
    "max_parallel_workers_per_gather = 0"
  # A key of public IDs (version 1), made for this cluster.
  public_keys_write "$(cluster_dir bench)/public_id.keys" "1 $(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')"
  cluster_start bench
  psql_on bench <<'SQL'
CREATE EXTENSION snowflake_id;
CREATE SEQUENCE seq_plain;               -- what bigserial creates
CREATE SEQUENCE seq_cache CACHE 100;
SQL
  bench_instagram_sql | psql_on bench
}

# bench_instagram_sql: Instagram's generator (2012), as published: 41 bits
# of ms since their epoch, 13 bits of shard id, 10 bits of nextval() % 1024;
# the function insta_next_id() and its sequence insta_seq.
bench_instagram_sql() {
  cat <<'SQL'
CREATE SEQUENCE insta_seq;
CREATE FUNCTION insta_next_id(OUT result bigint) AS $$
DECLARE
    our_epoch bigint := 1314220021721;
    seq_id bigint;
    now_millis bigint;
    shard_id int := 5;
BEGIN
    SELECT nextval('insta_seq') % 1024 INTO seq_id;
    SELECT FLOOR(EXTRACT(EPOCH FROM clock_timestamp()) * 1000) INTO now_millis;
    result := (now_millis - our_epoch) << 23;
    result := result | (shard_id << 10);
    result := result | (seq_id);
END;
$$ LANGUAGE plpgsql;
SQL
}

# gen_expr NAME: the SQL expression of a generator.
gen_expr() {
  case $1 in
    snowflake) echo "snowflake_next()" ;;
    bigserial) echo "nextval('seq_plain')" ;;
    cache100) echo "nextval('seq_cache')" ;;
    uuid) echo "gen_random_uuid()" ;;
    uuidv7) echo "uuidv7()" ;;
    instagram) echo "insta_next_id()" ;;
    select1) echo "1" ;;
  esac
}
