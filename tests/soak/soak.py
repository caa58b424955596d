#!/usr/bin/env python3
"""The fault soak: every promise of snowflake_id under random faults at once.

A fleet on 127.0.0.1, run as the postgres user (docs/reliability.md):

  reg, regs   the registry (registry/snowflake_registry.sql, the extension
              not even preloaded) and its synchronous streaming standby;
  n1 .. n4    servers that claim their node ids from it (fleet `soak`, 8
              node ids: 3 node bits),
              each on its own faked clock (libfaketime, one offset file each);
  f1, f1s     a server with a fixed node id (7) claimed from the same
              registry, and its streaming standby.

A writer per primary inserts rows whose ids come from snowflake_next(), on
one connection until it breaks, and records every ID a committed statement
returned: the client's view, what an application stored. A nemesis, driven
by one seed, starts faults at random intervals, several at once, each healed
after a random time: kill -9 of a server, of one of its workers, of the
registry; SIGSTOP/SIGCONT of the same; clock steps on one server; a failover
of the registry to its standby; the promotion of f1's standby while f1
still writes; a forward step of an hour on one server's clock, corrected
(no grant reaches that far: its calls fail, and once the clock is right
they issue again at once); the registry restored from an older base
backup (the claims and renewals made since are lost: the registry notices
its new timeline and fences); a crash-consistent copy of a running server started beside it
(a snapshot, or a base backup refused or accepted with
snowflake_accept_configuration()); a server whose registry role is
revoked; a server whose network path to the registry is cut (each server
reaches the registry through its own relay: RegistryPath); a restart with
snowflake_id.node_id set by mistake to a node id another server holds.
Without a registry also (the successor's floor, docs/successors.md): a
pg_upgrade of f1 (to the same major version: a new data directory without
the lease; a client took a batch ahead of the clock just before), its old
lease file copied as documented, or forgotten (held) and copied then; an
asynchronous failover of f1 (f1s cut off, its walsender stopped, while f1
commits rows and a client takes IDs without rows, a maximal batch ahead of
the clock among them; f1 killed, f1s promoted); an accepted copy of f1
while f1 ran a larger max_clock_drift (raised to 15, 20 or 30 s) and a
client took batches far ahead of its clock after the copy was taken, f1
killed for good, the copy on 5 s accepted. After each of these the loser
comes back as the winner's standby.

Checked during the run (every CHECK_EVERY_S seconds, over the IDs recorded
since, and the run stops at the first violation) and again at the end: no
ID recorded twice, nor inside a batch a client took without rows (every ID
of the batch's node id from its first to its last is the client's); no
insert refused because its table already held the ID
(a duplicate that one server issued twice: its primary key refuses it, so
the client never records it); the IDs on each connection increase in the
order they came. At the end only: every ID's node id and time lie in a
grant of the registry to the server that returned it (who_issued()); and
availability (outages()): every stretch in which a server committed
nothing, outside the faults on it, ends within the bound (BOUNDS_S) of the
fault healed last before it, or within BYSTANDER_BOUND_S if no fault's
bound reaches it. A violation prints the seed and the
fault schedule; the same --seed replays the same schedule (the faults'
order, targets and durations; the IDs differ).

  soak.py --seed 7 --seconds 180          a short run (the test suite's)
  soak.py --minutes 60                    a long run, random seed
  soak.py --no-registry ...               fixed node ids, no registry

Needs PG_BIN (a server with snowflake_id installed), libfaketime, root.
"""

import argparse
import collections
import json
import os
import random
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

FAKETIME_LIB = os.environ.get(
    "SF_FAKETIME_LIB", "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")
# Eight node ids (3 node bits): a fleet of five servers and its copies
# comes near a full pool, so that node ids pass from server to server (a
# crashed one's to a copy, a lapsed one's to the next claim) and the floors
# that keep their IDs apart are exercised, not only the untouched ids of a
# large pool.
NODE_BITS = 3
GRANT_MS = 3000
MAX_GRANT_MS = 8000
DRIFT_MS = 5000
FIXED_NODE = 7

# How long after a fault is healed each server it touched may go without
# issuing, in seconds, before the soak calls it a failure: the bounds of
# docs/registry-design.md and docs/operations.md for the settings above (grant 3 s,
# fleet bound 8 s, drift 5 s), plus the time a restart and a connection take.
BOUNDS_S = {
    "kill_server": 15.0,       # crash recovery, then a claim (or the wait of
                               # a fixed node id for its grant)
    "kill_worker": 15.0,       # the postmaster restarts every process
    "kill_registry": 10.0,     # grants outlast a short registry outage
    "stop_server": 15.0,
    "stop_worker": 15.0,
    "stop_registry": 10.0,
    "clock_step": 12.0,        # a step back waits out the step less the drift
    "crash_in_step": 15.0,     # the clock is right again at the heal: a restart
    "registry_failover": 15.0,  # the fence lies max_grant_ms past the failover
    "clock_forward": 12.0,     # no grant reaches an hour ahead: the calls fail
                               # until the heal, then issue at once
    "registry_restore": 20.0,  # as a failover, and a standby rebuilt after it
    "promote_standby": 15.0,
    "copy": 15.0,
    "revoke": 15.0,
    "partition": 15.0,         # as revoke: a claim that lapsed is made again
    "node_id_typo": 20.0,
    # The fixed server's takeovers without a registry: its successor starts
    # up to the drift limits and the clocks' offset ahead of the clock and
    # issues at once (docs/successors.md), so a restart's and a
    # connection's time.
    "async_failover": 15.0,
    "copy_drift": 15.0,
    "upgrade": 20.0,           # pg_upgrade ran inside the fault; the start after it
}

# Faults that only a server without a registry has: its successor's floor
# (docs/successors.md) is what keeps it above its predecessor's IDs; with a
# registry the claim's floor does (promote_standby, copy). And the upgrade:
# with a registry its client's IDs right before may be refused for a while
# as documented (the registry away or failing over, a claim waiting above
# its predecessor's grant), and the fault would not be injected; the
# registry's own pg_upgrade tests (tests/upgrade) cover upgrades with it.
NO_REGISTRY_ONLY = ("async_failover", "copy_drift", "upgrade")
# The faults on the fixed server and its standby that end with the other
# one issuing (both may stop meanwhile).
TAKEOVERS = ("promote_standby", "async_failover", "copy_drift", "upgrade")
# The largest batch a client takes at once (snowflake_next_batch_array):
# the bound of the drift limit (5 s) with 12 sequence bits, an array of
# 160 MB in its backend.
MAX_CLIENT_BATCH = 20_484_096


# How long a server that no fault touched may go without a commit: one
# server's fault must not stop another (a takeover, a registry that
# refuses the fleet, a machine-wide stall), while its own fault may.
BYSTANDER_BOUND_S = 5.0

# How many IDs the end's check gives to who_issued() itself (all of them
# go through its rule over the grants table: check_who_issued).
WHO_ISSUED_SAMPLE = 20000

# How often the live check looks at the IDs recorded since its last look.
CHECK_EVERY_S = 5.0
# The most connections one server's registry role may hold on the registry
# at once, seen by the live check: a server, its copy and a promoted standby
# share a role, each with one registry worker; connections a partition left
# hanging must be closed, not piled up until the registry refuses the fleet.
REGISTRY_CONNECTIONS_BOUND = 4
# A server's insert refused because its own table already held the ID:
# psql prints the key on the DETAIL line after the error.
DUPLICATE_KEY = re.compile(r"Key \(id\)=\((\d+)\) already exists")


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


class Violation(Exception):
    pass


