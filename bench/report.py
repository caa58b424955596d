"""Turns a bench/run.sh result directory into docs/<name>.md and
docs/<name>.png: medians over the repetitions, ratios within the run, and
the benchmark targets (against bigserial, a sequence with CACHE 100,
SELECT 1 and gen_random_uuid(), for the batch forms, the cost's growth
with N and the throttle; and, where uuidv7() was measured, on PostgreSQL 18,
those against uuidv7()).

    python bench/report.py bench/results/<date> docs [name]   (name: benchmark)

Ratios are paired: within each repetition, the two runs compared were made
minutes apart at most (run.sh rotates the generators' order from one
repetition to the next), so the report takes the ratio in each repetition
and gives the median of those. On a shared machine, whose load drifts over a
run, that is steadier than the ratio of two medians.
"""

import csv
import statistics
import sys
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

NAMES = {
    "snowflake": "snowflake_next()",
    "bigserial": "nextval() (bigserial)",
    "cache100": "nextval(), CACHE 100",
    "uuid": "gen_random_uuid()",
    "uuidv7": "uuidv7()",
    "instagram": "Instagram PL/pgSQL",
    "select1": "SELECT 1",
}
ORDER = ["snowflake", "bigserial", "cache100", "uuid", "uuidv7", "instagram", "select1"]
GENERATORS = [g for g in ORDER if g != "select1"]
LAYOUT_LIMIT = 4_096_000
# The fastest a throttled run of 10,000,000 IDs may go: 2,441.4 ms of IDs at
# the layout's limit, minus the 10 ms they may run ahead of the clock.
THROTTLE_MAX = 1e7 / (1e7 / LAYOUT_LIMIT - 0.010)
ONE_M, TEN_M = 1_000_000, 10_000_000


class Results:
    """The raw values of one run: value(bench, generator, param, rep)."""

    def __init__(self, out):
        self.by_rep = defaultdict(dict)
        with open(out / "raw.tsv") as f:
            for row in csv.DictReader(f, delimiter="\t"):
                key = (row["bench"], row["generator"], int(row["param"]))
                self.by_rep[key][int(row["rep"])] = float(row["value"])
        self.machine = {}
        for line in (out / "machine.txt").read_text().splitlines():
            k, _, v = line.partition("=")
            self.machine[k] = v

    def median(self, *key):
        v = self.by_rep.get(key)
        return statistics.median(v.values()) if v else None

    def count(self, *key):
        return len(self.by_rep.get(key, {}))

    def per_rep(self, a, b, f):
        """f(a, b) in each repetition that has both a and b (b non-zero)."""
        ra, rb = self.by_rep.get(a, {}), self.by_rep.get(b, {})
        return [f(ra[r], rb[r]) for r in sorted(set(ra) & set(rb)) if rb[r]]

    def paired(self, a, b, f):
        """The median over the repetitions of f(a, b), or None."""
        values = self.per_rep(a, b, f)
        return statistics.median(values) if values else None

    def ratio(self, a, b):
        return self.paired(a, b, lambda x, y: x / y)

    def ratio_range(self, a, b):
        """The smallest and largest per-repetition ratio of a to b, or None."""
        values = self.per_rep(a, b, lambda x, y: x / y)
        return (min(values), max(values)) if len(values) > 1 else None

    def own_ns(self, a, floor):
        """Nanoseconds per call above the floor, from the rates of the same query."""
        return self.paired(a, floor, lambda x, y: (1 / x - 1 / y) * 1e9)


def fmt_rate(x):
    if x is None:
        return "-"
    if x >= 1e6:
        return f"{x / 1e6:.2f}M"
    if x >= 1e3:
        return f"{x / 1e3:.0f}k"
    return f"{x:.0f}"


def fmt_ns(ns):
    return f"{ns:.0f} ns" if ns is not None else "-"


def fmt_x(r):
    return f"{r:.2f}x" if r is not None else "-"


