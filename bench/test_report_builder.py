#!/usr/bin/env python3
"""Tests of bench/report.py's graph-building goals (BUILDER_GOALS) from the
`fc-bench --steps` rows: the every-node update goal (≥1.5x faster than bare
re-capture + cuGraphExecUpdate) is counted both with the rig's launches
(`node_update_all`, "(PDL)" where the rig uses PDL) and with plain launches
(`node_update_all_plain`). Run by scripts/test.sh:
  python3 -m unittest discover -s bench -p 'test_*.py'
"""

import collections
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report import BUILDER_GOALS, builder_goal_lines, rig_launches  # noqa: E402


def pair(step, fc_us, bare_us, k=2600):
    return {(f"step_{step}_fc", k): {"median_us": fc_us}, (f"step_{step}_bare", k): {"median_us": bare_us}}


def probe(pdl):
    return {("probe_no_current_context", 0): {"median_us": None, "pdl": pdl}}


def rows(pdl=None):
    r = {**pair("build_instantiate", 90.0, 100.0), **pair("node_update_all", 400.0, 800.0),
         **pair("node_update_all_plain", 600.0, 800.0)}
    if pdl is not None:
        r.update(probe(pdl))
    return r


def line(lines, needle):
    found = [x for x in lines if needle in x]
    assert len(found) == 1, (needle, lines)
    return found[0]


class BuilderGoals(unittest.TestCase):
    def test_every_node_goal_in_both_modes(self):
        goals = {step: (kind, bound) for step, kind, bound, _ in BUILDER_GOALS}
        self.assertEqual(goals["node_update_all"], ("speedup", 1.5))
        self.assertEqual(goals["node_update_all_plain"], ("speedup", 1.5))

    def test_pdl_rig_says_pdl_and_plain(self):
        tally, missed = collections.Counter(), []
        lines = builder_goal_lines(rows(pdl=True), tally, missed)
        pdl = line(lines, "every node changed (PDL)")
        self.assertIn("2.00x faster (goal >= 1.5x): met", pdl)
        plain = line(lines, "every node changed (plain launches)")
        self.assertIn("1.33x faster (goal >= 1.5x): MISSED", plain)
        self.assertEqual(missed, ["graph building, K = 2600, node_update_all_plain: 1.33x faster (goal >= 1.5x)"])
        self.assertEqual(tally, {"met": 2, "MISSED": 1})

    def test_plain_rig_says_plain_for_both(self):
        lines = builder_goal_lines(rows(pdl=False))
        self.assertEqual(len([x for x in lines if "every node changed (plain launches)" in x]), 2)
        self.assertFalse(any("(PDL)" in x for x in lines), lines)

    def test_without_the_probe_the_mode_is_not_claimed(self):
        self.assertEqual(rig_launches({}), "the rig's launches, PDL where the device has it")
        lines = builder_goal_lines(rows())
        line(lines, "every node changed (the rig's launches, PDL where the device has it)")
        self.assertFalse(any("{launches}" in x for x in lines), lines)

    def test_runs_without_the_plain_row_count_only_the_others(self):
        r = rows(pdl=True)
        del r[("step_node_update_all_plain_fc", 2600)]
        tally = collections.Counter()
        lines = builder_goal_lines(r, tally)
        self.assertFalse(any("plain launches" in x for x in lines), lines)
        self.assertEqual(tally, {"met": 2})

    def test_block_by_block_ratio_is_shown_beside_the_verdict(self):
        r = rows(pdl=True)
        r[("step_node_update_all_plain_fc", 2600)]["paired_fc_over_bare"] = 0.625
        r[("step_node_update_all_plain_fc", 2600)]["paired_blocks"] = 6
        r[("step_build_instantiate_fc", 2600)]["paired_fc_over_bare"] = 0.97
        r[("step_build_instantiate_fc", 2600)]["paired_blocks"] = 6
        tally, missed = collections.Counter(), []
        lines = builder_goal_lines(r, tally, missed)
        plain = line(lines, "every node changed (plain launches)")
        self.assertIn("1.33x faster (goal >= 1.5x): MISSED (block by block: 1.60x faster over 6 block pairs)", plain)
        build = line(lines, "build node by node")
        self.assertIn("0.90x (goal <= 0.95x): met (block by block: 0.97x over 6 block pairs)", build)
        # The verdicts stay the medians'.
        self.assertEqual(tally, {"met": 2, "MISSED": 1})
        self.assertEqual(missed, ["graph building, K = 2600, node_update_all_plain: 1.33x faster (goal >= 1.5x)"])
        self.assertFalse(any("block by block" in x for x in lines if "(PDL)" in x), lines)


if __name__ == "__main__":
    unittest.main()
