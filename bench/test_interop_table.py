#!/usr/bin/env python3
"""Tests of bench/interop_table.py: the loop table with the raw driver
columns, the scaling goal's text and the lanes overlap-gain line. Run by
scripts/test.sh:
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


def lanes_rows(rnd, lanes_us, one_us, gain=True):
    """The two timing rows one round of interop_bench prints for the lanes
    graphs (the lanes row with this round's gain unless gain is False)."""
    lanes = {"impl": "fc", "row": "interop_cublas_lanes_replay_sync", "kernels": 27, "median_us": lanes_us,
             "p10_us": lanes_us - 1, "p90_us": lanes_us + 1, "n": 300, "round": rnd}
    if gain:
        lanes["gain_vs_one_lane"] = round(one_us / lanes_us, 4)
    one = {"impl": "fc", "row": "interop_cublas_one_lane_replay_sync", "kernels": 27, "median_us": one_us,
           "p10_us": one_us - 1, "p90_us": one_us + 1, "n": 300, "round": rnd}
    return [lanes, one]


LANES_HEAD = "- lanes: cuBLAS GEMM on lane 1 beside 26 kernels on lane 0: "
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

    def lanes_lines(self, lines):
        return [line for line in lines if line.startswith("- lanes:")]

    def test_lanes_gain_is_the_median_of_the_rounds(self):
        objs = lanes_rows(1, 50.0, 80.0) + lanes_rows(2, 48.0, 81.0) + lanes_rows(3, 52.0, 78.0)
        lines, tally, missed = self.render(objs)
        hits = self.lanes_lines(lines)
        self.assertEqual(len(hits), 1, lines)
        # per-round gains 1.60, 1.6875, 1.50: the median is 1.60
        want = LANES_HEAD + "1.60x faster than one lane (median of rounds 1.50, 1.60, 1.69;"
        self.assertTrue(hits[0].startswith(want), hits[0])
        self.assertTrue(hits[0].endswith("best rounds' medians: one lane 78.00 µs, lanes 48.00 µs)"), hits[0])
        self.assertEqual(tally, {"met": 0, "MISSED": 0, "n/a": 0})  # not a goal
        self.assertEqual(missed, [])
        # the line follows the eager/replay table, after a blank line
        i = lines.index(hits[0])
        self.assertEqual(lines[i - 1], "")

    def test_both_gemm_shapes_get_a_line_each(self):
        decode = [dict(o, row=o["row"].replace("_replay_sync", "_decode_replay_sync")) for o in lanes_rows(1, 30.0, 45.0)]
        lines, _, _ = self.render(lanes_rows(1, 50.0, 80.0) + decode)
        hits = self.lanes_lines(lines)
        self.assertEqual(len(hits), 2, lines)
        self.assertTrue(hits[0].startswith(LANES_HEAD + "1.60x"), hits[0])
        self.assertTrue(hits[1].startswith("- lanes: cuBLAS GEMM of a decode step (4096 x 16 x 4096) on lane 1 beside "
                                           "26 kernels on lane 0: 1.50x faster than one lane"), hits[1])

    def test_lanes_gain_without_per_round_gains_uses_the_best_medians(self):
        lines, _, _ = self.render(lanes_rows(1, 40.0, 60.0, gain=False))
        self.assertEqual(self.lanes_lines(lines),
                         [LANES_HEAD + "1.50x faster than one lane (ratio of the best rounds' medians; launch + sync, "
                          "best rounds' medians: one lane 60.00 µs, lanes 40.00 µs)"])

    def test_lanes_skipped_and_absent(self):
        why = "no libcublas"
        objs = [{"impl": "fc", "row": "interop_cublas_lanes_replay_sync", "kernels": 27, "skipped": why},
                {"impl": "fc", "row": "interop_cublas_one_lane_replay_sync", "kernels": 27, "skipped": why}]
        lines, _, _ = self.render(objs)
        self.assertEqual(self.lanes_lines(lines), [LANES_HEAD + f"n/a (skipped: {why})"])
        lines, _, _ = self.render(loop_rows("fc", FC, 1, 100000.0, [55000.0, 54000.0]))
        self.assertEqual(self.lanes_lines(lines), [])

    def test_lanes_error_in_any_round_shows_failed(self):
        why = "C differs between the graphs at [5]: lanes 1, one lane 2"
        err = [{"impl": "fc", "row": r, "kernels": 27, "skipped": f"error: {why}", "error": why}
               for r in ("interop_cublas_lanes_replay_sync", "interop_cublas_one_lane_replay_sync")]
        for objs in (lanes_rows(1, 50.0, 80.0) + err, err + lanes_rows(2, 50.0, 80.0)):
            lines, _, _ = self.render(objs)
            self.assertEqual(self.lanes_lines(lines), [LANES_HEAD + f"FAILED (error: {why})"])


if __name__ == "__main__":
    unittest.main()
