#!/usr/bin/env python3
"""Tests of bench/report.py's host-bound goals: where `fc-bench --steps`
has the same-process A/B rows (`step_table_<row>_<pdl|plain>_{fc,bare}`),
the ≤1.10x goals of capture_instantiate and recapture_update read them,
with the separate processes' ratio shown beside the verdict; without them
the goals read the separate processes' best rounds. Run by scripts/test.sh:
  python3 -m unittest discover -s bench -p 'test_*.py'
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report import pdl_goals  # noqa: E402


def timing(us, pdl=None):
    o = {"median_us": us}
    if pdl is not None:
        o["pdl"] = pdl
    return o


def steps(row, mode, fc_us, bare_us, k=260):
    return {
        (f"step_table_{row}_{mode}_fc", k): timing(fc_us),
        (f"step_table_{row}_{mode}_bare", k): timing(bare_us),
    }


class HostBoundGoals(unittest.TestCase):
    # Separate processes: fc 1.13x raw in both modes (a slow phase).
    FC_PDL, FC_PLAIN, RAW_PLAIN, RAW_PDL = timing(113.0, True), timing(113.0), timing(100.0), timing(100.0)

    def goals(self, step_rows, row="recapture_update"):
        return pdl_goals(row, 260, self.FC_PDL, self.FC_PLAIN, self.RAW_PLAIN, self.RAW_PDL, step_rows)

    def test_without_ab_rows_the_separate_processes_decide(self):
        goals = self.goals({})
        self.assertEqual([v for _, v in goals], ["MISSED (1.13x)", "MISSED (1.13x)"])
        self.assertNotIn("same process", goals[0][0])

    def test_ab_rows_decide_and_the_cross_process_ratio_is_shown(self):
        rows = {**steps("recapture_update", "pdl", 104.0, 100.0), **steps("recapture_update", "plain", 112.0, 100.0)}
        (pdl_text, pdl_verdict), (plain_text, plain_verdict) = self.goals(rows)
        self.assertEqual(pdl_verdict, "met")
        self.assertIn("same process A/B 1.04x", pdl_text)
        self.assertIn("separate processes, best rounds: 1.13x", pdl_text)
        # Each mode reads its own A/B rows: a real 1.12x is still missed.
        self.assertEqual(plain_verdict, "MISSED (1.12x)")
        self.assertIn("same process A/B 1.12x", plain_text)

    def test_ab_rows_of_another_row_or_k_are_not_used(self):
        rows = {**steps("capture_instantiate", "pdl", 100.0, 100.0), **steps("recapture_update", "pdl", 100, 100, k=26)}
        self.assertEqual([v for _, v in self.goals(rows)], ["MISSED (1.13x)", "MISSED (1.13x)"])

    def test_gpu_bound_goals_ignore_ab_rows(self):
        rows = steps("graph_launch_sync", "pdl", 100.0, 100.0)
        goals = pdl_goals("graph_launch_sync", 260, timing(120.0, True), None, timing(130.0), timing(100.0), rows)
        self.assertIn(("fc PDL ≤1.05x raw PDL", "MISSED (1.20x)"), goals)


if __name__ == "__main__":
    unittest.main()
