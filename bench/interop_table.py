#!/usr/bin/env python3
"""The markdown tables of bench/interop/interop_bench.c (issue 10): cuBLAS
and NCCL work inside fc graphs against the same work queued eagerly, the
overlap gain of a cuBLAS GEMM on a lane beside fc kernels on another, and
the scaling of replay loops from one GPU to two, next to the same NCCL loop
on the bare driver (the interop_raw_* rows) where the benchmark has one.

bench/report.py adds them with `--interop JSONL`; alone:
  python3 bench/interop_table.py bench-interop.jsonl
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from jsonrows import json_rows  # noqa: E402
from numfmt import fmt_num as fmt  # noqa: E402

# (eager row, replay row, what)
PAIRS = [
    ("interop_cublas_eager_sync", "interop_cublas_replay_sync", "fc_mul + cuBLAS SGEMM (256x128x64) + fc_add, 1 GPU"),
    ("interop_nccl_eager_sync_1dev", "interop_nccl_replay_sync_1dev",
     "3 fc kernels + ncclAllReduce (4096 floats), 1-rank communicator"),
    ("interop_nccl_eager_sync_2dev", "interop_nccl_replay_sync_2dev",
     "the same on 2 GPUs, 2-rank communicator, one thread each"),
]
# (2-device rate row, the raw driver's 2-device row of the same loop or None,
#  what, scaling goal or None)
LOOPS = [
    ("interop_nccl_replay_loop_per_s_2dev", "interop_raw_nccl_replay_loop_per_s_2dev",
     "replay loop of the NCCL step graph (launch + sync)", 1.9),
    ("interop_fc_replay_loop_per_s_2dev", None, "replay loop of the same step without the all-reduce", None),
]
# (lanes row, one-lane row, what): the overlap gain of a cuBLAS GEMM on a lane
# beside fc kernels on another, one-lane median / lanes median.
LANES = ("interop_cublas_lanes_replay_sync", "interop_cublas_one_lane_replay_sync",
         "cuBLAS GEMM on lane 1 beside 26 kernels on lane 0")
LANES_DECODE = ("interop_cublas_lanes_decode_replay_sync", "interop_cublas_one_lane_decode_replay_sync",
                "cuBLAS GEMM of a decode step (4096 x 16 x 4096) on lane 1 beside 26 kernels on lane 0")
LANE_SETS = (LANES, LANES_DECODE)
LANES_TEXT = "- lanes: {what}: {gain:.2f}x faster than one lane"
# Per-round ratio fields a row may carry (collected over rounds by load()).
RATIO_FIELDS = ("ratio_vs_1dev", "gain_vs_one_lane")
SCALING_GOAL_TEXT = "2 GPUs ≥{:.1f}x one GPU (median of per-round ratios)"
RAW_SAME_RUN_TEXT = "raw driver + NCCL in the same run: {:.2f}x"


def load(path):
    """({row: best obj}, {row: [per-round ratios]}, error or None): the
    lowest median or the highest rate over rounds, as bench/report.py does."""
    rows, ratios = {}, {}
    if not path:
        return rows, ratios, "no file given"
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for _, obj in json_rows(f):
                if obj is None:
                    continue
                row = str(obj["row"])
                for field in RATIO_FIELDS:
                    if isinstance(obj.get(field), (int, float)) and not isinstance(obj.get(field), bool):
                        ratios.setdefault(row, []).append(float(obj[field]))
                old = rows.get(row)
                if old is None or better(obj, old):
                    rows[row] = obj
    except OSError as e:
        return rows, ratios, str(e)
    return rows, ratios, None


def better(new, old):
    # A failed check ("error") in any round is kept, whatever the others gave.
    if "error" in old:
        return False
    if "error" in new:
        return True
    if "skipped" in old and "skipped" not in new:
        return True
    for field, lower in (("median_us", True), ("iters_per_s", False)):
        a, b = new.get(field), old.get(field)
        if isinstance(a, (int, float)) and isinstance(b, (int, float)):
            return a < b if lower else a > b
    return False




def timing(obj):
    if obj is None:
        return "—"
    if "skipped" in obj:
        return f"skipped ({obj['skipped']})"
    return f"{fmt(obj.get('median_us'))} ({fmt(obj.get('p10_us'))}–{fmt(obj.get('p90_us'))})"


def median(xs):
    xs = sorted(xs)
    return xs[(len(xs) - 1) // 2] if xs else None


def rate_cells(rows, row2):
    """(1 GPU /s, 2 GPUs /s (per GPU)) cells of a loop's rate rows."""
    one, two = rows.get(row2.replace("_2dev", "_1dev")), rows.get(row2)
    per = (two or {}).get("per_device") or []
    two_txt = "—" if two is None else (f"skipped ({two['skipped']})" if "skipped" in two else
                                       f"{fmt(two.get('iters_per_s'))} ({' + '.join(fmt(p) for p in per)})")
    one_txt = "—" if one is None else (f"skipped ({one['skipped']})" if "skipped" in one else
                                       fmt(one.get("iters_per_s")))
    return one_txt, two_txt


def ratio_cell(ratios, row2):
    """(median of the per-round 2-GPU / 1-GPU ratios or None, its cell)."""
    r = median(ratios.get(row2, []))
    rounds = ", ".join(f"{x:.2f}" for x in sorted(ratios.get(row2, [])))
    return r, f"{'—' if r is None else f'{r:.2f}x'}{f' (rounds {rounds})' if rounds else ''}"


