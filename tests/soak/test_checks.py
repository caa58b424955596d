#!/usr/bin/env python3
"""The soak's own checks, on made-up timelines (no server needed): a check
that cannot fail would pass every soak. Run by tests/integration/soak.sh
before the soak; `python3 tests/soak/test_checks.py` alone."""

import os
import sys
import types
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import soak  # noqa: E402


def writer(name, commits, started=0.0, retired=None):
    w = types.SimpleNamespace(cluster=types.SimpleNamespace(name=name), started_at=started,
                              ok_times=list(commits), retired_at=retired, error_times=[])
    w.errors_between = lambda a, b, n=3: "no error seen"
    return w


def fault(kind, start, heal, touched, error=None):
    f = {"kind": kind, "started": start, "target": "registry" if kind.endswith("registry") else touched[0],
         "name": touched[0]}
    if error:
        f["error"] = error
        f["failed_at"] = heal
    return (kind, "x", heal, [(name, None) for name in touched], f)


def run(writers, faults, ended):
    fleet = types.SimpleNamespace(all_writers=writers, ended=ended)
    nemesis = types.SimpleNamespace(done=[f for f in faults if "error" not in f[4]],
                                    schedule=[f[4] for f in faults], started=0.0)
    return soak.outages(fleet, nemesis)


def steady(start, end, step=0.5):
    return [start + i * step for i in range(int((end - start) / step) + 1)]


class Outages(unittest.TestCase):
    def test_wait_within_bound(self):
        # Killed at 10, back at 11, first commit 3 s later.
        problems, worst, _ = run([writer("n1", steady(0, 10) + steady(14, 40))],
                                 [fault("kill_server", 10, 11, ["n1"])], 40)
        self.assertEqual(problems, [])
        self.assertAlmostEqual(worst["kill_server"][0], 3.0)

    def test_wait_over_bound(self):
        problems, _, _ = run([writer("n1", steady(0, 10) + steady(30, 40))],
                             [fault("kill_registry", 10, 11, ["n1"])], 40)
        self.assertEqual(len(problems), 1)
        self.assertIn("after kill_registry, n1 could not issue for 19.0 s", problems[0])

    def test_later_fault_does_not_hide_an_earlier_wait(self):
        # The registry is back at 11; n1 commits nothing until a pause of
        # its own starts at 25 (14 s after the heal: over the bound of 10).
        problems, _, _ = run([writer("n1", steady(0, 10) + steady(32, 40))],
                             [fault("kill_registry", 10, 11, ["n1"]),
                              fault("stop_server", 25, 30, ["n1"])], 40)
        self.assertEqual(len(problems), 1)
        self.assertIn("after kill_registry, n1 could not issue for 14.0 s", problems[0])

    def test_later_fault_takes_over_the_wait(self):
        # The pause starts 4 s after the registry's heal: the rest of the
        # gap is owed to the pause (back 2 s after its heal).
        problems, worst, _ = run([writer("n1", steady(0, 10) + steady(32, 40))],
                                 [fault("kill_registry", 10, 11, ["n1"]),
                                  fault("stop_server", 15, 30, ["n1"])], 40)
        self.assertEqual(problems, [])
        self.assertAlmostEqual(worst["stop_server"][0], 2.0)
        self.assertAlmostEqual(worst["kill_registry"][0], 4.0)

    def test_bystander_stall(self):
        # n2 stops for 9 s while the only fault is on n1.
        problems, _, stalls = run([writer("n1", steady(0, 40)), writer("n2", steady(0, 20) + steady(29, 40))],
                                  [fault("kill_server", 10, 11, ["n1"])], 40)
        self.assertEqual(len(problems), 1)
        self.assertIn("n2 could not issue for 9.0 s (20 s into the run) while no fault touched it", problems[0])
        self.assertEqual(stalls[0][1], "n2")

    def test_stall_inside_a_fault_is_not_a_bystander(self):
        problems, _, stalls = run([writer("n2", steady(0, 20) + steady(29, 40))],
                                  [fault("stop_server", 19, 28, ["n2"])], 40)
        self.assertEqual(problems, [])
        self.assertEqual(stalls, [])

    def test_a_server_that_never_came_back(self):
        # Still in the fleet at the end, silent for its last 15 s.
        problems, _, _ = run([writer("n3", steady(0, 25))], [], 40)
        self.assertEqual(len(problems), 1)
        self.assertIn("n3 could not issue for 15.0 s", problems[0])

    def test_a_retired_writer_is_not_waited_for(self):
        # The standby's writer stopped when it lost the promotion: the 20 s
        # after are not a wait.
        problems, _, _ = run([writer("f1s", steady(5, 20), started=5, retired=20.3)], [], 40)
        self.assertEqual(problems, [])
        problems, _, _ = run([writer("f1s", steady(5, 20), started=5)], [], 40)
        self.assertEqual(len(problems), 1)

    def test_a_failed_fault_covers_its_own_server_only(self):
        # A copy of n1 failed at 16 s: n1's silence up to 30 s is within
        # the copy's bound; n4's from 20 s on is not excused by it.
        problems, _, _ = run([writer("n1", steady(0, 15) + steady(30, 40)), writer("n4", steady(0, 20))],
                             [fault("copy", 15, 16, ["n1"], error="pg_basebackup failed")], 40)
        self.assertEqual(len(problems), 1)
        self.assertIn("n4 could not issue for 20.0 s", problems[0])

    def test_copies_are_left_out(self):
        problems, _, _ = run([writer("copy3", steady(0, 5))], [], 40)
        self.assertEqual(problems, [])


class ClientBatches(unittest.TestCase):
    """range_violations(): an ID inside a batch a client kept without rows
    is an ID issued twice (3 node bits, 12 sequence bits: node 7's IDs)."""

    @staticmethod
    def node_of(v):
        return (v >> 12) & 7

    @staticmethod
    def id_at(ms, node, seq=0):
        return (ms << 15) | (node << 12) | seq

    def test_an_id_inside_a_batch_of_its_node(self):
        batch = [(self.id_at(100, 7), self.id_at(200, 7, 4095), "f1")]
        found = soak.range_violations(batch, [(self.id_at(150, 7, 3), "f1s")], self.node_of)
        self.assertEqual(len(found), 1)
        self.assertIn("recorded by f1s lies in the batch", found[0])

    def test_ids_outside_or_of_another_node(self):
        batch = [(self.id_at(100, 7), self.id_at(200, 7, 4095), "f1")]
        ids = [(self.id_at(99, 7, 4095), "f1"), (self.id_at(201, 7), "f1s"), (self.id_at(150, 3), "n3")]
        self.assertEqual(soak.range_violations(batch, ids, self.node_of), [])

    def test_overlapping_batches(self):
        a = (self.id_at(100, 7), self.id_at(200, 7, 4095), "f1")
        b = (self.id_at(200, 7), self.id_at(300, 7), "f1s")
        c = (self.id_at(150, 2), self.id_at(160, 2), "n2")
        self.assertEqual(len(soak.range_violations([b], [], self.node_of, [a])), 1)
        self.assertEqual(len(soak.range_violations([a, b], [], self.node_of)), 1)
        self.assertEqual(soak.range_violations([c], [], self.node_of, [a]), [])


if __name__ == "__main__":
    unittest.main(verbosity=1)
