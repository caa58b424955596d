#!/usr/bin/env python3
"""The tables of bench/many_core.sh from its raw.csv: the mean of the
repetitions of each figure, ratios to the same run's floor.

    python3 bench/many_core_report.py RAW.csv SERVER...
"""
import csv
import sys
from collections import defaultdict


def fmt_rate(v):
    if v >= 1e6:
        return f"{v / 1e6:.2f}M"
    return f"{v / 1e3:.0f}k"


def main():
    raw, servers = sys.argv[1], sys.argv[2:]
    values = defaultdict(list)
    for row in csv.DictReader(open(raw)):
        if row["value"] in ("", None):
            continue
        key = (row["kind"], row["server"], row["generator"], int(row["n"]))
        values[key].append(float(row["value"]))
    mean = {k: sum(v) / len(v) for k, v in values.items()}
    first = servers[0]

    def columns(kind):
        # The floor and snowflake_next() of each server first, then the
        # others as they came.
        cols = [(s, g) for s in servers for g in ("SELECT 1 (floor)", "snowflake_next()")
                if any(k == kind and s2 == s and g2 == g for (k, s2, g2, _) in values)]
        for (k, s, g, _) in values:
            if k == kind and g != "snowflake_next()" and (s, g) not in cols:
                cols.append((s, g))
        return cols

    def label(s, g):
        return f"{g} [{s}]" if g in ("snowflake_next()", "SELECT 1 (floor)") and len(servers) > 1 else g

    for kind, title, unit in (
        ("one", "One call per transaction (pgbench -M prepared), tps; ratio to SELECT 1", "clients"),
        ("bulk", "Bulk: N sessions at once, each SELECT count(x) over the generator and generate_series, IDs/s in all; ratio to one session of the same generator", "sessions"),
    ):
        cols = columns(kind)
        ns = sorted({n for (k, _, _, n) in mean if k == kind})
        if not ns:
            continue
        print(f"\n### {title}\n")
        print(f"| {unit} | " + " | ".join(label(s, g) for s, g in cols) + " |")
        print("|---" * (len(cols) + 1) + "|")
        for n in ns:
            cells = []
            for s, g in cols:
                v = mean.get((kind, s, g, n))
                if v is None:
                    cells.append("")
                    continue
                if kind == "one":
                    # The floor of the same server, where it was measured.
                    floor = mean.get((kind, s, "SELECT 1 (floor)", n)) or mean.get((kind, first, "SELECT 1 (floor)", n))
                    ratio = f" ({v / floor:.2f})" if floor and g != "SELECT 1 (floor)" else ""
                else:
                    one = mean.get((kind, s, g, min(ns)))
                    ratio = f" ({v / one:.2f})" if one and n != min(ns) else ""
                cells.append(fmt_rate(v) + ratio)
            print(f"| {n} | " + " | ".join(cells) + " |")

    gens = [g for (k, s, g, n) in mean if k == "insert"]
    gens = list(dict.fromkeys(gens))
    if gens:
        ns = sorted({n for (k, _, _, n) in mean if k == "insert"})
        print("\n### Primary-key inserts (synchronous_commit = off), inserts/s; primary key bytes per row\n")
        print("| key | " + " | ".join(f"{n} clients" for n in ns) + " | key bytes per row |")
        print("|---" * (len(ns) + 2) + "|")
        for g in gens:
            cells = [fmt_rate(mean[("insert", first, g, n)]) if ("insert", first, g, n) in mean else "" for n in ns]
            kb = mean.get(("key_bytes", first, g, 0))
            print(f"| {g} | " + " | ".join(cells) + f" | {kb:.1f} |" if kb is not None else " | |")

    progs = list(dict.fromkeys(s for (k, s, g, n) in mean if k == "threads"))
    if progs:
        ns = sorted({n for (k, _, _, n) in mean if k == "threads"})
        print("\n### Pure core (bench/threads.rs), IDs/s in all; ns per call in a thread\n")
        print("| threads | " + " | ".join(progs) + " |")
        print("|---" * (len(progs) + 1) + "|")
        for n in ns:
            cells = []
            for p in progs:
                r, t = mean.get(("threads", p, "issue()", n)), mean.get(("thread_ns", p, "issue()", n))
                cells.append(f"{fmt_rate(r)}; {t:.0f} ns" if r is not None else "")
            print(f"| {n} | " + " | ".join(cells) + " |")


main()