def scaling_verdict(r, goal, raw_r):
    """(head: met / MISSED / n/a, goal text) of a 2-GPU / 1-GPU median `r`
    against `goal`; a miss names the raw driver's median `raw_r` of the same
    run when there is one (below the goal too: NCCL/driver-limited)."""
    text = SCALING_GOAL_TEXT.format(goal)
    if r is None:
        return "n/a", f"{text}: n/a (no 2-GPU data)"
    if r >= goal:
        return "met", f"{text}: met"
    raw = "" if raw_r is None else "; " + RAW_SAME_RUN_TEXT.format(raw_r)
    return "MISSED", f"{text}: MISSED ({r:.2f}x{raw})"


def lanes_line(rows, ratios, spec=LANES):
    """The overlap-gain line of the lanes rows `spec` (LANE_SETS), or None
    when neither ran: the median of the per-round gains (each round
    alternates the two graphs) where the rows carry them, else the
    best-round medians' ratio."""
    lanes_row, one_row, what = spec
    lanes, one = rows.get(lanes_row), rows.get(one_row)
    if lanes is None and one is None:
        return None
    head = f"- lanes: {what}: "
    for obj in (lanes, one):
        if obj is not None and "error" in obj:
            return head + f"FAILED (error: {obj['error']})"
    for obj in (lanes, one):
        if obj is None:
            return head + "n/a (missing row)"
        if "skipped" in obj:
            return head + f"n/a (skipped: {obj['skipped']})"
    lv, ov = lanes.get("median_us"), one.get("median_us")
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in (lv, ov)):
        return head + "n/a (no medians)"
    gains = sorted(ratios.get(lanes_row, []))
    if gains:
        gain = median(gains)
        how = f"median of rounds {', '.join(f'{g:.2f}' for g in gains)}"
    else:
        gain = ov / lv
        how = "ratio of the best rounds' medians"
    return (LANES_TEXT.format(what=what, gain=gain)
            + f" ({how}; launch + sync, best rounds' medians: one lane {fmt(ov)} µs, lanes {fmt(lv)} µs)")


def interop_tables(path, tally=None, missed=None):
    """Markdown lines; counts the scaling goal into `tally` / `missed` (the
    report's goal tally) when given."""
    rows, ratios, err = load(path)
    out = ["", "## cuBLAS and NCCL inside fc graphs (issue 10)", ""]
    if not rows:
        return out + [f"(no interop rows: {err or 'empty'})"]
    out += ["| work | eager + sync µs, median (p10–p90) | replay + sync µs | replay / eager |",
            "|---|---:|---:|---:|"]
    for eager, replay, what in PAIRS:
        e, r = rows.get(eager), rows.get(replay)
        if e is None and r is None:
            continue
        ev = (e or {}).get("median_us")
        rv = (r or {}).get("median_us")
        rat = f"{rv / ev:.2f}x" if isinstance(ev, (int, float)) and isinstance(rv, (int, float)) and ev else "—"
        out.append(f"| {what} | {timing(e)} | {timing(r)} | {rat} |")
    lane_lines = [line for line in (lanes_line(rows, ratios, spec) for spec in LANE_SETS) if line is not None]
    if lane_lines:
        out += ["", *lane_lines]
    out += ["", "| loop | 1 GPU /s | 2 GPUs /s (per GPU) | 2 GPUs / 1 GPU, median of rounds "
            "| raw driver: 1 GPU /s | raw: 2 GPUs /s (per GPU) | raw: 2 GPUs / 1 GPU | goal |",
            "|---|---:|---:|---:|---:|---:|---:|---|"]
    for row2, raw2, what, goal in LOOPS:
        if rows.get(row2.replace("_2dev", "_1dev")) is None and rows.get(row2) is None:
            continue
        one_txt, two_txt = rate_cells(rows, row2)
        r, r_txt = ratio_cell(ratios, row2)
        raw_r, raw_cells = None, ["—", "—", "—"]
        if raw2 is not None and (rows.get(raw2.replace("_2dev", "_1dev")) is not None or rows.get(raw2) is not None):
            raw_r, raw_r_txt = ratio_cell(ratios, raw2)
            raw_cells = [*rate_cells(rows, raw2), raw_r_txt]
        verdict = ""
        if goal is not None:
            head, verdict = scaling_verdict(r, goal, raw_r)
            if tally is not None:
                tally[head] += 1
            if missed is not None and head == "MISSED":
                missed.append(f"{row2}: {verdict}")
        out.append(f"| {what} | {one_txt} | {two_txt} | {r_txt} | {' | '.join(raw_cells)} | {verdict} |")
    out += ["", "Every time includes `fc_sync_ctx`. The NCCL 1-GPU baseline replays the same captured step on a "
            "1-rank communicator (its all-reduce is a device-local copy), so the per-GPU work is the same; the "
            "2-GPU loop adds the NVLink exchange and the wait for the peer. The raw driver columns run the same "
            "NCCL step loop without fc-graph, in the same process and rounds, right after the fc loop: the "
            "devices' primary contexts, a non-blocking stream each, the same PTX kernels "
            "(`kernels/elementwise.ptx`, plain `cuLaunchKernel`; fc-graph's built-ins use PDL where the device "
            "has it), "
            "the step captured with `cuStreamBeginCapture` around `ncclAllReduce` on its own 1-rank and "
            "2-rank communicators, then `cuGraphLaunch` + `cuStreamSynchronize`; a 2-GPU / 1-GPU ratio below "
            "the goal there too means the scaling is NCCL/driver-limited, not fc-graph's. cuBLAS and NCCL are "
            "loaded at run time from PyTorch's NVIDIA wheels; `NCCL_NVLS_ENABLE=0`."]
    return out


if __name__ == "__main__":
    print("\n".join(interop_tables(sys.argv[1] if len(sys.argv) > 1 else None)))
