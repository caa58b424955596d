"""Turns a bench/run.sh result directory into docs/benchmark.md and
docs/benchmark.png: medians over the repetitions, ratios within the run, and
the targets of issue 5.

    python bench/report.py bench/results/<date> docs
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
    "instagram": "Instagram PL/pgSQL",
    "select1": "SELECT 1",
    "snowflake_throttled": "snowflake_next(), max_clock_drift 10ms",
}
ORDER = ["snowflake", "bigserial", "cache100", "uuid", "instagram", "select1"]
LAYOUT_LIMIT = 4_096_000


def load(out):
    values = defaultdict(list)
    with open(out / "raw.tsv") as f:
        for row in csv.DictReader(f, delimiter="\t"):
            values[(row["bench"], row["generator"], int(row["param"]))].append(float(row["value"]))
    med = {k: statistics.median(v) for k, v in values.items()}
    reps = {k: len(v) for k, v in values.items()}
    machine = {}
    for line in (out / "machine.txt").read_text().splitlines():
        k, _, v = line.partition("=")
        machine[k] = v
    return med, reps, machine


def fmt_rate(x):
    if x >= 1e6:
        return f"{x / 1e6:.2f}M"
    if x >= 1e3:
        return f"{x / 1e3:.0f}k"
    return f"{x:.0f}"


def ratio(a, b):
    return f"{a / b:.2f}x" if a is not None and b else "-"


def main():
    out, docs = Path(sys.argv[1]), Path(sys.argv[2])
    docs.mkdir(parents=True, exist_ok=True)
    med, reps, m = load(out)
    get = lambda *k: med.get(k)  # noqa: E731
    lines = []
    w = lines.append
    w(f"Measured {m['date']} ({m['mode']} mode, `bench/run.sh --{m['mode']}`, commit {m['git']}) on "
      f"{m['cpu']}, {m['cores']} cores, {m['memory']}, Linux {m['kernel']}, clocksource {m['clocksource']}, "
      f"{m['postgres']}. Medians of the repetitions (count in brackets); ratios within this run. "
      f"Load average at the end: {m['loadavg_at_end']}.")
    w("")

    # 1. one session
    w("**1. One session**: `SELECT count(x) FROM (SELECT <gen> AS x FROM generate_series(1, N)) s`, calls/s")
    w("")
    w("| generator | N = 1,000,000 | vs bigserial | vs CACHE 100 | N = 10,000,000 | vs bigserial | rate 10M / 1M |")
    w("|---|---|---|---|---|---|---|")
    b1, c1 = get("one_session", "bigserial", 1000000), get("one_session", "cache100", 1000000)
    b10 = get("one_session", "bigserial", 10000000)
    for g in ORDER[:5] + ["snowflake_throttled"]:
        r1, r10 = get("one_session", g, 1000000), get("one_session", g, 10000000)
        if r1 is None and r10 is None:
            continue
        n1 = reps.get(("one_session", g, 1000000), 0)
        n10 = reps.get(("one_session", g, 10000000), 0)
        w(f"| {NAMES[g]} | {fmt_rate(r1) + f' [{n1}]' if r1 else '-'} | {ratio(r1, b1)} | {ratio(r1, c1)} | "
          f"{fmt_rate(r10) + f' [{n10}]' if r10 else '-'} | {ratio(r10, b10)} | {ratio(r10, r1)} |")
    w("")

    # 2. pgbench
    clients = sorted({k[2] for k in med if k[0] == "pgbench"})
    w("**2. pgbench**, `-M prepared`, one call per transaction (`SELECT <gen>;`), transactions/s")
    w("")
    w("| generator | " + " | ".join(f"{c} client{'s' if c > 1 else ''}" for c in clients) + " |")
    w("|---|" + "---|" * len(clients))
    for g in ORDER:
        cells = []
        for c in clients:
            t = get("pgbench", g, c)
            cells.append(f"{fmt_rate(t)} ({ratio(t, get('pgbench', 'select1', c))} of SELECT 1)" if t else "-")
        w(f"| {NAMES[g]} | " + " | ".join(cells) + " |")
    w("")
    w("![pgbench throughput against clients](benchmark.png)")
    w("")

    # 3. insert (1,000,000 rows; fewer in quick mode)
    rows = max([k[2] for k in med if k[0] == "insert"], default=0)
    w(f"**3. Bulk insert**: `INSERT INTO t (v) SELECT g FROM generate_series(1, {rows})`, "
      "primary key defaulting to the generator")
    w("")
    w("| generator | rows/s | vs bigserial | primary key size | vs bigserial |")
    w("|---|---|---|---|---|")
    bi, bp = get("insert", "bigserial", rows), get("pkey_bytes", "bigserial", rows)
    for g in ORDER[:5]:
        r, p = get("insert", g, rows), get("pkey_bytes", g, rows)
        if r is None:
            continue
        w(f"| {NAMES[g]} | {fmt_rate(r)} | {ratio(r, bi)} | {p / 2**20:.1f} MB | {ratio(p, bp)} |")
    w("")

    # 4. batch
    s1 = get("one_session", "snowflake", 1000000)
    w("**4. Batches** of 1,000,000 IDs, IDs/s")
    w("")
    w("| query | IDs/s | vs `snowflake_next()` in one session |")
    w("|---|---|---|")
    for key, sql in [
        ("batch_from", "SELECT count(x) FROM snowflake_next_batch(1000000) x"),
        ("batch_select", "SELECT count(x) FROM (SELECT snowflake_next_batch(1000000) AS x) s"),
        ("batch_array", "SELECT cardinality(snowflake_next_batch_array(1000000))"),
    ]:
        r = get("batch", key, 1000000)
        if r:
            w(f"| `{sql}` | {fmt_rate(r)} | {ratio(r, s1)} |")
    w("")

    # 5. criterion
    crit = {k[1]: v for k, v in med.items() if k[0] == "criterion_ns"}
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
    w("**Targets of issue 5**")
    w("")
    w("| target | measured | met |")
    w("|---|---|---|")

    def target(text, value, ok):
        w(f"| {text} | {value} | {'yes' if ok else '**no**'} |")

    if s1 and b1 and c1:
        target("one session ≥ 1.8x bigserial", ratio(s1, b1), s1 / b1 >= 1.8)
        target("one session ≥ 1.3x CACHE 100", ratio(s1, c1), s1 / c1 >= 1.3)
    for c in (1, 16, 64):
        t, f = get("pgbench", "snowflake", c), get("pgbench", "select1", c)
        if t and f:
            target(f"one call per transaction ≥ 0.95x SELECT 1, {c} client{'s' if c > 1 else ''}",
                   ratio(t, f), t / f >= 0.95)
    si, ui = get("insert", "snowflake", rows), get("insert", "uuid", rows)
    sp = get("pkey_bytes", "snowflake", rows)
    if si and bi:
        target("bulk insert ≥ 1.0x bigserial", ratio(si, bi), si / bi >= 1.0)
        target("primary key the size of bigserial's", ratio(sp, bp), abs(sp / bp - 1) < 0.01)
        target("bulk insert ≥ 2x gen_random_uuid()", ratio(si, ui), si / ui >= 2.0)
    for key, where in [("batch_from", "in FROM"), ("batch_select", "in the select list"),
                       ("batch_array", "as an array")]:
        sb = get("batch", key, 1000000)
        if sb and s1:
            target(f"batch of 1,000,000 ≥ 3x one-session snowflake_next(), {where}", ratio(sb, s1), sb / s1 >= 3.0)
    s10 = get("one_session", "snowflake", 10000000)
    if s10 and s1:
        target("cost per ID at N = 10M within 10% of N = 1M",
               f"{s1 / s10:.2f}x the cost", s1 / s10 <= 1.10)
    st = get("one_session", "snowflake_throttled", 10000000)
    if st:
        target("throttled (max_clock_drift 10ms): never above the layout's 4,096,000 IDs/s",
               f"{fmt_rate(st)} IDs/s", st <= LAYOUT_LIMIT * 1.02)
        target("throttled (max_clock_drift 10ms): at least 95% of 4,096,000 IDs/s",
               f"{st / LAYOUT_LIMIT:.0%} of it", st >= LAYOUT_LIMIT * 0.95)
    w("")

    (docs / "benchmark.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))

    # chart
    fig, ax = plt.subplots(figsize=(8, 5))
    for g in ORDER:
        ys = [get("pgbench", g, c) for c in clients]
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
    ax.set_title(f"ID generators in PostgreSQL 15, {m['cores']} cores, {m['date']}")
    fig.tight_layout()
    fig.savefig(docs / "benchmark.png", dpi=110)


if __name__ == "__main__":
    main()