class Cluster:
    """One PostgreSQL data directory, started and stopped as postgres."""

    def __init__(self, fleet, name, port):
        self.fleet = fleet
        self.name = name
        self.port = port
        self.dir = os.path.join(fleet.work, name)
        self.sock = self.dir + ".sock"
        self.log = os.path.join(fleet.work, name + ".log")
        self.clock_file = os.path.join(fleet.work, name + ".clock")
        self.faked = False
        with open(self.clock_file, "w") as f:
            f.write("+0\n")
        os.chmod(self.clock_file, 0o644)

    def as_pg(self, *args, env=None, check=True):
        cmd = ["sudo", "-u", "postgres", "env"] + [f"{k}={v}" for k, v in (env or {}).items()] + list(args)
        r = subprocess.run(cmd, cwd="/", stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if check and r.returncode != 0:
            raise Violation(f"{os.path.basename(args[0])} for {self.name} failed: {r.stderr.strip()[-300:]}")
        return r

    def conf(self, *lines):
        with open(os.path.join(self.dir, "postgresql.conf"), "a") as f:
            for line in lines:
                f.write(line + "\n")

    def prepare_dirs(self):
        os.makedirs(self.sock, exist_ok=True)
        shutil.chown(self.sock, "postgres", "postgres")

    def relocate(self, *conf):
        """A data directory copied from another server: its own socket
        directory and port (the last setting in the file wins)."""
        self.prepare_dirs()
        self.conf(f"port = {self.port}", f"unix_socket_directories = '{self.sock}'", *conf)

    def init(self, *conf, preload=True):
        self.as_pg(f"{self.fleet.bin}/initdb", "-D", self.dir, "-A", "trust", "-U", "postgres", "--no-sync")
        self.prepare_dirs()
        self.conf("listen_addresses = '127.0.0.1'", f"port = {self.port}",
                  f"unix_socket_directories = '{self.sock}'", "fsync = on", "max_connections = 60",
                  *((["shared_preload_libraries = 'snowflake_id'"]) if preload else []), *conf)

    def env(self):
        if not self.faked:
            return {}
        return {"LD_PRELOAD": FAKETIME_LIB, "FAKETIME_TIMESTAMP_FILE": self.clock_file,
                "FAKETIME_CACHE_DURATION": "0", "FAKETIME_DONT_FAKE_MONOTONIC": "1",
                "FAKETIME_DONT_RESET": "1"}

    def start(self, check=True):
        r = self.as_pg(f"{self.fleet.bin}/pg_ctl", "-D", self.dir, "-l", self.log, "-w", "-t", "60",
                       "start", env=self.env(), check=False)
        if check and r.returncode != 0:
            raise Violation(f"{self.name} did not start: {tail(self.log)}")
        return r.returncode == 0

    def stop(self, mode="fast"):
        if os.path.exists(os.path.join(self.dir, "postmaster.pid")):
            self.as_pg(f"{self.fleet.bin}/pg_ctl", "-D", self.dir, "-m", mode, "-w", "-t", "60", "stop",
                       check=False)

    def postmaster_pid(self):
        try:
            with open(os.path.join(self.dir, "postmaster.pid")) as f:
                return int(f.readline())
        except (OSError, ValueError):
            return None

    def pids(self):
        pm = self.postmaster_pid()
        if pm is None:
            return []
        out = subprocess.run(["pgrep", "-P", str(pm)], text=True, stdout=subprocess.PIPE).stdout
        return [pm] + [int(p) for p in out.split()]

    def worker_pid(self, kind):
        """The pid of this server's lease or registry worker, or None."""
        pm = self.postmaster_pid()
        if pm is None:
            return None
        out = subprocess.run(["pgrep", "-P", str(pm), "-a"], text=True, stdout=subprocess.PIPE).stdout
        for line in out.splitlines():
            pid, _, cmd = line.partition(" ")
            if f"snowflake_id {kind}" in cmd:
                return int(pid)
        return None

    def kill9(self):
        pm = self.postmaster_pid()
        self.signal_all(signal.SIGKILL)
        for _ in range(100):
            if pm is None or not alive(pm):
                break
            time.sleep(0.05)
        time.sleep(0.3)

    def signal_all(self, sig):
        # The children first: the postmaster does not see them change.
        for pid in reversed(self.pids()):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass

    def psql(self, sql, user="postgres", check=True, timeout=60):
        try:
            r = subprocess.run(["psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1",
                                "-p", str(self.port), "-U", user, "-d", "postgres", "-c", sql],
                               text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout,
                               env=dict(os.environ, PGCONNECT_TIMEOUT="3"))
        except subprocess.TimeoutExpired:
            if check:
                raise Violation(f"psql on {self.name} took over {timeout} s: {sql[:80]}")
            return None
        if check and r.returncode != 0:
            raise Violation(f"psql on {self.name} failed: {sql[:80]}: {r.stderr.strip()}")
        return r.stdout.strip() if r.returncode == 0 else None

    def set_clock(self, offset_s):
        with open(self.clock_file + ".tmp", "w") as f:
            f.write(f"{offset_s:+d}\n")
        os.chmod(self.clock_file + ".tmp", 0o644)
        os.replace(self.clock_file + ".tmp", self.clock_file)


def recorded_drift_limit_ms(cluster):
    """The drift limit the cluster's lease file records (0: none)."""
    try:
        with open(os.path.join(cluster.dir, "snowflake_id.lease")) as f:
            m = re.search(r"^drift_limit_ms = (\d+)$", f.read(), re.M)
    except OSError:
        return 0
    return int(m.group(1)) if m else 0


def alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


def tail(path, n=8):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return "(no log)"


class RegistryPath:
    """One server's network path to the registry: a TCP relay on 127.0.0.1
    per registry server, that `partition` cuts. A cut relays nothing in
    either direction and leaves every connection open, new ones included
    (accepted, never connected through): packets lost on a partitioned
    network, not a refusal. At the heal the bytes held back flow again, as
    TCP's retransmissions would deliver them."""

    def __init__(self, fleet, targets):
        self.open = threading.Event()
        self.open.set()
        self.ports = []
        for target in targets:
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            port = fleet.port()
            listener.bind(("127.0.0.1", port))
            listener.listen(16)
            self.ports.append(port)
            threading.Thread(target=self.accept, args=(listener, target), daemon=True).start()

    def accept(self, listener, target):
        while True:
            try:
                client, _ = listener.accept()
                threading.Thread(target=self.relay, args=(client, target), daemon=True).start()
            except (OSError, RuntimeError) as e:
                # A relay that stopped accepting would cut its server off
                # for good, an outage with no fault to explain it.
                log(f"relay to {target.name} on {listener.getsockname()[1]}: {e!r}; accepting again")
                time.sleep(0.1)

    def relay(self, client, target):
        self.open.wait()
        try:
            upstream = socket.create_connection(("127.0.0.1", target.port), timeout=5)
            upstream.settimeout(None)
        except OSError:
            client.close()
            return
        ends = {client: upstream, upstream: client}
        try:
            while True:
                ready, _, _ = select.select(list(ends), [], [], 0.2)
                if not self.open.is_set():
                    self.open.wait()
                    continue
                for sock in ready:
                    data = sock.recv(65536)
                    if not data:
                        return
                    ends[sock].sendall(data)
        except OSError:
            pass
        finally:
            client.close()
            upstream.close()


class Writer(threading.Thread):
    """Inserts on one server, one connection until it breaks; records every ID
    a committed statement returned, with the connection and the order."""

    ROWS = 10

    def __init__(self, fleet, cluster):
        super().__init__(daemon=True)
        self.fleet = fleet
        self.cluster = cluster
        self.stopped = threading.Event()
        self.started_at = time.monotonic()
        self.ok_times = []         # monotonic time of each committed statement
        self.retired_at = None     # when the soak stopped it (the server left the fleet)
        self.errors = collections.Counter()
        # The latest errors with their times, to say why a server waited.
        self.error_times = collections.deque(maxlen=5000)

    def run(self):
        while not self.stopped.is_set():
            conn = self.fleet.new_connection()
            proc = subprocess.Popen(
                ["psql", "-X", "-q", "-At", "-h", "127.0.0.1", "-p", str(self.cluster.port), "-U", "postgres",
                 "-d", "postgres", "-v", "ON_ERROR_STOP=0"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1)
            err_reader = threading.Thread(target=self.read_errors, args=(proc,), daemon=True)
            err_reader.start()
            try:
                while not self.stopped.is_set():
                    proc.stdin.write(f"INSERT INTO t (server) SELECT '{self.cluster.name}' "
                                     f"FROM generate_series(1, {self.ROWS}) RETURNING id;\n\\echo @@\n")
                    proc.stdin.flush()
                    ids = []
                    while True:
                        line = proc.stdout.readline()
                        if not line:
                            raise EOFError
                        line = line.strip()
                        if line == "@@":
                            break
                        if line.isdigit():
                            ids.append(int(line))
                    if ids:
                        self.fleet.record(self.cluster.name, conn, ids)
                        self.ok_times.append(time.monotonic())
                    else:
                        time.sleep(0.05)
                    time.sleep(0.01)
            except (EOFError, BrokenPipeError, OSError):
                pass
            finally:
                try:
                    proc.kill()
                except OSError:
                    pass
                proc.wait()
            time.sleep(0.2)

    def read_errors(self, proc):
        for line in proc.stderr:
            line = line.strip()
            duplicate = DUPLICATE_KEY.search(line)
            if duplicate:
                self.fleet.refused_duplicate(self.cluster.name, int(duplicate.group(1)))
            if line.startswith("psql:") or line.startswith("ERROR") or "error" in line:
                message = line.split("ERROR:")[-1].strip()
                self.errors[message[:70]] += 1
                self.error_times.append((time.monotonic(), message[:400]))

    def errors_between(self, a, b, n=3):
        """The first n distinct errors this writer saw from a to b, as one
        line (what a violation prints)."""
        seen = []
        for t, e in self.error_times:
            if a <= t <= b and e not in seen:
                seen.append(e)
                if len(seen) == n:
                    break
        return "; ".join(seen) or "no error seen"


class Fleet:
    def __init__(self, args):
        self.args = args
        self.bin = os.environ.get("PG_BIN", "/usr/lib/postgresql/15/bin")
        self.work = tempfile.mkdtemp(prefix="snowflake_soak.")
        os.chmod(self.work, 0o755)
        shutil.chown(self.work, "postgres", "postgres")
        self.clusters = {}
        self.writers = {}          # server -> its writer now
        self.all_writers = []      # every writer, retired ones included
        self.lock = threading.Lock()
        self.ids = []              # (id, server, connection, order)
        # Batches a client took and kept without rows: (lowest, highest,
        # server). A batch is consecutive IDs: every ID of its node id from
        # the lowest to the highest is the client's.
        self.ranges = []
        self.node_bits, self.sequence_bits = NODE_BITS, 12
        self.duplicates = []       # (id, server): inserts its primary key refused
        self.connections = 0
        self.registry_name = "reg"
        self.standby_name = "regs"
        # The server with the fixed node id and its standby (swapped by a
        # failover without a registry).
        self.fixed_name = "f1"
        self.fixed_standby_name = "f1s"
        self.next_port = 0
        self.copies = 0
        self.roles = {}
        self.paths = {}            # server -> its RegistryPath (partition cuts it)
        # The grants of the history a registry_restore lost: (node id,
        # floor, until, port), for the end's check.
        self.lost_grants = []
        self.registry_backup = None
        # The roles a revoke fault holds revoked now: a registry restored
        # from a backup taken during one gives the others their grant back.
        self.revoked = set()

    def port(self):
        """A TCP port of 127.0.0.1 that nothing listens on now."""
        base = 20000 + (os.getpid() % 200) * 50
        while True:
            self.next_port += 1
            port = base + self.next_port % 1000
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
                if probe.connect_ex(("127.0.0.1", port)) != 0:
                    return port

    def new_connection(self):
        with self.lock:
            self.connections += 1
            return self.connections

    def record(self, server, conn, ids):
        with self.lock:
            for i, v in enumerate(ids):
                self.ids.append((v, server, conn, i))

    def record_range(self, server, low, high):
        with self.lock:
            self.ranges.append((low, high, server))

    def node_of(self, v):
        return (v >> self.sequence_bits) & ((1 << self.node_bits) - 1)

    def client_ids(self, c, singles=100, batches=1, batch=None):
        """A client of c takes IDs and keeps them without a row (an
        application that numbers something elsewhere): `singles` calls of
        snowflake_next(), then `batches` batches (each as large as the
        drift limit allows, MAX_CLIENT_BATCH at most), which run the
        generator ahead of the clock. All recorded as that client's, on a
        connection of their own; returns (the highest ID, how far ahead of
        c's clock it lies in ms)."""
        conn = self.new_connection()
        high = None
        if singles:
            out = c.psql(f"SELECT snowflake_next() FROM generate_series(1, {singles})")
            ids = [int(v) for v in out.split()]
            self.record(c.name, conn, ids)
            high = ids[-1]
        n = batch or min(MAX_CLIENT_BATCH, (DRIFT_MS + 1) << self.sequence_bits)
        for _ in range(batches):
            out = c.psql(f"SELECT a[1] || ' ' || a[cardinality(a)] FROM "
                         f"(SELECT snowflake_next_batch_array({n}) a) b", timeout=120)
            low, high = map(int, out.split())
            self.record_range(c.name, low, high)
        ahead = c.psql(f"SELECT round(extract(epoch FROM snowflake_timestamp({high}) - clock_timestamp()) * 1000)::bigint")
        return high, int(ahead)

    def refused_duplicate(self, server, v):
        with self.lock:
            self.duplicates.append((v, server))

    def new(self, name):
        c = Cluster(self, name, self.port())
        self.clusters[name] = c
        return c

    def registry(self):
        return self.clusters[self.registry_name]

    def registry_psql(self, sql, seconds=90):
        """SQL on the registry's primary, whichever it is, retried while the
        registry is away (another fault may have stopped or failed it over)."""
        deadline = time.monotonic() + seconds
        while True:
            out = self.registry().psql(sql, check=False)
            if out is not None:
                return out
            if time.monotonic() > deadline:
                raise Violation(f"the registry did not answer within {seconds} s: {sql[:80]}")
            time.sleep(0.5)

    def registry_conf(self, server):
        """The settings of a server that claims from the registry, with
        its own role (so that one server can be cut off)."""
        if self.args.no_registry:
            return []
        path = self.paths[server] = RegistryPath(self, [self.clusters["reg"], self.clusters["regs"]])
        conninfo = (f"host=127.0.0.1,127.0.0.1 port={path.ports[0]},{path.ports[1]} dbname=postgres "
                    f"user={self.roles[server]} target_session_attrs=read-write")
        # (Over TCP, through the path's proxies, which the faults cut:
        # unverified, so allowed by name.)
        return [f"snowflake_id.registry = '{conninfo}'", "snowflake_id.registry_fleet = 'soak'",
                f"snowflake_id.registry_grant = '{GRANT_MS}ms'", "snowflake_id.registry_allow_unverified = on"]

    # --- set-up
    def build(self):
        path = os.environ.get("PATH", "")
        os.environ["PATH"] = f"{self.bin}:{path}"
        registry_sql = os.environ.get("SF_REGISTRY_SQL",
                                      os.path.join(os.path.dirname(__file__), "..", "..", "registry",
                                                   "snowflake_registry.sql"))
        fleet_servers = ["n1", "n2", "n3", "n4"]
        if not self.args.no_registry:
            reg = self.new("reg")
            reg.init("wal_level = replica", "max_wal_senders = 10", preload=False)
            reg.start()
            subprocess.run(["psql", "-X", "-q", "-h", "127.0.0.1", "-p", str(reg.port), "-U", "postgres",
                            "-d", "postgres", "-v", "ON_ERROR_STOP=1", "-f", registry_sql],
                           check=True, stdout=subprocess.DEVNULL)
            reg.psql(f"SELECT snowflake_registry.create_fleet('soak', 1735689600000, {NODE_BITS}, 12, {MAX_GRANT_MS})")
            for s in fleet_servers + ["f1"]:
                role = f"node_{s}"
                reg.psql(f"CREATE ROLE {role} LOGIN; GRANT snowflake_registry_client TO {role}")
                self.roles[s] = role
            self.basebackup("regs", "reg", ["wal_level = replica"])
            open(os.path.join(self.clusters["regs"].dir, "standby.signal"), "w").close()
            self.clusters["regs"].start()
            reg.conf("synchronous_standby_names = '*'")
            reg.psql("SELECT pg_reload_conf()")
        layout = [f"snowflake_id.max_clock_drift = '{DRIFT_MS}ms'", f"snowflake_id.node_bits = {NODE_BITS}"]
        for i, s in enumerate(fleet_servers):
            node = [f"snowflake_id.node_id = {i + 1}"] if self.args.no_registry else []
            self.new(s).init(*layout, *node, *self.registry_conf(s))
        self.new("f1").init(*layout, f"snowflake_id.node_id = {FIXED_NODE}", *self.registry_conf("f1"),
                            "wal_level = replica", "max_wal_senders = 10")
        for s in fleet_servers + ["f1"]:
            self.clusters[s].faked = True
            self.clusters[s].start()
        for s in fleet_servers + ["f1"]:
            c = self.clusters[s]
            c.psql("CREATE EXTENSION snowflake_id; "
                   "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake_next(), server text)")
        self.basebackup("f1s", "f1").start()
        for s in fleet_servers + ["f1"]:
            self.wait_issuing(s, 30)
        bits = self.clusters["f1"].psql("SELECT node_bits || ' ' || sequence_bits FROM snowflake_stats()")
        self.node_bits, self.sequence_bits = map(int, bits.split())
        if not self.args.no_registry:
            # The backup a registry_restore fault restores (the fleet has
            # claimed: the claims made after it are what a restore loses).
            self.backup_registry()
        for s in fleet_servers + ["f1"]:
            self.start_writer(s)

    def rebuild_registry_standby(self, standby, primary):
        """standby made anew from a base backup of primary, started, and
        made primary's synchronous standby again."""
        shutil.rmtree(standby.dir)
        self.basebackup(standby.name, primary.name)
        open(os.path.join(standby.dir, "standby.signal"), "w").close()
        standby.start()
        primary.conf("synchronous_standby_names = '*'")
        primary.psql("SELECT pg_reload_conf()")

    def backup_registry(self):
        """A base backup of the registry's primary, kept as a directory for
        the next registry_restore fault."""
        path = os.path.join(self.work, "registry.backup")
        self.pg_basebackup(self.registry(), path, standby=False)
        self.registry_backup = path

    def basebackup(self, name, source, conf=(), standby=True):
        c = self.new(name) if name not in self.clusters else self.clusters[name]
        src = self.clusters[source]
        self.pg_basebackup(src, c.dir, standby)
        c.relocate(*conf)
        c.faked = src.faked
        return c

    def pg_basebackup(self, src, path, standby):
        """A base backup of src into path (with -R: a standby's settings).
        It fails now and then while other faults hit the source (a pause, a
        clock step, a full set of WAL senders): tried again, as an
        operator's script would."""
        for attempt in range(5):
            if os.path.exists(path):
                shutil.rmtree(path)
            try:
                src.as_pg(f"{self.bin}/pg_basebackup", "-h", "127.0.0.1", "-p", str(src.port), "-U", "postgres",
                          "-D", path, *(["-R"] if standby else []), "-X", "stream", "-c", "fast", "--no-sync")
                return
            except Violation as e:
                if attempt == 4:
                    raise
                log(f"base backup of {src.name} into {os.path.basename(path)} failed, again in 2 s: {e}")
                time.sleep(2)

    def wait_issuing(self, name, seconds):
        c = self.clusters[name]
        deadline = time.monotonic() + seconds
        last = ""
        while time.monotonic() < deadline:
            r = subprocess.run(["psql", "-X", "-At", "-h", "127.0.0.1", "-p", str(c.port), "-U", "postgres",
                                "-d", "postgres", "-c", "SELECT snowflake_next()"],
                               text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            if r.returncode == 0:
                return
            last = r.stderr.strip()
            time.sleep(0.2)
        raise Violation(f"{name} did not issue within {seconds} s: {last}")

    def start_writer(self, name):
        w = Writer(self, self.clusters[name])
        self.writers[name] = w
        self.all_writers.append(w)
        w.start()

    def stop_writer(self, name):
        w = self.writers.get(name)
        if w:
            w.retired_at = time.monotonic()
            w.stopped.set()

    def teardown(self):
        for w in self.writers.values():
            w.stopped.set()
        for c in self.clusters.values():
            c.signal_all(signal.SIGCONT)
            c.stop("immediate")
        if not self.args.keep:
            shutil.rmtree(self.work, ignore_errors=True)
        else:
            log(f"kept {self.work}")


class Nemesis:
    """Faults from one seed: the schedule (kind, target, start, duration) is
    drawn up front, so that a seed always gives the same one."""

    def __init__(self, fleet, seed, seconds, kinds):
        self.fleet = fleet
        self.rng = random.Random(seed)
        self.seconds = seconds
        self.kinds = kinds
        self.schedule = self.draw()
        self.done = []             # (kind, target, heal_time, touched servers)
        self.busy = set()
        self.busy_lock = threading.Lock()

    def draw(self):
        rng, t, schedule = self.rng, 2.0, []
        # Every kind once, in a random order, then random kinds.
        first = list(self.kinds)
        rng.shuffle(first)
        while t < self.seconds - 20:
            kind = first.pop() if first else rng.choice(self.kinds)
            target = self.pick_target(kind)
            # Often the server the last fault hit: faults meet on one
            # server (a crash during a clock step) only when drawn so.
            if schedule and rng.random() < 0.4 and schedule[-1]["target"] not in ("registry", target) \
                    and target not in ("registry",) and kind not in ("node_id_typo", "copy", *TAKEOVERS):
                target = schedule[-1]["target"]
            duration = round(rng.uniform(0.3, 2.5 * GRANT_MS / 1000), 1)
            if kind in ("clock_step", "crash_in_step", "clock_forward"):
                duration = round(rng.uniform(2, 10), 1)
            elif kind in ("kill_server", "kill_registry"):
                # A supervisor (systemd, Patroni) starts a crashed server
                # again within seconds.
                duration = round(rng.uniform(0.2, 2.0), 1)
            schedule.append({"at": round(t, 1), "kind": kind, "target": target, "duration": duration,
                             "detail": rng.choice([-8, -3, -1, 2, 6]) if kind == "clock_step"
                             else rng.choice([-8, -5, -3]) if kind == "crash_in_step"
                             else rng.choice(["snapshot", "backup", "backup-accepted"])
                             if kind == "copy" and not self.fleet.args.no_registry
                             else "backup" if kind == "copy"
                             else rng.choice([15, 20, 30]) if kind == "copy_drift"
                             else rng.choice(["lease-copied", "lease-forgotten"]) if kind == "upgrade"
                             else rng.choice(["lease", "registry"]) if kind.endswith("_worker") else None})
            t += rng.uniform(1.0, 6.0)
        return schedule

    def pick_target(self, kind):
        servers = ["n1", "n2", "n3", "n4", "fixed"]
        if kind in ("kill_registry", "stop_registry", "registry_failover", "registry_restore"):
            return "registry"
        if kind in TAKEOVERS:
            return "fixed"
        if kind in ("node_id_typo", "copy"):
            return self.rng.choice(servers[:4])
        return self.rng.choice(servers)

    def run(self, live):
        """Injects the schedule; stops injecting at the first violation the
        live check sees (the faults under way are still healed)."""
        start = self.started = time.monotonic()
        threads = []

        def wait_until(when):
            while not live.problems and time.monotonic() < when:
                time.sleep(min(0.5, max(0.0, when - time.monotonic())))
            return not live.problems

        for fault in self.schedule:
            if not wait_until(start + fault["at"]):
                break
            th = threading.Thread(target=self.inject, args=(fault,), daemon=True)
            th.start()
            threads.append(th)
        for th in threads:
            th.join(timeout=180)
        wait_until(start + self.seconds)

    def inject(self, fault):
        kind, target = fault["kind"], fault["target"]
        # One fault at a time on a target (others may hit the fleet at
        # once), but a clock step on a server runs beside its other faults:
        # a crash or a pause across a step is where the two meet. A fault
        # whose target is busy waits for it.
        # A crash inside a step restarts the server: one at a time with the
        # server's other restarts (the long run saw two starts race).
        key = (target, kind == "clock_step")
        while True:
            with self.busy_lock:
                if key not in self.busy:
                    self.busy.add(key)
                    break
            time.sleep(0.2)
        with self.busy_lock:
            fault["name"] = self.fleet.fixed_name if target == "fixed" else target
        try:
            log(f"fault {kind} on {target} for {fault['duration']} s ({fault['detail']})")
            fault["started"] = time.monotonic()
            # Whom it may stop, besides those it returns: both servers of
            # a promotion (the loser leaves the fleet).
            fault["affects"] = [self.fleet.fixed_name, self.fleet.fixed_standby_name] \
                if kind in TAKEOVERS else []
            touched = getattr(self, kind)(fault)
            # The writers of the servers it touched, as they are at the heal
            # (a server's writer is replaced when it leaves and comes back).
            writers = [(name, self.fleet.writers.get(name)) for name in touched]
            self.done.append((kind, target, time.monotonic(), writers, fault))
        except Exception as e:  # a fault that could not be injected or healed fails the soak
            fault["error"] = repr(e)
            fault["failed_at"] = time.monotonic()
            log(f"fault {kind} on {target} could not be injected: {e!r}")
        finally:
            with self.busy_lock:
                self.busy.discard(key)

    # --- the faults; each heals itself and returns the servers it touched
    def all_servers(self):
        return ["n1", "n2", "n3", "n4", self.fleet.fixed_name]

    def kill_server(self, f):
        c = self.fleet.clusters[f["name"]]
        c.kill9()
        time.sleep(f["duration"])
        c.start()
        return [f["name"]]

    def signal_worker(self, f, sig, heal_sig):
        """Sends sig to the server's lease or registry worker alone, and
        heal_sig (if any) after the fault's duration."""
        c = self.fleet.clusters[f["name"]]
        pid = c.worker_pid(f["detail"]) or c.worker_pid("lease")
        # A worker may exit between the lookup and the signal (the registry
        # worker leaves after a fence and the postmaster starts it again):
        # then there is nothing to stop or to wake.
        try:
            if pid:
                os.kill(pid, sig)
        except ProcessLookupError:
            log(f"{f['name']}'s {f['detail']} worker {pid} had exited: nothing to signal")
            pid = None
        time.sleep(f["duration"])
        try:
            if pid and heal_sig:
                os.kill(pid, heal_sig)
        except ProcessLookupError:
            pass
        return [f["name"]]

    def kill_worker(self, f):
        return self.signal_worker(f, signal.SIGKILL, None)

    def stop_server(self, f):
        c = self.fleet.clusters[f["name"]]
        c.signal_all(signal.SIGSTOP)
        time.sleep(f["duration"])
        c.signal_all(signal.SIGCONT)
        return [f["name"]]

    def stop_worker(self, f):
        return self.signal_worker(f, signal.SIGSTOP, signal.SIGCONT)

    def kill_registry(self, f):
        r = self.fleet.registry()
        r.kill9()
        time.sleep(f["duration"])
        r.start()
        return self.all_servers()

    def stop_registry(self, f):
        r = self.fleet.registry()
        r.signal_all(signal.SIGSTOP)
        time.sleep(f["duration"])
        r.signal_all(signal.SIGCONT)
        return self.all_servers()

    def clock_step(self, f):
        c = self.fleet.clusters[f["name"]]
        c.set_clock(f["detail"])
        time.sleep(f["duration"])
        c.set_clock(0)
        return [f["name"]]

    def clock_forward(self, f):
        """The clock an hour ahead (a bad NTP step; a VM resumed and not yet
        set right), then corrected. No grant reaches that far (the registry
        grants at most max_grant_ms past its own clock), so the server's
        calls fail meanwhile; a call that issued nothing must leave nothing
        behind, so that the corrected clock finds the generator where it
        was."""
        c = self.fleet.clusters[f["name"]]
        c.set_clock(3600)
        time.sleep(f["duration"])
        c.set_clock(0)
        return [f["name"]]

    def registry_restore(self, f):
        """The registry's primary lost and restored from the base backup
        taken at the start (or at the last restore), with recovery: a new
        timeline, which the registry notices at the first call and fences
        (the claims and renewals made since the backup are lost). Its
        standby is rebuilt from it after the fault's duration."""
        fl = self.fleet
        primary, standby = fl.clusters[fl.registry_name], fl.clusters[fl.standby_name]
        primary.kill9()
        # The grants the restore loses, for the end's check that every ID
        # lies in a grant to its server: the synchronous standby has every
        # commit the fleet was told of, once it has replayed what it has.
        deadline = time.monotonic() + 30
        while standby.psql("SELECT pg_last_wal_receive_lsn() IS NOT DISTINCT FROM pg_last_wal_replay_lsn()",
                           check=False) != "t":
            if time.monotonic() > deadline:
                raise Violation(f"the registry's standby did not replay its WAL: {tail(standby.log)}")
            time.sleep(0.1)
        rows = standby.psql("SELECT node_id, floor_ms, until_ms, coalesce(port, 0) "
                            "FROM snowflake_registry.grants WHERE fleet = 'soak'")
        fl.lost_grants.extend(tuple(map(int, line.split("|"))) for line in rows.split())
        standby.kill9()
        shutil.rmtree(primary.dir)
        subprocess.run(["cp", "-a", fl.registry_backup, primary.dir], check=True)
        open(os.path.join(primary.dir, "recovery.signal"), "w").close()
        shutil.chown(os.path.join(primary.dir, "recovery.signal"), "postgres", "postgres")
        primary.relocate("restore_command = 'false'", "synchronous_standby_names = ''")
        primary.start()
        deadline = time.monotonic() + 60
        while primary.psql("SELECT pg_is_in_recovery()", check=False) != "f":
            if time.monotonic() > deadline:
                raise Violation(f"the restored registry did not end its recovery: {tail(primary.log)}")
            time.sleep(0.2)
        # A backup taken while a revoke fault ran holds that revoke, which
        # no fault undoes any more: grant every role that no revoke holds now.
        for role in set(fl.roles.values()) - fl.revoked:
            primary.psql(f"GRANT snowflake_registry_client TO {role}")
        time.sleep(f["duration"])
        fl.rebuild_registry_standby(standby, primary)
        fl.backup_registry()
        return self.all_servers()

    def crash_in_step(self, f):
        """A crash while the clock is stepped back, and a restart inside
        the step (the clock a few seconds behind the last IDs issued):
        where a restart that forgot its lease would issue them again. The
        clock is right again at the heal."""
        c = self.fleet.clusters[f["name"]]
        c.set_clock(f["detail"])
        c.kill9()
        time.sleep(0.5)
        c.start()
        time.sleep(f["duration"])
        c.set_clock(0)
        return [f["name"]]

    def registry_failover(self, f):
        fl = self.fleet
        old, new = fl.clusters[fl.registry_name], fl.clusters[fl.standby_name]
        old.kill9()
        new.as_pg(f"{fl.bin}/pg_ctl", "-D", new.dir, "-w", "-t", "60", "promote")
        new.conf("synchronous_standby_names = ''")
        new.psql("SELECT pg_reload_conf()")
        time.sleep(f["duration"])
        # The old primary comes back as the new one's synchronous standby.
        fl.rebuild_registry_standby(old, new)
        fl.registry_name, fl.standby_name = new.name, old.name
        return self.all_servers()

    def fixed_pair(self):
        """The fixed server and its standby, streaming from it."""
        fl = self.fleet
        primary, standby = fl.clusters[fl.fixed_name], fl.clusters[fl.fixed_standby_name]
        if standby.psql("SELECT pg_is_in_recovery()", check=False) != "t":
            # The last takeover could not rebuild its loser as the
            # standby: rebuild it now, or this fault would promote nothing.
            log(f"{standby.name} is no standby of {primary.name}: rebuilt first")
            standby.stop("immediate")
            fl.basebackup(standby.name, primary.name).start()
        return primary, standby

    def streaming(self, primary, standby, seconds=30):
        """Waits until standby streams from primary and has replayed what
        primary had written when asked; returns the walsender's pid."""
        lsn = primary.psql("SELECT pg_current_wal_lsn()")
        deadline = time.monotonic() + seconds
        while True:
            pid = primary.psql("SELECT pid FROM pg_stat_replication WHERE state = 'streaming'", check=False)
            if pid and standby.psql(f"SELECT pg_last_wal_replay_lsn() >= '{lsn}'", check=False) == "t":
                return int(pid.split()[0])
            if time.monotonic() > deadline:
                raise Violation(f"{standby.name} does not stream from {primary.name}: {tail(standby.log)}")
            time.sleep(0.2)

    def took_over(self, f, c, above):
        """The successor c's floor (snowflake_stats()) and its first ID,
        which must lie above `above`, the highest ID its predecessor handed
        a client; noted in the fault's detail for the log and the schedule."""
        # (The first ID first: the first call after recovery applies the
        # floor, and snowflake_stats() shows it from then on.)
        first = c.psql("SELECT snowflake_next()")
        ahead = c.psql("SELECT coalesce(successor_ahead_ms::text, 'none') FROM snowflake_stats()")
        f["detail"] = f"{f['detail']}; successor {c.name} started {ahead} ms ahead, first ID {first}"
        log(f"{f['kind']}: {c.name} took over: floor {ahead} ms ahead of its clock, first ID {first}, "
            f"{'above' if int(first) > above else 'NOT above'} the predecessor's client's {above}")
        if int(first) <= above:
            raise Violation(f"{f['kind']}: {c.name}'s first ID {first} is not above {above}, "
                            f"which its predecessor handed a client")

    def writes_after_takeover(self, f, winner, loser, above):
        """The end of a takeover of the fixed server: winner's writer
        starts, its first ID is checked above `above` (took_over), it runs
        for the fault's duration, and loser comes back as its standby."""
        self.fleet.start_writer(winner.name)
        self.took_over(f, winner, above)
        time.sleep(f["duration"])
        self.swap_fixed(winner, loser)
        return [winner.name]

    def swap_fixed(self, winner, loser):
        """winner is the fixed server from here on; loser, gone for good,
        comes back as its standby (a new base backup)."""
        fl = self.fleet
        fl.fixed_name, fl.fixed_standby_name = winner.name, loser.name
        loser.stop("immediate")
        fl.basebackup(loser.name, winner.name).start()

    def async_failover(self, f):
        """Asynchronous failover without a registry, with IDs the standby
        never saw: the standby cut off (its walsender stopped, SIGSTOP) while
        the primary's writer commits rows it never receives and a client
        takes IDs without rows (single calls, then a maximal batch, which
        runs up to the drift limit ahead of the clock), all recorded as the
        clients'; then the primary killed (kill -9) and the standby
        promoted at once. Its successor's floor (docs/successors.md) must
        put it above every one of them: the live check's no-ID-twice and
        the client's ranges. The old primary comes back as its standby."""
        fl = self.fleet
        primary, standby = self.fixed_pair()
        walsender = self.streaming(primary, standby)
        os.kill(walsender, signal.SIGSTOP)
        high, ahead = fl.client_ids(primary)
        log(f"async_failover: {standby.name} cut off; {primary.name}'s client holds IDs up to {high}, "
            f"{ahead} ms ahead of its clock")
        f["detail"] = f"the client's IDs {ahead} ms ahead"
        fl.stop_writer(primary.name)
        primary.kill9()
        standby.as_pg(f"{fl.bin}/pg_ctl", "-D", standby.dir, "-w", "-t", "60", "promote")
        return self.writes_after_takeover(f, standby, primary, high)

    def copy_drift(self, f):
        """An accepted copy of an original that ran a larger drift limit:
        the original's max_clock_drift raised to f["detail"] s (reloaded,
        and a lease written under it), a base backup taken into the
        standby's place, then the original's client takes batches that run
        far ahead of its clock (beyond the copy's own limit), and the
        original is killed for good. The copy, started with the soak's 5 s,
        is held until snowflake_accept_configuration(), and then issues
        under the same node id above every ID the original handed out
        after the copy was taken (its floor counts the limit the
        original's lease recorded). The original comes back as the copy's
        standby."""
        fl = self.fleet
        original, copy = self.fixed_pair()
        limit_ms = f["detail"] * 1000
        original.conf(f"snowflake_id.max_clock_drift = '{limit_ms}ms'")
        original.psql("SELECT pg_reload_conf()")
        # Leases under the new limit before the copy is taken (its writer
        # has them written every LEASE_WINDOW_MS, 200 ms): a raised limit
        # must reach the copy before the original uses it
        # (docs/successors.md).
        # A server running ahead (a successor's allowance) writes a lease
        # only when its IDs pass the last one: a batch of 300 ms of ID
        # time does, recording the raised limit (the limit a lease records
        # is the one in force when it is written, so the original cannot
        # use the raised limit before a lease records it).
        deadline = time.monotonic() + 20
        while recorded_drift_limit_ms(original) < limit_ms:
            if time.monotonic() > deadline:
                raise Violation(f"{original.name} wrote no lease under its raised drift limit")
            original.psql(f"SELECT cardinality(snowflake_next_batch_array({min(MAX_CLIENT_BATCH, 300 << fl.sequence_bits)}))")
            time.sleep(0.2)
        copy.stop("immediate")
        fl.basebackup(copy.name, original.name, standby=False)
        copy.conf(f"snowflake_id.max_clock_drift = '{DRIFT_MS}ms'")
        # After the copy was taken, batches up to the original's limit
        # (each within the batch bound): further ahead than the copy's own
        # limit and the clocks' offset.
        batches = max(1, limit_ms // 5000 - 1)
        high, ahead = fl.client_ids(original, batches=batches)
        log(f"copy_drift: after the copy was taken {original.name} (max_clock_drift {f['detail']} s) "
            f"handed its client IDs up to {high}, {ahead} ms ahead of its clock")
        f["detail"] = f"{f['detail']} s on the original, its client's IDs {ahead} ms ahead"
        fl.stop_writer(original.name)
        original.kill9()
        copy.start()
        held = copy.psql("SELECT issuing_held FROM snowflake_stats()")
        if held != "copied":
            raise Violation(f"copy_drift: the copy of {original.name} is not held as a copy ({held!r})")
        copy.psql("SELECT snowflake_accept_configuration()")
        return self.writes_after_takeover(f, copy, original, high)

    def upgrade(self, f):
        """pg_upgrade of the fixed server, to the same major version (the
        soak runs one; pg_upgrade allows it, and the new cluster is what
        matters for IDs: a new data directory, a new system identifier, no
        lease file): right before the stop a client takes a batch ahead of
        the clock. Then the documented step, the old lease file copied
        (adopted: the server resumes after it), or the step forgotten: the
        server started without it is held (lease_missing_after_upgrade), and
        stopped, given the file and started again, adopts it (the runbook's
        way; accepting instead is only for an old cluster that never issued
        an ID, and its floor does not know the old cluster's drift limit).
        Either way above every ID the old cluster handed out. The standby is
        rebuilt from the upgraded server."""
        fl = self.fleet
        primary, standby = fl.clusters[fl.fixed_name], fl.clusters[fl.fixed_standby_name]
        new_dir, old_dir = primary.dir + ".upgraded", primary.dir + ".old"
        for d in (new_dir, old_dir):
            shutil.rmtree(d, ignore_errors=True)
        primary.as_pg(f"{fl.bin}/initdb", "-D", new_dir, "-A", "trust", "-U", "postgres", "--no-sync")
        shutil.copy(os.path.join(primary.dir, "postgresql.conf"), os.path.join(new_dir, "postgresql.conf"))
        shutil.chown(os.path.join(new_dir, "postgresql.conf"), "postgres", "postgres")
        high, ahead = fl.client_ids(primary)
        log(f"upgrade: {primary.name}'s client holds IDs up to {high}, {ahead} ms ahead of its clock")
        f["detail"] = f"{f['detail']}, the client's IDs {ahead} ms ahead"
        standby.stop("immediate")
        primary.stop("fast")
        if os.path.exists(os.path.join(primary.dir, "postmaster.pid")):
            raise Violation(f"upgrade: {primary.name} did not stop: {tail(primary.log)}")
        r = subprocess.run(
            ["sudo", "-u", "postgres", "env", *[f"{k}={v}" for k, v in primary.env().items()],
             f"{fl.bin}/pg_upgrade", "-b", fl.bin, "-B", fl.bin, "-d", primary.dir, "-D", new_dir,
             "-p", str(primary.port), "-P", str(fl.port()), "-U", "postgres", "-s", fl.work, "--link"],
            cwd=fl.work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode != 0:
            # The old cluster is whole until the new one starts (--link):
            # back to it, and the soak fails on the error.
            primary.start(check=False)
            fl.basebackup(standby.name, primary.name).start()
            raise Violation(f"pg_upgrade of {primary.name} failed: {r.stdout.strip()[-600:]}")
        os.rename(primary.dir, old_dir)
        os.rename(new_dir, primary.dir)
        lease = os.path.join(old_dir, "snowflake_id.lease")
        if f["detail"].startswith("lease-copied"):
            subprocess.run(["cp", "-p", lease, os.path.join(primary.dir, "snowflake_id.lease")], check=True)
        primary.start()
        held = primary.psql("SELECT coalesce(issuing_held, 'none') FROM snowflake_stats()")
        if f["detail"].startswith("lease-copied"):
            if held != "none":
                raise Violation(f"upgrade: with its lease copied, {primary.name} is held ({held})")
        else:
            if held != "lease_missing_after_upgrade":
                raise Violation(f"upgrade: without its lease, {primary.name} is not held ({held})")
            primary.stop("fast")
            subprocess.run(["cp", "-p", lease, os.path.join(primary.dir, "snowflake_id.lease")], check=True)
            primary.start()
            held = primary.psql("SELECT coalesce(issuing_held, 'none') FROM snowflake_stats()")
            if held != "none":
                raise Violation(f"upgrade: given its lease after the start without it, {primary.name} is held ({held})")
        self.took_over(f, primary, high)
        shutil.rmtree(old_dir, ignore_errors=True)
        time.sleep(f["duration"])
        standby.stop("immediate")
        fl.basebackup(standby.name, primary.name).start()
        return [primary.name]

    def promote_standby(self, f):
        fl = self.fleet
        primary, standby = self.fixed_pair()
        if fl.args.no_registry:
            # Without a registry, two servers with one node id at once are
            # the operator's to prevent: the standby is promoted only after
            # its primary died, which then comes back as the new standby.
            fl.stop_writer(primary.name)
            primary.kill9()
            standby.as_pg(f"{fl.bin}/pg_ctl", "-D", standby.dir, "-w", "-t", "60", "promote")
            fl.start_writer(standby.name)
            time.sleep(f["duration"])
            fl.fixed_name, fl.fixed_standby_name = standby.name, primary.name
            fl.basebackup(primary.name, standby.name).start()
            return [standby.name]
        # With the registry: promoted while its primary still writes. The
        # registry gives the node id to one of them: the primary while it
        # renews; the promoted standby when the primary's claim went stale
        # meanwhile (paused, cut off, the registry away), as an operator's
        # failover wants. The other is the standby again afterwards.
        standby.as_pg(f"{fl.bin}/pg_ctl", "-D", standby.dir, "-w", "-t", "60", "promote")
        fl.start_writer(standby.name)
        time.sleep(max(f["duration"], 3))

        def holder():
            return fl.registry_psql(f"SELECT data_directory FROM snowflake_registry.node_ids WHERE fleet = 'soak' "
                                    f"AND node_id = {FIXED_NODE} AND released_at IS NULL")
        winner, loser = (standby, primary) if holder() == standby.dir else (primary, standby)
        f["detail"] = f"{winner.name} kept the node id"
        fl.stop_writer(loser.name)
        time.sleep(0.5)
        loser.stop("immediate")
        # The winner is the fixed server from here on, even if what follows
        # fails (the next promotion rebuilds the standby first).
        fl.fixed_name, fl.fixed_standby_name = winner.name, loser.name
        if holder() == loser.dir:
            # The loser took the node id over between the look and its stop
            # (its claim, retried, came while the winner's grant had lapsed
            # in a registry outage): the winner's claim is lost, and its
            # registry worker claims the node id again by itself once the
            # stopped loser's grant has ended (docs/registry-design.md, "When the
            # registry is away"). Its wait after the heal is this fault's.
            f["detail"] += f", taken over by {loser.name} before it stopped: {winner.name} claims it again"
            log(f"{loser.name} took node id {FIXED_NODE} over before it stopped: {winner.name} claims it again by itself")
        fl.basebackup(loser.name, winner.name).start()
        return [winner.name]

    def copy(self, f):
        fl = self.fleet
        src = fl.clusters[f["name"]]
        fl.copies += 1
        name = f"copy{fl.copies}"
        if f["detail"] == "snapshot":
            # A crash-consistent copy (a disk or VM snapshot): the source
            # paused while its files are copied. It leaves no trace to
            # detect (docs/operations.md), so only the registry keeps it
            # apart: it is a new claim, of another node id.
            c = fl.new(name)
            src.signal_all(signal.SIGSTOP)
            try:
                shutil.copytree(src.dir, c.dir, symlinks=True)
            finally:
                src.signal_all(signal.SIGCONT)
            subprocess.run(["chown", "-R", "postgres:postgres", c.dir], check=True)
            os.remove(os.path.join(c.dir, "postmaster.pid"))
            c.relocate()
        else:
            # A base backup started as a primary: held until accepted.
            c = fl.basebackup(name, src.name, standby=False)
        c.faked = src.faked
        c.start()
        if f["detail"] == "backup-accepted":
            c.psql("SELECT snowflake_accept_configuration()", check=False)
        fl.start_writer(name)
        time.sleep(max(f["duration"], 3))
        fl.stop_writer(name)
        time.sleep(0.5)
        c.stop("immediate")
        return [f["name"]]

    def revoke(self, f):
        fl = self.fleet
        role = fl.roles.get(f["name"])
        if role:
            fl.revoked.add(role)
            fl.registry_psql(f"REVOKE snowflake_registry_client FROM {role}")
        time.sleep(f["duration"])
        if role:
            fl.registry_psql(f"GRANT snowflake_registry_client TO {role}")
            fl.revoked.discard(role)
        return [f["name"]]

    def partition(self, f):
        """The server's network path to the registry cut (both registry
        servers), its connections left hanging: what the server sees of a
        partition or a registry gone silent, not a refusal."""
        # f1s, a copy of f1's data directory, reaches the registry by f1's path.
        path = self.fleet.paths.get(f["name"]) or self.fleet.paths["f1"]
        path.open.clear()
        time.sleep(f["duration"])
        path.open.set()
        return [f["name"]]

    def node_id_typo(self, f):
        fl = self.fleet
        c = fl.clusters[f["name"]]
        other = [s for s in ("n1", "n2", "n3", "n4") if s != f["name"]][0]
        held = fl.clusters[other].psql("SELECT node_id FROM snowflake_stats()", check=False)
        if not held:
            return []
        conf = os.path.join(c.dir, "postgresql.conf")
        with open(conf) as fh:
            before = fh.read()
        c.stop()
        c.conf(f"snowflake_id.node_id = {held}")
        c.start(check=False)
        time.sleep(f["duration"])
        c.stop()
        with open(conf, "w") as fh:
            fh.write(before)
        c.start()
        return [f["name"]]


class LiveCheck(threading.Thread):
    """The checks that need only the client's view, run while the soak runs
    over the IDs recorded since the last look (and once more at the end):
    an ID recorded twice, an insert refused because its server's table
    already held the ID, an ID not above the one before it on its
    connection. The first violation stops the run (Nemesis.run looks at
    `problems`), with how far into the run it was seen."""

    def __init__(self, fleet):
        super().__init__(daemon=True)
        self.fleet = fleet
        self.started = time.monotonic()
        self.stopped = threading.Event()
        self.problems = []
        self.seen = {}             # id -> server that returned it
        self.last = {}             # connection -> its last ID
        self.ids_looked_at = 0
        self.duplicates_looked_at = 0
        self.ranges = []           # the clients' batches looked at so far
        self.ranges_looked_at = 0
        self.registry_connections = {}  # role -> (most seen at once, seconds into the run)

    def run(self):
        while not self.stopped.wait(CHECK_EVERY_S):
            self.look()
            try:
                self.count_registry_connections()
            except Exception as e:  # the count must not end the live check
                log(f"counting the registry's connections failed: {e!r}")

    def count_registry_connections(self):
        """The registry's connections per server role, now (a registry that
        does not answer is skipped: another fault has it)."""
        if self.fleet.args.no_registry:
            return
        out = self.fleet.registry().psql("SELECT usename, count(*) FROM pg_stat_activity "
                                         "WHERE starts_with(usename, 'node_') GROUP BY usename",
                                         check=False, timeout=5)
        at = time.monotonic() - self.started
        for line in (out or "").split():
            role, count = line.split("|")
            count = int(count)
            if count > self.registry_connections.get(role, (0, 0))[0]:
                self.registry_connections[role] = (count, at)
            if count > REGISTRY_CONNECTIONS_BOUND:
                problem = (f"the registry held {count} connections of {role} at once "
                           f"(bound {REGISTRY_CONNECTIONS_BOUND})")
                log(f"violation {at:.0f} s into the run: {problem}")
                self.problems.append(problem)

    def look(self):
        with self.fleet.lock:
            ids = self.fleet.ids[self.ids_looked_at:]
            refused = self.fleet.duplicates[self.duplicates_looked_at:]
            ranges = self.fleet.ranges[self.ranges_looked_at:]
        self.ids_looked_at += len(ids)
        self.duplicates_looked_at += len(refused)
        self.ranges_looked_at += len(ranges)
        node_of = self.fleet.node_of
        # A client's batch: every ID of its node id inside it is the
        # client's. The new batches against the IDs seen before and the
        # batches before; then the new IDs against every batch.
        found = range_violations(ranges, self.seen.items(), node_of, self.ranges)
        self.ranges += ranges
        found += range_violations(self.ranges, ((v, server) for v, server, _, _ in ids), node_of)
        for v, server, conn, order in ids:
            if v in self.seen:
                found.append(f"ID {v} recorded twice: by {self.seen[v]} and by {server}")
            else:
                self.seen[v] = server
            last = self.last.get(conn)
            if last is not None and v <= last:
                found.append(f"connection {conn} ({server}): ID {v} came after {last}")
            self.last[conn] = v
        for v, server in refused:
            found.append(f"{server} issued ID {v} twice: its table already held it (the insert was refused)")
        if found:
            at = time.monotonic() - self.started
            for problem in found:
                log(f"violation {at:.0f} s into the run: {problem}")
            self.problems += found


def range_violations(ranges, ids, node_of, earlier=()):
    """The IDs (id, server) that lie in a client's batch (lowest, highest,
    server) of their node id, and the batches that overlap an earlier one
    of the same node id: IDs issued twice, one of them to a client that
    stored no row."""
    found = []
    by_node = collections.defaultdict(list)
    for low, high, server in ranges:
        by_node[node_of(low)].append((low, high, server))
    for i, (low, high, server) in enumerate(ranges):
        for low2, high2, server2 in [*earlier, *ranges[:i]]:
            if node_of(low2) == node_of(low) and low <= high2 and low2 <= high:
                found.append(f"the batch {low} .. {high} of {server} overlaps the batch {low2} .. {high2} "
                             f"of {server2}")
    if not by_node:
        return found
    for v, server in ids:
        for low, high, batch_server in by_node.get(node_of(v), ()):
            if low <= v <= high:
                found.append(f"ID {v} recorded by {server} lies in the batch {low} .. {high} "
                             f"handed to a client of {batch_server}")
    return found


def check(fleet, nemesis, live):
    live.stopped.set()
    live.join(timeout=CHECK_EVERY_S * 2)
    live.look()
    problems = list(live.problems)
    ids = fleet.ids
    if not fleet.args.no_registry:
        problems += check_who_issued(fleet, ids)
    waits, worst, stalls = outages(fleet, nemesis)
    return problems + waits, worst, stalls


def check_who_issued(fleet, ids):
    """Every ID lies in a grant to the server that returned it: the grant's
    port is that server's (copies and a promoted standby have their own).
    Every ID by who_issued()'s rule over the registry's grants, here (one
    call of the function per ID takes minutes per million IDs, longer than
    a long run's check may), with the grants a restore of the registry lost;
    and up to WHO_ISSUED_SAMPLE of them by the function itself, in the
    registry (of the IDs whose grant it still has)."""
    problems, lost_only = check_grants(fleet, ids)
    ids = [i for i in ids if i[0] not in lost_only]
    if len(ids) > WHO_ISSUED_SAMPLE:
        ids = random.Random(0).sample(ids, WHO_ISSUED_SAMPLE)
    reg = fleet.registry()
    path = os.path.join(fleet.work, "ids.tsv")
    with open(path, "w") as f:
        for v, server, _, _ in ids:
            f.write(f"{v}\t{fleet.clusters[server].port}\n")
    os.chmod(path, 0o644)
    out = subprocess.run(
        ["psql", "-X", "-q", "-At", "-h", "127.0.0.1", "-p", str(reg.port), "-U", "postgres", "-d", "postgres",
         "-v", "ON_ERROR_STOP=1", "-c", "CREATE TEMP TABLE ids (id bigint, port int)",
         "-c", f"\\copy ids FROM '{path}'",
         "-c", "SELECT i.id, i.port, coalesce(string_agg(w.port::text, ','), 'none') FROM ids i "
               "LEFT JOIN LATERAL snowflake_registry.who_issued('soak', i.id) w ON true "
               "GROUP BY i.id, i.port HAVING count(w.port) <> 1 OR min(w.port) <> i.port LIMIT 20"],
        text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if out.returncode != 0:
        return problems + [f"who_issued check failed: {out.stderr.strip()}"]
    # An ID the rule already reported is not reported again.
    reported = {p.split()[1] for p in problems}
    return problems + [f"ID {v} returned by the server on port {port}, granted to port(s) {granted} (who_issued())"
                       for v, port, granted in (line.split("|") for line in out.stdout.split())
                       if v not in reported]


def check_grants(fleet, ids):
    """who_issued()'s rule for every ID: the grants of the ID's node id with
    floor_ms < the ID's millisecond <= until_ms are the server's alone (by
    its port; one grant of the registry as it is, and the grants a restore
    lost as the registry's standby had them, some of which the restore
    brought back). The first 20
    violations, and the IDs only a lost grant covers."""
    layout = fleet.registry_psql("SELECT node_bits || ' ' || sequence_bits "
                                 "FROM snowflake_registry.fleets WHERE fleet = 'soak'")
    node_bits, sequence_bits = map(int, layout.split())
    grants = collections.defaultdict(list)
    rows = fleet.registry_psql("SELECT node_id, floor_ms, until_ms, coalesce(port, 0) "
                               "FROM snowflake_registry.grants WHERE fleet = 'soak'")
    for line in rows.split():
        node, floor_ms, until_ms, port = map(int, line.split("|"))
        grants[node].append((floor_ms, until_ms, port, False))
    for node, floor_ms, until_ms, port in fleet.lost_grants:
        grants[node].append((floor_ms, until_ms, port, True))
    problems, lost_only = [], set()
    for v, server, _, _ in ids:
        ms, node = v >> (node_bits + sequence_bits), (v >> sequence_bits) & ((1 << node_bits) - 1)
        covering = [(port, lost) for floor_ms, until_ms, port, lost in grants[node] if floor_ms < ms <= until_ms]
        ports = sorted({port for port, _ in covering})
        # (Two grants of the registry as it is now never cover one ID.)
        if ports != [fleet.clusters[server].port] or sum(1 for _, lost in covering if not lost) > 1:
            problems.append(f"ID {v} returned by the server on port {fleet.clusters[server].port}, "
                            f"granted to port(s) {','.join(map(str, ports)) or 'none'} (the grants table)")
            if len(problems) >= 20:
                break
        elif all(lost for _, lost in covering):
            lost_only.add(v)
    return problems, lost_only


def outages(fleet, nemesis):
    """Availability, from the writers' commits: every stretch of over a
    second in which a server in the fleet committed nothing.

    The faults that touched a server cut its stretches into the time
    while a fault was under way (from its start to its heal: nothing is
    owed then) and the free time between. A free stretch after a heal is
    a wait owed to the faults healed before it: it must end (a commit, or
    the next fault's start) within the latest heal + bound among them
    (BOUNDS_S; a fault's effect may outlast its heal: a lapsed grant, a
    re-claim). A free stretch no healed fault's bound reaches is a
    bystander's stall, held to BYSTANDER_BOUND_S: one server's fault must
    not stop another. A fault on the registry touches every server; one
    that failed (an error, which fails the soak anyway) counts as healed
    when it failed, on its own server. Copies are left out (they are
    faults).

    Returns (violations, worst wait per kind {kind: (seconds, server)},
    bystander stalls [(seconds, server, seconds into the run)])."""
    spans = collections.defaultdict(list)      # server -> [(start, heal, bound, kind)]
    for kind, _, healed, writers, fault in nemesis.done:
        for name in {n for n, _ in writers} | set(fault.get("affects", [])):
            spans[name].append((fault["started"], healed, BOUNDS_S[kind], kind))
    servers = {w.cluster.name for w in fleet.all_writers}
    for fault in nemesis.schedule:
        if fault.get("error") and "started" in fault:
            # Its own server (every server, for the registry's), as if healed
            # when it failed: its error fails the soak anyway, and the
            # others' outages stay counted.
            touched = servers if fault["target"] == "registry" else {fault["name"], *fault.get("affects", [])}
            for name in touched:
                spans[name].append((fault["started"], fault["failed_at"], BOUNDS_S[fault["kind"]], fault["kind"]))
    problems, worst, stalls = [], {}, []
    for w in fleet.all_writers:
        name = w.cluster.name
        if name.startswith("copy"):
            continue
        times = [w.started_at] + w.ok_times + [w.retired_at if w.retired_at is not None else fleet.ended]
        for a, b in zip(times, times[1:]):
            if b - a <= 1.0:
                continue
            for u, v in free_stretches(a, b, spans[name]):
                healed = [(heal + bound, heal, kind) for start, heal, bound, kind in spans[name] if heal <= u]
                allowed, heal, kind = max(healed) if healed else (None, None, None)
                into = u - nemesis.started
                if allowed is not None and allowed >= u:
                    wait = v - heal
                    if wait > worst.get(kind, (0.0, ""))[0]:
                        worst[kind] = (wait, name)
                    if v > allowed:
                        problems.append(f"after {kind}, {name} could not issue for {wait:.1f} s "
                                        f"(bound {BOUNDS_S[kind]} s; healed {heal - nemesis.started:.0f} s "
                                        f"into the run): {w.errors_between(u, v)}")
                elif v - u > 1.0:
                    stalls.append((v - u, name, into))
                    if v - u > BYSTANDER_BOUND_S:
                        problems.append(f"{name} could not issue for {v - u:.1f} s ({into:.0f} s into the run) "
                                        f"while no fault touched it (bound {BYSTANDER_BOUND_S} s): "
                                        f"{w.errors_between(u, v)}")
    return problems, worst, sorted(stalls, reverse=True)


def free_stretches(a, b, spans):
    """The parts of [a, b] that no fault's [start, heal] covers."""
    free, at = [], a
    for start, heal, _, _ in sorted(spans):
        if heal < at or start > b:
            continue
        if start > at:
            free.append((at, start))
        at = max(at, heal)
    if at < b:
        free.append((at, b))
    return free


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--seconds", type=int, default=None)
    p.add_argument("--minutes", type=float, default=None)
    p.add_argument("--no-registry", action="store_true")
    p.add_argument("--faults", default=None, help="comma-separated kinds (default: all)")
    p.add_argument("--keep", action="store_true", help="keep the work directory")
    args = p.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1, 1 << 31)
    seconds = args.seconds or int((args.minutes or 3) * 60)
    kinds = [k for k in BOUNDS_S if k not in NO_REGISTRY_ONLY]
    if args.no_registry:
        # (Not clock_forward: without a registry the lease follows the
        # clock, IDs are issued an hour ahead, and the corrected clock is
        # refused for the hour, as documented.)
        kinds = ["kill_server", "kill_worker", "stop_server", "stop_worker", "clock_step", "crash_in_step",
                 "copy", "promote_standby", "async_failover", "copy_drift", "upgrade"]
    if args.faults:
        kinds = args.faults.split(",")
    # run_all.sh stops a test that runs too long with SIGTERM: tear down.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    fleet = Fleet(args)
    nemesis = Nemesis(fleet, seed, seconds, kinds)
    log(f"seed {seed}, {seconds} s, faults: {', '.join(kinds)}; work {fleet.work}")
    rc = 0
    try:
        fleet.build()
        log("fleet up; writers running")
        live = LiveCheck(fleet)
        live.start()
        nemesis.run(live)
        fleet.ended = time.monotonic()
        for w in fleet.writers.values():
            w.stopped.set()
        for w in fleet.writers.values():
            w.join(timeout=10)
        problems, worst, stalls = check(fleet, nemesis, live)
        counts = collections.Counter(f["kind"] for f in nemesis.schedule if not f.get("skipped"))
        errors = [f"{f['kind']} on {f['target']}: {f['error']}" for f in nemesis.schedule if f.get("error")]
        problems += [f"fault not injected: {e}" for e in errors]
        log(f"{len(fleet.ids)} IDs recorded on {fleet.connections} connections; faults: {dict(counts)}")
        for kind, (worst_s, server) in sorted(worst.items()):
            log(f"  longest wait after {kind}: {worst_s:.1f} s ({server}; bound {BOUNDS_S[kind]} s)")
        if live.registry_connections:
            role, (most, at) = max(live.registry_connections.items(), key=lambda kv: kv[1][0])
            log(f"  most registry connections of one server's role at once: {most} ({role}, {at:.0f} s "
                f"into the run; bound {REGISTRY_CONNECTIONS_BOUND})")
        longest = f"{stalls[0][0]:.1f} s ({stalls[0][1]})" if stalls else "none over 1 s"
        log(f"  longest stall of a server no fault touched: {longest}; bound {BYSTANDER_BOUND_S} s")
        for name, w in fleet.writers.items():
            if w.errors:
                log(f"  {name} errors: {dict(w.errors.most_common(4))}")
        if problems:
            rc = 1
            print("FAIL: the soak found:", *problems[:20], sep="\n  ", file=sys.stderr)
            print(f"replay: soak.py --seed {seed} --seconds {seconds}"
                  f"{' --no-registry' if args.no_registry else ''}"
                  f"{' --faults ' + args.faults if args.faults else ''}; schedule:", file=sys.stderr)
            print(json.dumps(nemesis.schedule, indent=None), file=sys.stderr)
        else:
            traced = "" if args.no_registry else ", every ID where the registry granted it"
            log(f"ok: seed {seed}: no ID twice{traced}, each connection's IDs increasing, "
                f"every server back within its bound")
    except Violation as e:
        rc = 1
        print(f"FAIL: {e} (seed {seed})", file=sys.stderr)
    finally:
        fleet.teardown()
    return rc


if __name__ == "__main__":
    sys.exit(main())
