#!/usr/bin/env python3
"""The markdown table of `fc-bench --isolated` (bench/src/isolated.rs): an
isolated context next to a primary one, in one process, and two contexts'
work on one GPU (issue 9).

  python3 bench/isolated_table.py bench-isolated.jsonl     # prints the table

bench/report.py can add it to the report with
  from isolated_table import isolated_table
  L.extend(isolated_table(args.isolated))
(an `--isolated JSONL` argument, as `--steps`).
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
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
    ("ctx_replays_per_s_2ctx_isolated", "2 isolated contexts (2 CUDA contexts)"),
    ("ctx_replays_per_s_2ctx_mixed", "1 primary + 1 isolated (engine beside PyTorch)"),
]


def load(path):
    """{row: obj} of the JSON rows in path (other lines ignored); error text or None."""
    rows = {}
    if not path:
        return rows, "no file given"
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                line = line.strip()
                if not line.startswith("{"):
                    continue
                try:
                    obj = json.loads(line)
                except ValueError:
                    continue
                if isinstance(obj, dict) and "row" in obj:
                    rows[str(obj["row"])] = obj
    except OSError as e:
        return rows, str(e)
    return rows, None




def timing(obj):
    if not obj:
        return "—"
    return f"{fmt(obj.get('median_us'))} ({fmt(obj.get('p10_us'))}–{fmt(obj.get('p90_us'))})"


def isolated_table(path):
    """Markdown lines of the isolated-vs-primary table."""
    rows, err = load(path)
    head = ["", "## Isolated vs primary context (same process, alternating)", ""]
    if not rows:
        return head + [f"(no `fc-bench --isolated` rows: {err or 'empty'})"]
    k = next((o.get("kernels") for o in rows.values() if o.get("kernels")), "?")
    out = head + [
        f"| step (K={k}) | primary median (p10–p90) µs | isolated median (p10–p90) µs | isolated/primary |",
        "|---|---:|---:|---:|",
    ]
    for metric, text in METRICS:
        p, i = rows.get(f"ctx_{metric}_primary"), rows.get(f"ctx_{metric}_isolated")
        r = (i or {}).get("ratio_vs_primary")
        out.append(f"| {text} | {timing(p)} | {timing(i)} | {'—' if r is None else f'{r:.2f}x'} |")
    mem = rows.get("ctx_isolated_memory_bytes")
    if mem and isinstance(mem.get("bytes"), (int, float)):
        out += ["", f"An isolated context takes {mem['bytes'] / (1 << 20):.1f} MiB of device memory "
                f"(free memory before and after creating it, with its stream, built-in module and "
                f"{mem.get('buffer_bytes', '?')} bytes of buffers)."]
    out += ["", "| work on one GPU, one thread per context, launch + sync of the K-kernel graph "
            "| replays/s (total) | per context | vs one context of that kind |", "|---|---:|---|---:|"]
    for row, text in REPLAYS:
        o = rows.get(row)
        if not o:
            out.append(f"| {text} | — | | |")
            continue
        per = " + ".join(fmt(v) for v in o.get("per_context", []))
        r = o.get("ratio_vs_1ctx")
        out.append(f"| {text} | {fmt(o.get('replays_per_s'))}/s | {per} | {'—' if r is None else f'{r:.2f}x'} |")
    return out


def main(argv):
    if len(argv) != 2:
        print(__doc__)
        return 2
    print("\n".join(isolated_table(argv[1])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
