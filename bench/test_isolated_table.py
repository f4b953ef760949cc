#!/usr/bin/env python3
"""Tests of bench/isolated_table.py: the green / private / two-streams rows
and the goal primary + isolated ≥ 0.9x two streams of one context. Run by
scripts/test.sh:
  python3 -m unittest discover -s bench -p 'test_*.py'
"""

import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from isolated_table import isolated_table  # noqa: E402


def replay_row(row, total, per, isolation=None, two=None):
    o = {"impl": "fc", "row": row, "kernels": 26, "replays_per_s": total, "per_context": per}
    if isolation:
        o["isolation"] = isolation
    if two:
        o["ratio_vs_2ctx_primary"] = total / two
    return o


def run_table(rows):
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
        path = f.name
    try:
        tally, missed = {"met": 0, "MISSED": 0, "n/a": 0}, []
        lines = isolated_table(path, tally, missed)
        return "\n".join(lines), tally, missed
    finally:
        os.unlink(path)


def rows(mixed, mixed_private, isolation="green"):
    two = 70000.0
    return [
        replay_row("ctx_replays_per_s_1ctx_primary", 40000.0, [40000.0]),
        replay_row("ctx_replays_per_s_2ctx_primary", two, [35000.0, 35000.0]),
        replay_row("ctx_replays_per_s_2ctx_mixed", mixed, [mixed / 2, mixed / 2], isolation, two),
        replay_row("ctx_replays_per_s_2ctx_mixed_private", mixed_private, [mixed_private / 2] * 2, "private", two),
    ]


class IsolatedTable(unittest.TestCase):
    def test_green_at_full_speed_meets_the_goal(self):
        text, tally, missed = run_table(rows(68000.0, 6400.0))
        self.assertIn("**green** context", text)
        self.assertIn("| 1 primary + 1 private (forced) | private |", text)
        self.assertIn("| 0.97x |", text)  # mixed vs two streams
        self.assertIn("| 0.09x |", text)  # forced private vs two streams
        self.assertEqual(tally["met"], 1)
        self.assertEqual(missed, [])
        self.assertIn("primary + isolated (green) ≥0.9x two streams of one context: **met**", text)

    def test_a_private_isolated_context_misses_it(self):
        text, tally, missed = run_table(rows(6400.0, 6400.0, isolation="private"))
        self.assertEqual(tally["MISSED"], 1)
        self.assertEqual(len(missed), 1)
        self.assertIn("MISSED (0.09x)", missed[0])
        self.assertIn("(private)", missed[0])

    def test_no_rows_is_not_measurable(self):
        text, tally, missed = run_table([])
        self.assertEqual(tally["n/a"], 1)
        self.assertEqual(missed, [])
        self.assertIn("no `fc-bench --isolated` rows", text)

    def test_the_ratio_is_computed_when_the_row_lacks_it(self):
        rs = rows(63500.0, 6400.0)
        del rs[2]["ratio_vs_2ctx_primary"]
        _, tally, _ = run_table(rs)
        self.assertEqual(tally["met"], 1)  # 63,500 / 70,000 = 0.907


if __name__ == "__main__":
    unittest.main()
