#!/usr/bin/env python3
"""Tests of bench/interop_table.py: the loop table with the raw driver
columns and the scaling goal's text. Run by scripts/test.sh:
  python3 -m unittest discover -s bench -p 'test_*.py'
"""

import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from interop_table import interop_tables  # noqa: E402

GOAL = "2 GPUs ≥1.9x one GPU (median of per-round ratios)"


def loop_rows(impl, base, rnd, rate1, per):
    """The two rate rows one round of interop_bench prints for a loop."""
    total = sum(per)
    return [
        {"impl": impl, "row": f"{base}_1dev", "kernels": 4, "iters_per_s": rate1, "iters": 500, "round": rnd},
        {"impl": impl, "row": f"{base}_2dev", "kernels": 4, "iters_per_s": total, "iters": 500, "round": rnd,
         "per_device": per, "ratio_vs_1dev": round(total / rate1, 4)},
    ]


FC = "interop_nccl_replay_loop_per_s"
RAW = "interop_raw_nccl_replay_loop_per_s"
FC_ONLY = "interop_fc_replay_loop_per_s"


class InteropTableTest(unittest.TestCase):
    def render(self, objs, extra_lines=()):
        with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False, encoding="utf-8") as f:
            for o in objs:
                f.write(json.dumps(o) + "\n")
            for line in extra_lines:
                f.write(line + "\n")
            path = f.name
        self.addCleanup(os.unlink, path)
        tally = {"met": 0, "MISSED": 0, "n/a": 0}
        missed = []
        lines = interop_tables(path, tally, missed)
        return lines, tally, missed

    def loop_line(self, lines, what):
        hits = [line for line in lines if line.startswith(f"| {what} |")]
        self.assertEqual(len(hits), 1, lines)
        return hits[0]

    def cells(self, line):
        return [c.strip() for c in line.strip().strip("|").split("|")]

    def test_missed_with_raw_below_goal_names_raw_scaling(self):
        objs = (loop_rows("fc", FC, 1, 100000.0, [55000.0, 54000.0])      # 1.09
                + loop_rows("raw", RAW, 1, 110000.0, [59400.0, 59400.0])  # 1.08
                + loop_rows("fc", FC, 2, 100000.0, [56000.0, 55000.0])    # 1.11
                + loop_rows("raw", RAW, 2, 110000.0, [60000.0, 60000.0]))  # 1.0909
        lines, tally, missed = self.render(objs)
        line = self.loop_line(lines, "replay loop of the NCCL step graph (launch + sync)")
        c = self.cells(line)
        self.assertEqual(c[1], "100,000")
        self.assertEqual(c[2], "111,000 (56,000 + 55,000)")  # the best round's rate
        self.assertEqual(c[3], "1.09x (rounds 1.09, 1.11)")
        self.assertEqual(c[4], "110,000")
        self.assertEqual(c[5], "120,000 (60,000 + 60,000)")
        self.assertEqual(c[6], "1.08x (rounds 1.08, 1.09)")
        self.assertEqual(c[7], f"{GOAL}: MISSED (1.09x; raw driver + NCCL in the same run: 1.08x)")
        self.assertEqual(tally, {"met": 0, "MISSED": 1, "n/a": 0})
        self.assertEqual(missed, [f"{FC}_2dev: {GOAL}: MISSED (1.09x; raw driver + NCCL in the same run: 1.08x)"])

    def test_missed_with_raw_scaling_names_it_and_still_counts_as_missed(self):
        objs = loop_rows("fc", FC, 1, 100000.0, [55000.0, 55000.0]) + loop_rows("raw", RAW, 1, 100000.0,
                                                                                 [97000.0, 98000.0])
        lines, tally, missed = self.render(objs)
        c = self.cells(self.loop_line(lines, "replay loop of the NCCL step graph (launch + sync)"))
        self.assertEqual(c[6], "1.95x (rounds 1.95)")
        self.assertEqual(c[7], f"{GOAL}: MISSED (1.10x; raw driver + NCCL in the same run: 1.95x)")
        self.assertEqual(tally["MISSED"], 1)
        self.assertEqual(len(missed), 1)

    def test_met_goal_says_met_only(self):
        objs = loop_rows("fc", FC, 1, 100000.0, [96000.0, 96000.0]) + loop_rows("raw", RAW, 1, 100000.0,
                                                                                 [50000.0, 50000.0])
        lines, tally, missed = self.render(objs)
        c = self.cells(self.loop_line(lines, "replay loop of the NCCL step graph (launch + sync)"))
        self.assertEqual(c[7], f"{GOAL}: met")
        self.assertEqual(tally, {"met": 1, "MISSED": 0, "n/a": 0})
        self.assertEqual(missed, [])

    def test_without_raw_rows_columns_are_empty_and_goal_text_unchanged(self):
        objs = loop_rows("fc", FC, 1, 100000.0, [55000.0, 54000.0]) + loop_rows("fc", FC_ONLY, 1, 120000.0,
                                                                                [118000.0, 118000.0])
        lines, tally, _ = self.render(objs)
        c = self.cells(self.loop_line(lines, "replay loop of the NCCL step graph (launch + sync)"))
        self.assertEqual(c[4:7], ["—", "—", "—"])
        self.assertEqual(c[7], f"{GOAL}: MISSED (1.09x)")
        fc_only = self.cells(self.loop_line(lines, "replay loop of the same step without the all-reduce"))
        self.assertEqual(fc_only[3], "1.97x (rounds 1.97)")
        self.assertEqual(fc_only[4:], ["—", "—", "—", ""])  # no raw counterpart, no goal
        self.assertEqual(tally["MISSED"], 1)

    def test_skipped_raw_rows_show_why_and_leave_the_goal_alone(self):
        why = "built without cuda.h"
        objs = loop_rows("fc", FC, 1, 100000.0, [55000.0, 54000.0]) + [
            {"impl": "raw", "row": f"{RAW}_1dev", "kernels": 4, "skipped": why},
            {"impl": "raw", "row": f"{RAW}_2dev", "kernels": 4, "skipped": why},
        ]
        lines, _, _ = self.render(objs)
        c = self.cells(self.loop_line(lines, "replay loop of the NCCL step graph (launch + sync)"))
        self.assertEqual(c[4:7], [f"skipped ({why})", f"skipped ({why})", "—"])
        self.assertEqual(c[7], f"{GOAL}: MISSED (1.09x)")

    def test_raw_on_one_gpu_only(self):
        objs = (loop_rows("fc", FC, 1, 100000.0, [55000.0, 54000.0])[:1]
                + loop_rows("raw", RAW, 1, 110000.0, [1.0, 1.0])[:1]
                + [{"impl": "fc", "row": f"{FC}_2dev", "kernels": 4, "skipped": "needs 2 CUDA devices, 1 visible"},
                   {"impl": "raw", "row": f"{RAW}_2dev", "kernels": 4, "skipped": "needs 2 CUDA devices, 1 visible"}])
        lines, tally, _ = self.render(objs)
        c = self.cells(self.loop_line(lines, "replay loop of the NCCL step graph (launch + sync)"))
        self.assertEqual(c[4], "110,000")
        self.assertEqual(c[7], f"{GOAL}: n/a (no 2-GPU data)")
        self.assertEqual(tally["n/a"], 1)

    def test_every_loop_line_has_the_header_columns(self):
        objs = (loop_rows("fc", FC, 1, 100000.0, [55000.0, 54000.0]) + loop_rows("raw", RAW, 1, 1.0, [1.0, 1.0])
                + loop_rows("fc", FC_ONLY, 1, 1.0, [1.0, 1.0]))
        lines, _, _ = self.render(objs, extra_lines=["[interop-bench] progress, not JSON", "{broken"])
        start = next(i for i, line in enumerate(lines) if line.startswith("| loop |"))
        width = len(self.cells(lines[start]))
        self.assertEqual(width, 8)
        body = [line for line in lines[start + 2:] if line.startswith("|")]
        self.assertEqual(len(body), 2)
        for line in body:
            self.assertEqual(len(self.cells(line)), width, line)


if __name__ == "__main__":
    unittest.main()