def main():
    out, docs = Path(sys.argv[1]), Path(sys.argv[2])
    report_name = sys.argv[3] if len(sys.argv) > 3 else "benchmark"
    docs.mkdir(parents=True, exist_ok=True)
    res = Results(out)
    m = res.machine
    lines = []
    w = lines.append
    major = m["postgres"].split()[-1].split(".")[0]
    pg_flag = "" if major == "15" else f" --pg {major}"
    w(f"Measured {m['date']} ({m['mode']} mode, `bench/run.sh --{m['mode']}{pg_flag}`, commit {m['git']}) on "
      f"{m['cpu']}, {m['cores']} cores, {m['memory']}, Linux {m['kernel']}, clocksource {m['clocksource']}, "
      f"{m['postgres']}{' (' + m['postgres_build'] + ')' if 'postgres_build' in m else ''}. Rates are medians of the repetitions (count in brackets); ratios are medians of "
      "the ratios within each repetition, whose runs were made minutes apart at most. "
      f"Load average at the end: {m['loadavg_at_end']}.")
    w("")

    # 1. one session
    one = lambda g, n: ("one_session", g, n)  # noqa: E731
    w("**1. One session**: `SELECT count(x) FROM (SELECT <gen> AS x FROM generate_series(1, N)) s`, calls/s. "
      "The last row puts the constant 1 in place of the generator: that is the floor (materialising the "
      "series, reading it back, counting); *own cost* is the time per call above it.")
    w("")
    w("| generator | N = 1,000,000 | vs bigserial | vs CACHE 100 | own cost | N = 10,000,000 | vs bigserial "
      "| own cost | cost per call, 10M / 1M |")
    w("|---|---|---|---|---|---|---|---|---|")
    for g in ORDER:
        r1, r10 = res.median(*one(g, ONE_M)), res.median(*one(g, TEN_M))
        if r1 is None and r10 is None:
            continue
        label = "1 (the floor)" if g == "select1" else NAMES[g]
        own1 = fmt_ns(res.own_ns(one(g, ONE_M), one("select1", ONE_M))) if g != "select1" else "-"
        own10 = fmt_ns(res.own_ns(one(g, TEN_M), one("select1", TEN_M))) if g != "select1" else "-"
        w(f"| {label} | {fmt_rate(r1)} [{res.count(*one(g, ONE_M))}] "
          f"| {fmt_x(res.ratio(one(g, ONE_M), one('bigserial', ONE_M)))} "
          f"| {fmt_x(res.ratio(one(g, ONE_M), one('cache100', ONE_M)))} | {own1} "
          f"| {fmt_rate(r10) + f' [{res.count(*one(g, TEN_M))}]' if r10 else '-'} "
          f"| {fmt_x(res.ratio(one(g, TEN_M), one('bigserial', TEN_M)))} | {own10} "
          f"| {fmt_x(res.ratio(one(g, ONE_M), one(g, TEN_M)))} |")
    w("")

    # 1b. the throttle
    su, st = res.median("stream", "snowflake", TEN_M), res.median("stream", "snowflake_throttled", TEN_M)
    if su and st:
        n = res.count("stream", "snowflake_throttled", TEN_M)
        waits = res.median("throttle_waits", "snowflake_throttled", TEN_M)
        wait_ms = res.median("throttle_wait_ms", "snowflake_throttled", TEN_M)
        w("**1b. The throttle**: `SELECT count(x) FROM (SELECT snowflake_next() AS x FROM "
          "(SELECT generate_series(1, 10000000)) g) s`, IDs/s. The series is streamed (a set-returning "
          "function in a select list), not materialised first as in table 1, so the statement's time is "
          "nearly all issuing. With `max_clock_drift = 10ms` the IDs may not run more than 10 ms ahead of "
          "the clock: the session must keep to the layout's 4,096,000 IDs/s and sleep for the rest.")
        w("")
        w("| max_clock_drift | IDs/s | of 4,096,000 | waits (sleeps) per run | time asleep per run |")
        w("|---|---|---|---|---|")
        w(f"| 60s (not throttled) | {fmt_rate(su)} [{n}] | {su / LAYOUT_LIMIT:.0%} | - | - |")
        w(f"| 10ms (throttled) | {fmt_rate(st)} [{n}] | {st / LAYOUT_LIMIT:.0%} | "
          f"{waits:.0f} | {wait_ms:.0f} ms |")
        w("")

    # 2. pgbench
    clients = sorted({k[2] for k in res.by_rep if k[0] == "pgbench"})
    w("**2. pgbench**, `-M prepared`, one call per transaction (`SELECT <gen>;`), transactions/s")
    w("")
    w("| generator | " + " | ".join(f"{c} client{'s' if c > 1 else ''}" for c in clients) + " |")
    w("|---|" + "---|" * len(clients))
    for g in ORDER:
        if not any(res.median("pgbench", g, c) for c in clients):
            continue
        cells = []
        for c in clients:
            t = res.median("pgbench", g, c)
            r = res.ratio(("pgbench", g, c), ("pgbench", "select1", c))
            cells.append(f"{fmt_rate(t)} [{res.count('pgbench', g, c)}] ({fmt_x(r)} of SELECT 1)" if t else "-")
        w(f"| {NAMES[g]} | " + " | ".join(cells) + " |")
    w("")
    w(f"![pgbench throughput against clients]({report_name}.png)")
    w("")

    # 3. insert (1,000,000 rows; fewer in quick mode)
    rows = max([k[2] for k in res.by_rep if k[0] == "insert"], default=0)
    ins = lambda g: ("insert", g, rows)  # noqa: E731
    pk = lambda g: ("pkey_bytes", g, rows)  # noqa: E731
    w(f"**3. Bulk insert**: `INSERT INTO t (v) SELECT g FROM generate_series(1, {rows})`, "
      "primary key defaulting to the generator")
    w("")
    w("| generator | rows/s | vs bigserial | primary key size | vs bigserial |")
    w("|---|---|---|---|---|")
    for g in GENERATORS:
        r, p = res.median(*ins(g)), res.median(*pk(g))
        if r is None:
            continue
        w(f"| {NAMES[g]} | {fmt_rate(r)} [{res.count(*ins(g))}] | {fmt_x(res.ratio(ins(g), ins('bigserial')))} "
          f"| {p / 2**20:.1f} MB | {fmt_x(res.ratio(pk(g), pk('bigserial')))} |")
    w("")

    # 4. batch
    batch_queries = [
        ("batch_from", "in FROM", "SELECT count(x) FROM snowflake_next_batch(1000000) x"),
        ("batch_select", "in the select list", "SELECT count(x) FROM (SELECT snowflake_next_batch(1000000) AS x) s"),
        ("batch_array", "as an array", "SELECT cardinality(snowflake_next_batch_array(1000000))"),
    ]
    w("**4. Batches** of 1,000,000 IDs, IDs/s")
    w("")
    w("| query | IDs/s | vs `snowflake_next()` in one session |")
    w("|---|---|---|")
    for key, _, sql in batch_queries:
        r = res.median("batch", key, ONE_M)
        if r:
            w(f"| `{sql}` | {fmt_rate(r)} [{res.count('batch', key, ONE_M)}] "
              f"| {fmt_x(res.ratio(('batch', key, ONE_M), one('snowflake', ONE_M)))} |")
    w("")

    # 5. criterion
    crit = {k[1]: res.median(*k) for k in res.by_rep if k[0] == "criterion_ns"}
    if crit:
        w("**5. The pure core** (criterion, `cargo bench --bench core`), median time per call")
        w("")
        w("| benchmark | per call | per ID |")
        w("|---|---|---|")
        for name in sorted(crit):
            ns = crit[name]
            per_id = ns / 4096 if name.startswith("batch4096") else ns
            w(f"| `{name}` | {ns:.1f} ns | {per_id:.2f} ns |")
        w("")

    # targets
    w("**Benchmark targets**")
    w("")
    w("| target | measured | met |")
    w("|---|---|---|")

    def target(text, value, ok):
        w(f"| {text} | {value} | {'yes' if ok else '**no**'} |")

    def ratio_target(text, a, b, least):
        r = res.ratio(a, b)
        if r is None:
            return
        spread = res.ratio_range(a, b)
        shown = fmt_x(r) + (f" (repetitions {spread[0]:.2f}x to {spread[1]:.2f}x)" if spread else "")
        target(text, shown, r >= least)

    ratio_target("one session ≥ 1.8x bigserial", one("snowflake", ONE_M), one("bigserial", ONE_M), 1.8)
    ratio_target("one session ≥ 1.3x CACHE 100", one("snowflake", ONE_M), one("cache100", ONE_M), 1.3)
    for c in (1, 16, 64):
        ratio_target(f"one call per transaction ≥ 0.95x SELECT 1, {c} client{'s' if c > 1 else ''}",
                     ("pgbench", "snowflake", c), ("pgbench", "select1", c), 0.95)
    ratio_target("bulk insert ≥ 1.0x bigserial", ins("snowflake"), ins("bigserial"), 1.0)
    sp = res.ratio(pk("snowflake"), pk("bigserial"))
    if sp is not None:
        target("primary key the size of bigserial's", fmt_x(sp), abs(sp - 1) < 0.01)
    ratio_target("bulk insert ≥ 2x gen_random_uuid()", ins("snowflake"), ins("uuid"), 2.0)
    for key, where, _ in batch_queries:
        ratio_target(f"batch of 1,000,000 ≥ 3x one-session snowflake_next(), {where}",
                     ("batch", key, ONE_M), one("snowflake", ONE_M), 3.0)
    grow = res.ratio(one("snowflake", ONE_M), one("snowflake", TEN_M))
    if grow is not None:
        target("cost per ID at N = 10M no more than 10% above N = 1M (the cost must not grow with N)",
               f"{grow:.2f}x the cost", grow <= 1.10)
    if su and st:
        target("throttle: without it one session issues faster than the layout's 4,096,000 IDs/s "
               "(else the throttled run shows nothing)", f"{fmt_rate(su)} IDs/s", su > LAYOUT_LIMIT)
        target("throttled (max_clock_drift 10ms): never above the layout's limit "
               f"(10,000,000 IDs in no less than 2,441 ms minus the 10 ms of drift: {fmt_rate(THROTTLE_MAX)} IDs/s)",
               f"{fmt_rate(st)} IDs/s", st <= THROTTLE_MAX)
        target("throttled (max_clock_drift 10ms): at least 95% of 4,096,000 IDs/s",
               f"{st / LAYOUT_LIMIT:.0%} of it", st >= LAYOUT_LIMIT * 0.95)
    w("")

    if res.median(*one("uuidv7", ONE_M)) is not None:
        w("**Benchmark targets against PostgreSQL 18's uuidv7()**")
        w("")
        w("| target | measured | met |")
        w("|---|---|---|")
        ratio_target("one session ≥ 1.5x uuidv7()", one("snowflake", ONE_M), one("uuidv7", ONE_M), 1.5)
        ratio_target("bulk insert ≥ 1.3x uuidv7()", ins("snowflake"), ins("uuidv7"), 1.3)
        sv = res.ratio(pk("snowflake"), pk("uuidv7"))
        if sv is not None:
            target("primary key at most half the size of uuidv7()'s", fmt_x(sv), sv <= 0.5)
        w("")

    (docs / f"{report_name}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))

    # chart
    fig, ax = plt.subplots(figsize=(8, 5))
    for g in ORDER:
        ys = [res.median("pgbench", g, c) for c in clients]
        if all(y is not None for y in ys):
            style = "--" if g == "select1" else "-"
            ax.plot(clients, ys, style, marker="o", label=NAMES[g], linewidth=2.5 if g == "snowflake" else 1.5)
    ax.set_xscale("log", base=2)
    ax.set_xticks(clients)
    ax.set_xticklabels([str(c) for c in clients])
    ax.set_xlabel("pgbench clients (-M prepared, one call per transaction)")
    ax.set_ylabel("transactions per second")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend()
    ax.set_title(f"ID generators in PostgreSQL {major}, {m['cores']} cores, {m['date']}")
    fig.tight_layout()
    fig.savefig(docs / f"{report_name}.png", dpi=110)


if __name__ == "__main__":
    main()
