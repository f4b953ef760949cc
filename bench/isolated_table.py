#!/usr/bin/env python3
"""The markdown table of `fc-bench --isolated` (bench/src/isolated.rs): an
isolated context (green where the driver has them, else private) next to a
primary one, in one process, two contexts' work on one GPU (issue 9), and a
forced private context beside them (issue 18), with the goal: primary +
isolated replays ≥ 0.9x two streams of one context.

  python3 bench/isolated_table.py bench-isolated.jsonl     # prints the table

bench/report.py can add it to the report with
  from isolated_table import isolated_table
  L.extend(isolated_table(args.isolated))
(an `--isolated JSONL` argument, as `--steps`).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from jsonrows import json_rows  # noqa: E402
from numfmt import fmt_num as fmt  # noqa: E402

METRICS = [
    ("graph_launch_sync", "graph launch + sync"),
    ("eager_enqueue_per_kernel", "eager enqueue, per kernel (host)"),
    ("capture_instantiate", "capture + instantiate (host)"),
]
REPLAYS = [
    ("ctx_replays_per_s_1ctx_primary", "1 primary context"),
    ("ctx_replays_per_s_1ctx_isolated", "1 isolated context"),
    ("ctx_replays_per_s_2ctx_primary", "2 primary contexts (2 streams of one CUDA context)"),
    ("ctx_replays_per_s_2ctx_isolated", "2 isolated contexts"),
    ("ctx_replays_per_s_2ctx_mixed", "1 primary + 1 isolated (engine beside PyTorch)"),
    ("ctx_replays_per_s_1ctx_private", "1 private context (forced)"),
    ("ctx_replays_per_s_2ctx_mixed_private", "1 primary + 1 private (forced)"),
]
TWO_STREAMS = "ctx_replays_per_s_2ctx_primary"
# (row, bound on its replays/s over two streams of one context's)
GOALS = [("ctx_replays_per_s_2ctx_mixed", 0.9)]


def load(path):
    """{row: obj} of the JSON rows in path (other lines ignored); error text or None."""
    rows = {}
    if not path:
        return rows, "no file given"
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for _, obj in json_rows(f):
                if obj is not None:
                    rows[str(obj["row"])] = obj
    except OSError as e:
        return rows, str(e)
    return rows, None




def timing(obj):
    if not obj:
        return "—"
    return f"{fmt(obj.get('median_us'))} ({fmt(obj.get('p10_us'))}–{fmt(obj.get('p90_us'))})"


def vs_two_streams(rows, row):
    """Replays/s of `row` over two streams of one context's, or None."""
    o, two = rows.get(row) or {}, rows.get(TWO_STREAMS) or {}
    r = o.get("ratio_vs_2ctx_primary")
    if isinstance(r, (int, float)):
        return float(r)
    a, b = o.get("replays_per_s"), two.get("replays_per_s")
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b > 0:
        return a / b
    return None


def isolation_of(rows, row):
    """"green" or "private" as the row says, else "?"."""
    return str((rows.get(row) or {}).get("isolation") or "?")


def isolated_goals(rows):
    """(text, verdict) of each goal, verdict met / MISSED (x) / n/a (why)."""
    out = []
    for row, bound in GOALS:
        text = f"primary + isolated ({isolation_of(rows, row)}) ≥{bound:.1f}x two streams of one context"
        r = vs_two_streams(rows, row)
        if r is None:
            out.append((text, "n/a (no rows)"))
        else:
            out.append((text, "met" if r >= bound else f"MISSED ({r:.2f}x)"))
    return out


def isolated_table(path, tally=None, missed=None):
    """Markdown lines of the isolated-vs-primary table; counts its goals
    into `tally` / `missed` (the report's goal tally) when given."""
    rows, err = load(path)
    head = ["", "## Isolated vs primary context (same process, alternating)", ""]
    goals = isolated_goals(rows)
    for text, verdict in goals:
        v = verdict.split(" ")[0]
        if tally is not None:
            tally[v if v in tally else "n/a"] += 1
        if missed is not None and v == "MISSED":
            missed.append(f"isolated contexts: {text}: {verdict}")
    if not rows:
        return head + [f"(no `fc-bench --isolated` rows: {err or 'empty'})"]
    k = next((o.get("kernels") for o in rows.values() if o.get("kernels")), "?")
    iso = isolation_of(rows, "ctx_replays_per_s_2ctx_mixed")
    out = head + [f"The isolated context of this run is a **{iso}** context (`Context::isolated`: green where the "
                  "driver has them, CUDA 12.4+; the private rows force `cuCtxCreate`).", "",
        f"| step (K={k}) | primary median (p10–p90) µs | isolated median (p10–p90) µs | isolated/primary |",
        "|---|---:|---:|---:|",
    ]
    for metric, text in METRICS:
        p, i = rows.get(f"ctx_{metric}_primary"), rows.get(f"ctx_{metric}_isolated")
        r = (i or {}).get("ratio_vs_primary")
        out.append(f"| {text} | {timing(p)} | {timing(i)} | {'—' if r is None else f'{r:.2f}x'} |")
    for row, what in [("ctx_isolated_memory_bytes", "An isolated"), ("ctx_private_memory_bytes", "A private")]:
        mem = rows.get(row)
        if mem and isinstance(mem.get("bytes"), (int, float)):
            out += ["", f"{what} context ({mem.get('isolation', '?')}) takes {mem['bytes'] / (1 << 20):.1f} MiB of "
                    f"device memory (free memory before and after creating it, with its stream, built-in module "
                    f"and {mem.get('buffer_bytes', '?')} bytes of buffers)."]
    out += ["", "| work on one GPU, one thread per context, launch + sync of the K-kernel graph "
            "| isolation | replays/s (total) | per context | vs one context of that kind "
            "| vs two streams of one context |", "|---|---|---:|---|---:|---:|"]
    for row, text in REPLAYS:
        o = rows.get(row)
        if not o:
            out.append(f"| {text} | | — | | | |")
            continue
        per = " + ".join(fmt(v) for v in o.get("per_context", []))
        r = o.get("ratio_vs_1ctx")
        t = vs_two_streams(rows, row) if row != TWO_STREAMS else 1.0
        out.append(f"| {text} | {o.get('isolation', 'none')} | {fmt(o.get('replays_per_s'))}/s | {per} "
                   f"| {'—' if r is None else f'{r:.2f}x'} | {'—' if t is None else f'{t:.2f}x'} |")
    out += [""] + [f"Goal: {text}: **{verdict}**." for text, verdict in goals]
    return out


def main(argv):
    if len(argv) != 2:
        print(__doc__)
        return 2
    print("\n".join(isolated_table(argv[1])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
