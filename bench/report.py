#!/usr/bin/env python3
"""Turns the JSONL output of fc-bench, raw_bench and torch_bench.py into one
markdown report (issue #4).

Usage:
  python3 bench/report.py --fc bench-fc.jsonl --raw bench-raw.jsonl \
      --torch bench-torch.jsonl [--status fc=ok --status raw="failed (exit 1)" ...] \
      [--log fc=bench-fc.log ...] [--machine TEXT] [--commit TEXT] [--command TEXT] \
      [--date TEXT] [--out benchmarks.md]

Each input line that parses as a JSON object with "impl" and "row" is a row;
anything else is ignored. Missing or empty files are reported, not fatal.
"""

import argparse
import datetime
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from interop_table import interop_tables  # noqa: E402
from jsonrows import json_rows  # noqa: E402
from numfmt import fmt_num  # noqa: E402
from isolated_table import isolated_table  # noqa: E402

# fc-bench --steps: the C ABI's handle check must cost less than this
# (fc_buffer_size through the C ABI minus the Rust call it wraps; issue 29
# part 4: 15 ns, was 20).
HANDLE_CHECK_GOAL_US = 0.015

# fc-bench --steps, graph building (issue 18): (step, kind, bound, text).
# "le": fc/bare must be at most the bound; "speedup": bare/fc at least it.
# "{launches}" in a text: the launch mode of the steps rig (rig_launches).
# The every-node goal does not say PDL: it is counted in both modes.
BUILDER_GOALS = [
    ("build_instantiate", "le", 0.95, "build node by node + instantiate vs stream capture + instantiate"),
    ("node_update_all", "speedup", 1.5,
     "every node changed ({launches}): node-by-node update vs re-capture + cuGraphExecUpdate"),
    ("node_update_all_plain", "speedup", 1.5,
     "every node changed (plain launches): node-by-node update vs re-capture + cuGraphExecUpdate"),
    ("node_update_one", "speedup", 5.0, "one node of K changed: node-by-node update vs re-capture + cuGraphExecUpdate"),
    ("built_launch_sync", "le", 1.05, "launch + sync of the built graph vs the bare captured one (PDL alike)"),
    ("lanes_replay_pdl", "speedup", 1.5, "lanes: two joined lanes of 26 vs one chain of 52, replay + sync (PDL)"),
    ("lanes_replay_plain", "speedup", 1.5, "lanes: two joined lanes of 26 vs one chain of 52, replay + sync (plain)"),
    ("while_loop_32x26", "speedup", 1.3, "device-side loop: 32 x a 26-kernel body in one WHILE node vs the host loop "
     "(launch, copy the flag back, sync, decide)"),
]

IMPLS = ("fc", "raw", "torch")
IMPL_NAMES = {"fc": "fc-graph (Rust)", "raw": "raw driver API (C)", "torch": "PyTorch"}

ROW_ORDER = [
    "eager_enqueue_per_kernel",
    "eager_enqueue_sync",
    "graph_launch_host",
    "graph_launch_sync",
    "capture_instantiate",
    "capture_instantiate_ctxmgr",
    "recapture_update",
    "multi_gpu_captures_per_s_1dev",
    "multi_gpu_captures_per_s_2dev",
    "multi_gpu_replays_per_s_1dev",
    "multi_gpu_replays_per_s_2dev",
    "multi_gpu_updates_per_s_1dev",
    "multi_gpu_updates_per_s_2dev",
]

ROW_DOC = {
    "eager_enqueue_per_kernel": "host time of the K enqueues / K (no sync inside)",
    "eager_enqueue_sync": "K enqueues + stream synchronize",
    "graph_launch_host": "host time of one launch of the captured K-kernel graph",
    "graph_launch_sync": "graph launch + stream synchronize",
    "capture_instantiate": "begin capture, K enqueues, end capture, instantiate (host, end to end)",
    "capture_instantiate_ctxmgr": "PyTorch only: the same through `with torch.cuda.graph(g)` "
    "(which also synchronizes the device and empties the allocator cache)",
    "recapture_update": "re-capture the K kernels + cuGraphExecUpdate into the existing executable graph; "
    "both timers include destroying one K-node CUgraph (raw: the graph it just re-captured, which the "
    "executable no longer needs; fc-graph the same, inside end_update)",
    "multi_gpu_captures_per_s_1dev": "capture+instantiate+launch+sync of K=26 in a loop, one thread, device 0 "
    "(captures/s, higher is better)",
    "multi_gpu_captures_per_s_2dev": "the same on devices 0 and 1 at once, one thread and context each "
    "(total captures/s, higher is better)",
    "multi_gpu_replays_per_s_1dev": "launch + sync of one captured K=26 graph in a loop, one thread, device 0 "
    "(replays/s, higher is better; PDL where every device has it, on both sides)",
    "multi_gpu_replays_per_s_2dev": "the same on devices 0 and 1 at once, one thread and context each (total replays/s)",
    "multi_gpu_updates_per_s_1dev": "re-capture + in-place update (cuGraphExecUpdate, one graph destroyed) + launch + "
    "sync of K=26 in a loop, one thread, device 0 (updates/s, higher is better)",
    "multi_gpu_updates_per_s_2dev": "the same on devices 0 and 1 at once, one thread and context each (total updates/s)",
    "breakable_replay_6breaks_sync": "fc only: replay of 7 captured segments of 4 kernels split by 6 breaks "
    "(each break runs one eager kernel) + stream synchronize (K = 28 graph + 6 eager kernels)",
    "unbroken_plus_host_calls_sync": "fc only: the same 28 kernels as one unbroken graph, launched, then the "
    "same 6 kernels as eager host calls + stream synchronize (identical device work)",
    "breakable_replay_6breaks_host": "fc only: host time of the breakable replay (no synchronize)",
    "unbroken_plus_host_calls_host": "fc only: host time of the launch + 6 host calls (no synchronize)",
    "cost_per_break_us": "fc only: (median breakable_replay_6breaks_sync - median unbroken_plus_host_calls_sync) / 6; "
    "its p10–p90 are those of the per-iteration paired differences / 6 (the two variants alternate)",
    "cost_per_break_host_us": "fc only: the same from the host-only rows",
    "pool_bytes_after_capture_1": "fc only: capture-pool bytes reserved after capturing a 4-layer forward "
    "(d=512, d2=2048, intermediates dropped inside the capture) at 4096 rows on a fresh context",
    "pool_bytes_after_capture_2": "fc only: the same after a second capture at 2048 rows (graphs and outputs kept)",
    "pool_bytes_after_capture_3": "fc only: the same after a third capture at 4096 rows",
    "pool_growth_2_over_1": "fc only: bytes capture 2 added / bytes capture 1 added",
    "pool_growth_3_over_1": "fc only: bytes capture 3 added / bytes capture 1 added",
    "cache_hit_host": "fc only: `GraphCache::run` of a cached key (a hit: looks the key up and replays its graph), "
    "host time, K=26",
    "graph_launch_host_paired": "fc only: `Graph::launch` of the same graph, alternating with the hits in one loop",
    "cache_hit_overhead_us": "fc only: per-iteration cache_hit_host − graph_launch_host_paired (median and p10–p90 "
    "of the paired differences)",
}

# Second table: fc-graph feature rows, each with its comparison partner (an
# fc row of the same K) whose ratio is shown.
FEATURE_ORDER = [
    "recapture_update",
    "breakable_replay_6breaks_sync",
    "unbroken_plus_host_calls_sync",
    "breakable_replay_6breaks_host",
    "unbroken_plus_host_calls_host",
    "cost_per_break_us",
    "cost_per_break_host_us",
    "pool_bytes_after_capture_1",
    "pool_bytes_after_capture_2",
    "pool_bytes_after_capture_3",
    "pool_growth_2_over_1",
    "pool_growth_3_over_1",
    "cache_hit_host",
    "graph_launch_host_paired",
    "cache_hit_overhead_us",
]
# The cache hit path: at most this much above a bare graph launch.
CACHE_HIT_GOAL_US = 0.2
FEATURE_PARTNER = {
    "cache_hit_host": "graph_launch_host_paired",
    "recapture_update": "capture_instantiate",
    "breakable_replay_6breaks_sync": "unbroken_plus_host_calls_sync",
    "breakable_replay_6breaks_host": "unbroken_plus_host_calls_host",
    "pool_bytes_after_capture_2": "pool_bytes_after_capture_1",
    "pool_bytes_after_capture_3": "pool_bytes_after_capture_1",
}
# Rows only the features table shows (recapture_update is in both: vs raw in the main one).
FEATURE_ONLY = set(FEATURE_ORDER) - {"recapture_update"}
POOL_GOAL_ROWS = ("pool_growth_2_over_1", "pool_growth_3_over_1")
POOL_GOAL_TEXT = "adds < max(2 MiB, 10% of capture 1's growth)"
POOL_KERNELS = 16

# (row, bound on fc/raw) goals; faster-than-PyTorch applies to every row with both.
RAW_GOALS = {
    "graph_launch_sync": 1.05,
    "eager_enqueue_per_kernel": 1.10,
    "capture_instantiate": 1.10,
}
# 2-device rows with a goal on fc's scaling (2 devices / 1 device); the
# other 2-device rows report scaling for fc and raw without a goal.
MULTI_GPU_GOALS = {
    "multi_gpu_captures_per_s_2dev": 1.8,
    "multi_gpu_replays_per_s_2dev": 1.9,
}
# Informational (not counted in the tally): (row, bound on fc/raw). In the main
# table fc runs its defaults (PDL where the device has it) and raw plain; the
# counted like-for-like re-capture goals are in the PDL table.
RAW_INFO_GOALS = {
    "recapture_update": 1.10,
}

# The PDL table: rows measured in both modes. fc's default rows ("pdl": true
# where the device has PDL) and `<row>_nopdl` (PDL off on the context); raw's
# plain rows and `<row>_pdl` (cuLaunchKernelEx + the programmatic attribute).
PDL_ROWS = [
    "eager_enqueue_per_kernel",
    "eager_enqueue_sync",
    "graph_launch_host",
    "graph_launch_sync",
    "capture_instantiate",
    "recapture_update",
]
MODE_SUFFIXES = ("_pdl", "_nopdl")
# graph_launch_sync: fc with PDL at least this much faster than raw plain ...
PDL_SPEEDUP_GOAL = {"graph_launch_sync": 1.25}
# ... and at most this much slower than raw with PDL (fc PDL / raw PDL).
PDL_VS_RAW_PDL_GOAL = {"graph_launch_sync": 1.05, "recapture_update": 1.10, "capture_instantiate": 1.10}
# recapture_update with PDL off: fc plain / raw plain.
PLAIN_VS_RAW_PLAIN_GOAL = {"recapture_update": 1.10, "capture_instantiate": 1.10}
# Host-bound rows whose ≤ goals read the same-process A/B of `fc-bench
# --steps` (steps `table_<row>_<pdl|plain>`: the row's own end-to-end timing,
# library and bare driver calls alternating iteration by iteration) when it
# has them. Separate processes on the benchmark VMs move by up to 2x in
# phases of seconds (GPU runs 34-36: two runs of the same Rust code read
# 1.00x and 1.13x); the cross-process ratio is shown beside the verdict.
AB_ROWS = ("capture_instantiate", "recapture_update")

# Rows each implementation produces when it runs (to tell "failed" from "not measured").
EXPECTED = {
    "fc": (set(ROW_ORDER) - {"capture_instantiate_ctxmgr"}),
    "raw": set(ROW_ORDER) - {"capture_instantiate_ctxmgr"},
    "torch": set(ROW_ORDER[:6]),
}
RATE_FIELDS = ("captures_per_s", "per_s")


def higher_is_better(row):
    return row.startswith("multi_gpu_")


def is_mode_row(row):
    """A `_pdl`/`_nopdl` variant of a row (shown in the PDL table)."""
    return row.endswith(MODE_SUFFIXES)


def better(new, old):
    """Whether `new` is the better of two rounds of one row: the lower
    median time, or the higher captures per second. The same rule applies
    to every implementation (scripts/gpu-bench.sh runs each BENCH_ROUNDS
    times, alternating)."""
    for field, lower_is_better in (("median_us", True), ("captures_per_s", False), ("per_s", False)):
        a, b = new.get(field), old.get(field)
        if isinstance(a, (int, float)) and isinstance(b, (int, float)):
            return a < b if lower_is_better else a > b
    return False


def load(path):
    """Returns ({(row, kernels): obj}, [non-JSON notes], error or None)."""
    rows, notes = {}, []
    if not path:
        return rows, notes, "no file given"
    if not os.path.exists(path):
        return rows, notes, f"{path} does not exist"
    with open(path, encoding="utf-8", errors="replace") as f:
        for line, obj in json_rows(f):
            if obj is None:
                notes.append(line)
                continue
            key = (str(obj["row"]), int(obj.get("kernels", 0)))
            ratios = rows[key].get("round_ratios", []) if key in rows else []
            if isinstance(obj.get("ratio_vs_1dev"), (int, float)):
                ratios = ratios + [obj["ratio_vs_1dev"]]
            if key not in rows or better(obj, rows[key]):
                rows[key] = obj
            if ratios:
                rows[key]["round_ratios"] = ratios
    return rows, notes, None


def value(obj):
    if obj is None or "skipped" in obj:
        return None
    for key in ("median_us",) + RATE_FIELDS:
        v = obj.get(key)
        if isinstance(v, (int, float)):
            return float(v)
    return None




def num(obj, key):
    """obj[key] as a float, or None when absent or not a number."""
    if obj is None:
        return None
    v = obj.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v)


def fmt_mib(nbytes, signed=False):
    if nbytes is None:
        return "—"
    mib = nbytes / (1 << 20)
    return f"{mib:+.1f} MiB" if signed else f"{mib:.1f} MiB"


def cell(obj, status, with_range, expected=True):
    if obj is None:
        if status == "ok" or not expected:
            return "—"
        return "skipped" if status.startswith("skipped") else "FAILED"
    if "skipped" in obj:
        return f"skipped ({obj['skipped']})"
    v = value(obj)
    if v is None:
        return "?"
    if any(f in obj for f in RATE_FIELDS):
        s = f"{fmt_num(v)}/s"
        if "per_device" in obj:
            s += " (" + " + ".join(fmt_num(float(x)) for x in obj["per_device"])
            if isinstance(obj.get("ratio_vs_1dev"), (int, float)):
                s += f"; {obj['ratio_vs_1dev']:.2f}x 1 dev"
            s += ")"
        return s
    s = fmt_num(v)
    if with_range and num(obj, "p10_us") is not None and num(obj, "p90_us") is not None:
        s += f" ({fmt_num(float(obj['p10_us']))}–{fmt_num(float(obj['p90_us']))})"
    if obj.get("note"):
        s += f" [{obj['note']}]"
    return s


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


def fmt_ratio(r):
    return "—" if r is None else f"{r:.2f}x"


def goals_for(row, k, fc, raw, torch, data, status, steps=None):
    """Returns a list of (text, verdict) with verdict in met/MISSED/n/a."""
    out = []
    fv, rv, tv = value(fc), value(raw), value(torch)
    fc_missing = "MISSED (no fc data" + ("" if status["fc"] == "ok" else f"; fc {status['fc']}") + ")"

    if row in RAW_GOALS:
        bound = RAW_GOALS[row]
        text = f"≤{bound:.2f}x raw"
        # Like with like: where fc launched with PDL (its default on Hopper)
        # and raw has the same row with PDL, the goal compares those two.
        rv_goal, ab = rv, None
        if fc is not None and fc.get("pdl") is True:
            raw_pdl = value(data["raw"].get((row + "_pdl", k)))
            if raw_pdl is not None:
                rv_goal, text = raw_pdl, f"≤{bound:.2f}x raw (both with PDL)"
                ab = ab_ratio(steps, row, "pdl", k)
        if fv is None:
            out.append((text, fc_missing))
        elif rv_goal is None:
            out.append((text, "n/a (no raw data)"))
        else:
            out.append(host_goal(text, fv, rv_goal, bound, "no raw data", ab))

    if row in RAW_INFO_GOALS:
        bound = RAW_INFO_GOALS[row]
        text = f"within {bound:.2f}x raw (informational)"
        if fv is not None and rv is not None and rv > 0:
            r = fv / rv
            out.append((text, "yes" if r <= bound else f"no ({r:.2f}x)"))

    if row in MULTI_GPU_GOALS:
        goal = MULTI_GPU_GOALS[row]
        text = f"2 dev ≥{goal:.1f}x 1 dev"
        one = value(data["fc"].get((row.replace("_2dev", "_1dev"), k)))
        if fc is not None and "skipped" in fc:
            out.append((text, f"n/a (skipped: {fc['skipped']})"))
        elif fv is None or one is None:
            out.append((text, fc_missing))
        else:
            # Each round measures 1 and 2 devices back to back in one process;
            # the goal reads the median of those paired ratios (the best
            # rounds of 1 and 2 devices need not be the same round).
            ratios = sorted(fc.get("round_ratios") or [fv / one])
            r = ratios[(len(ratios) - 1) // 2]
            text += f" (median of per-round ratios {', '.join(f'{x:.2f}' for x in ratios)})"
            raw_ratios = sorted((raw or {}).get("round_ratios") or [])
            if raw_ratios:
                text += f"; raw in the same runs: {raw_ratios[(len(raw_ratios) - 1) // 2]:.2f}x"
            out.append((text, "met" if r >= goal else f"MISSED ({r:.2f}x)"))
    elif row.startswith("multi_gpu_") and row.endswith("_2dev"):
        # Scaling only, for fc and raw (informational).
        parts = []
        for name, obj in (("fc", fc), ("raw", raw)):
            ratios = sorted((obj or {}).get("round_ratios") or [])
            if ratios:
                parts.append(f"{name} {ratios[(len(ratios) - 1) // 2]:.2f}x")
        if parts:
            out.append(("scaling 2 dev / 1 dev, median of rounds (informational)", ", ".join(parts)))

    # faster than PyTorch on every row PyTorch has
    if torch is not None and tv is not None:
        text = "faster than PyTorch"
        if fv is None:
            if row == "capture_instantiate_ctxmgr":
                pass  # PyTorch-only variant; fc is compared on capture_instantiate
            elif fc is not None:
                out.append((text, "n/a (fc skipped)"))
            else:
                out.append((text, fc_missing))
        else:
            faster = fv > tv if higher_is_better(row) else fv < tv
            r = fv / tv
            out.append((text, "met" if faster else f"MISSED ({r:.2f}x)"))
    elif row in ROW_ORDER[:5] and fv is not None and status["torch"] != "ok":
        out.append(("faster than PyTorch", f"n/a (torch {status['torch']})"))
    return out


def feature_cell(obj, status):
    """The fc value of a feature row."""
    if obj is None:
        return "—" if status == "ok" else ("skipped" if status.startswith("skipped") else "FAILED")
    if "skipped" in obj:
        return f"skipped ({obj['skipped']})"
    if "bytes" in obj:
        s = fmt_mib(num(obj, "bytes"))
        extra = []
        if num(obj, "added_bytes") is not None:
            extra.append(f"{fmt_mib(num(obj, 'added_bytes'), True)} this capture")
        if obj.get("rows") is not None:
            extra.append(f"{obj['rows']} rows")
        return s + (f" ({'; '.join(extra)})" if extra else "")
    if "fraction" in obj or "added_bytes" in obj:
        f = num(obj, "fraction")
        s = "—" if f is None else f"{100 * f:.1f}%"
        return s + f" ({fmt_mib(num(obj, 'added_bytes'), True)} of {fmt_mib(num(obj, 'first_growth_bytes'))})"
    return cell(obj, status, True)


def feature_partner(row, k, fc_rows):
    """(partner text, fc/partner ratio or None)."""
    obj = fc_rows.get((row, k))
    partner = FEATURE_PARTNER.get(row)
    if partner is not None:
        pobj = fc_rows.get((partner, k))
        if "bytes" in (obj or {}) or "bytes" in (pobj or {}):
            a, b = num(obj, "bytes"), num(pobj, "bytes")
            return f"`{partner}` {fmt_mib(b)}", ratio(a, b)
        return f"`{partner}` {cell(pobj, 'ok', False)}", ratio(value(obj), value(pobj))
    if row.startswith("cost_per_break"):
        src = (obj or {}).get("from", "breakable_replay_6breaks_sync")
        base = (obj or {}).get("baseline", "unbroken_plus_host_calls_sync")
        a, b = value(fc_rows.get((src, k))), value(fc_rows.get((base, k)))
        return f"({fmt_num(a)} − {fmt_num(b)}) / {(obj or {}).get('breaks', 6)}", None
    if row.startswith("unbroken_plus_host_calls"):
        return "(baseline)", None
    if row in POOL_GOAL_ROWS:
        return f"capture 1 growth {fmt_mib(num(obj, 'first_growth_bytes'))}", None
    return "", None


def feature_goals(row, obj, status):
    """(text, verdict) goals of a feature row, verdict in met/MISSED/n/a."""
    if row == "cache_hit_overhead_us":
        text = f"hit ≤ graph launch + {CACHE_HIT_GOAL_US} µs"
        v = value(obj)
        if v is None:
            return [(text, "MISSED (no fc data)" if obj is None else "n/a (skipped)")]
        return [(text, "met" if v <= CACHE_HIT_GOAL_US else f"MISSED (+{v:.3f} µs)")]
    if row not in POOL_GOAL_ROWS:
        return []
    if obj is None:
        return [(POOL_GOAL_TEXT, "MISSED (no fc data" + ("" if status == "ok" else f"; fc {status}") + ")")]
    if "skipped" in obj:
        return [(POOL_GOAL_TEXT, f"n/a (skipped: {obj['skipped']})")]
    added, bound = num(obj, "added_bytes"), num(obj, "bound_bytes")
    if added is None or bound is None:
        return [(POOL_GOAL_TEXT, "n/a (row lacks added_bytes/bound_bytes)")]
    text = f"adds < {fmt_mib(bound)}"
    return [(text, "met" if added < bound else f"MISSED ({fmt_mib(added, True)})")]


def pdl_values(base, k, data):
    """(fc with PDL, fc plain, raw plain, raw PDL) row objects of one row and
    K; fc's default row counts as "with PDL" only when it says so, and as
    plain when it says it ran plain (PDL unavailable)."""
    fc_default = data["fc"].get((base, k))
    fc_pdl = fc_default if fc_default is not None and fc_default.get("pdl") is True else None
    fc_plain = data["fc"].get((base + "_nopdl", k))
    # Rows without "pdl" come from runs before PDL existed: plain.
    if value(fc_plain) is None and fc_default is not None and fc_default.get("pdl") is not True:
        fc_plain = fc_default
    return fc_pdl, fc_plain, data["raw"].get((base, k)), data["raw"].get((base + "_pdl", k))


def ratio_goal(text, num, den, bound, why_missing):
    """(text, verdict) for num/den ≤ bound."""
    if num is None or den is None or den == 0:
        return (text, f"n/a ({why_missing})")
    r = num / den
    return (text, "met" if r <= bound else f"MISSED ({r:.2f}x)")


def ab_ratio(steps, base, mode, k):
    """fc/bare of the same-process A/B step `table_<base>_<mode>` (mode pdl
    or plain) at K, or None when the steps run has no such rows."""
    if base not in AB_ROWS:
        return None
    fc = value((steps or {}).get((f"step_table_{base}_{mode}_fc", k)))
    bare = value((steps or {}).get((f"step_table_{base}_{mode}_bare", k)))
    return ratio(fc, bare)


def host_goal(text, num, den, bound, why_missing, ab):
    """ratio_goal, read on the same-process A/B ratio `ab` when there is one
    (the separate processes' ratio then shown beside it)."""
    if ab is None:
        return ratio_goal(text, num, den, bound, why_missing)
    cross = f"; separate processes, best rounds: {num / den:.2f}x" if num is not None and den else ""
    text = f"{text}, same process A/B {ab:.2f}x{cross}"
    return (text, "met" if ab <= bound else f"MISSED ({ab:.2f}x)")


def pdl_goals(base, k, fc_pdl, fc_plain, raw_plain, raw_pdl, steps=None):
    """The goals of one PDL-table row, (text, verdict) each."""
    fp, fo, rp, rx = value(fc_pdl), value(fc_plain), value(raw_plain), value(raw_pdl)
    why_fc = "no fc PDL data" if fc_pdl is None else "no data"
    out = []
    if base in PDL_SPEEDUP_GOAL:
        goal = PDL_SPEEDUP_GOAL[base]
        text = f"fc PDL ≥{goal:.2f}x faster than raw plain"
        if fp is None or rp is None or fp == 0:
            out.append((text, f"n/a ({why_fc if fp is None else 'no raw plain data'})"))
        else:
            speedup = rp / fp
            out.append((text, "met" if speedup >= goal else f"MISSED ({speedup:.2f}x)"))
    if base in PDL_VS_RAW_PDL_GOAL:
        goal = PDL_VS_RAW_PDL_GOAL[base]
        why = why_fc if fp is None else (raw_pdl or {}).get("skipped", "no raw PDL data")
        ab = ab_ratio(steps, base, "pdl", k) if fp is not None and rx is not None else None
        out.append(host_goal(f"fc PDL ≤{goal:.2f}x raw PDL", fp, rx, goal, why, ab))
    if base in PLAIN_VS_RAW_PLAIN_GOAL:
        goal = PLAIN_VS_RAW_PLAIN_GOAL[base]
        ab = ab_ratio(steps, base, "plain", k)
        out.append(host_goal(f"fc PDL off ≤{goal:.2f}x raw plain", fo, rp, goal, "no plain data", ab))
    return out


def pdl_table(data, status, tally, missed, steps=None):
    """The PDL table: each row in both modes on both sides, with its goals."""
    ks = sorted({k for impl in ("fc", "raw") for (row, k) in data[impl] if row in PDL_ROWS})
    out = ["", "## Programmatic dependent launch (PDL)", "",
           "| row | K | fc PDL (default) | fc PDL off | raw plain | raw PDL | raw plain / fc PDL | "
           "fc PDL / raw PDL | fc off / raw plain | goal |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    if not ks:
        return out + ["| (no rows) | | | | | | | | | |"]
    for base in PDL_ROWS:
        for k in ks:
            fc_pdl, fc_plain, raw_plain, raw_pdl = pdl_values(base, k, data)
            if all(o is None for o in (fc_pdl, fc_plain, raw_plain, raw_pdl)):
                continue
            goals = pdl_goals(base, k, fc_pdl, fc_plain, raw_plain, raw_pdl, steps)
            for text, verdict in goals:
                head = verdict.split(" ")[0]
                tally[head if head in tally else "n/a"] += 1
                if head == "MISSED":
                    missed.append(f"{base} K={k} (PDL table): {text}: {verdict}")
            fp, fo, rp, rx = (value(o) for o in (fc_pdl, fc_plain, raw_plain, raw_pdl))
            fc_default = data["fc"].get((base, k))
            fc_pdl_cell = (cell(fc_pdl, status["fc"], True) if fc_pdl is not None
                           else "— (fc ran plain)" if fc_default is not None else cell(None, status["fc"], True))
            goal_txt = "; ".join(f"{t}: {v}" for t, v in goals)
            out.append(f"| {base} | {k} | {fc_pdl_cell} | {cell(fc_plain, status['fc'], True)} "
                       f"| {cell(raw_plain, status['raw'], False)} | {cell(raw_pdl, status['raw'], False)} "
                       f"| {fmt_ratio(ratio(rp, fp))} | {fmt_ratio(ratio(fp, rx))} | {fmt_ratio(ratio(fo, rp))} "
                       f"| {goal_txt} |")
    out += ["",
            "fc PDL: fc-graph's defaults (built-ins launched with PDL, sm_90 PTX); fc PDL off: the same after "
            "`Context::set_pdl(false)`; raw plain: `cuLaunchKernel` of kernels/elementwise.ptx; raw PDL: "
            "`cuLaunchKernelEx` with `CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 1` of "
            "kernels/elementwise_sm90.ptx. Goals: `graph_launch_sync` with PDL ≥1.25x faster than raw plain "
            "and ≤1.05x raw PDL; `capture_instantiate` and `recapture_update` ≤1.10x raw in each mode (PDL vs "
            "PDL, plain vs plain). Those two host-bound goals read the same-process A/B of `fc-bench --steps` "
            "(rows `table_*` of the steps table: the same end-to-end timing, library and bare driver calls "
            "alternating iteration by iteration, so both see the same phase of the VM) where the steps run has "
            "it; the ratio of the separate processes' best rounds is shown beside it. "
            "`recapture_update` timers on both sides include destroying one K-node CUgraph (raw: the graph it "
            "just re-captured, after cuGraphExecUpdate; fc-graph the same, inside end_update). "
            "fc-graph's `end_update` never tries an update the driver would refuse (a refused "
            "`cuGraphExecUpdate` is an API error to compute-sanitizer): here, where only its own launches "
            "recorded the graph, their sequence tells it the topology; where other work may be in the graph, "
            "it counts the re-captured graph's nodes first (one `cuGraphGetNodes` walk, see `graph_node_count` "
            "in the steps table)."]
    return out


def rig_launches(rows):
    """The launch mode of the steps rig's own rows, from the no-context
    probe's "pdl" (absent from --quick runs)."""
    pdl = (rows.get(("probe_no_current_context", 0)) or {}).get("pdl")
    if pdl is True:
        return "PDL"
    if pdl is False:
        return "plain launches"
    return "the rig's launches, PDL where the device has it"


def builder_goal_lines(rows, tally=None, missed=None):
    """The graph-building goals (BUILDER_GOALS) per K, from the steps rows
    `step_<step>_fc` / `step_<step>_bare`; counted into `tally` / `missed`."""
    lines = []
    launches = rig_launches(rows)
    ks = sorted({k for (row, k) in rows if row == "step_build_instantiate_fc"})
    for k in ks:
        for step, kind, bound, text in BUILDER_GOALS:
            text = text.replace("{launches}", launches)
            f, b = rows.get((f"step_{step}_fc", k)), rows.get((f"step_{step}_bare", k))
            if not f or not b or not f.get("median_us") or not b.get("median_us"):
                continue
            fc_over_bare = f["median_us"] / b["median_us"]
            if kind == "le":
                ok, shown = fc_over_bare <= bound, f"{fc_over_bare:.2f}x (goal <= {bound}x)"
            else:
                ok, shown = 1 / fc_over_bare >= bound, f"{1 / fc_over_bare:.2f}x faster (goal >= {bound}x)"
            verdict = "met" if ok else "MISSED"
            said = verdict
            paired = f.get("paired_fc_over_bare")
            if paired:
                # Informational: fc / bare of adjacent blocks (robust to a
                # change of the host's speed during the row); the verdict
                # stays the medians'.
                also = f"{paired:.2f}x" if kind == "le" else f"{1 / paired:.2f}x faster"
                said += f" (block by block: {also} over {f.get('paired_blocks', '?')} block pairs)"
            lines.append(f"- K = {k}, {text}: {shown}: {said}")
            if tally is not None:
                tally[verdict] += 1
            if missed is not None and not ok:
                missed.append(f"graph building, K = {k}, {step}: {shown}")
    if lines:
        lines = ["", "**Graph building** (same process, alternating in blocks: fc, bare, bare, fc, ...; each verdict "
                 "compares the two rows' medians; where shown, \"block by block\" is the median over adjacent "
                 "fc and bare blocks of their medians' ratio, which a change of the host's speed during a row "
                 "does not tilt):", ""] + lines
    return lines


def steps_table(rows, err, tally=None, missed=None):
    """The attribution table: each step of fc-graph next to the bare driver
    call(s) it wraps, timed alternately in one process (`fc-bench --steps`;
    `rows` and `err` as `load` returns them). Process-to-process variation
    cancels out here. Counts the handle-check goal into `tally` / `missed`
    when given."""
    if not rows:
        return ["", "## Where the time goes", "", f"(no step rows: {err or 'empty'})"]
    out = ["", "## Where the time goes (same process, alternating: library step vs bare driver calls)", "",
           "| step | K | fc-graph median (p10–p90) | bare driver median (p10–p90) | fc/bare | fc − bare |",
           "|---|---:|---:|---:|---:|---:|"]
    for (row, k), o in sorted(rows.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        if not row.endswith("_fc"):
            continue
        base = row[: -len("_fc")]
        f_med = o["median_us"]
        for suffix, label in (("_bare", ""), ("_bare_keep_new", " (bare: keep the re-captured graph, destroy the old)")):
            b = rows.get((base + suffix, k))
            if not b:
                continue
            b_med = b["median_us"]
            out.append(f"| {base[len('step_'):]}{label} | {k} | {f_med:.3f} ({o['p10_us']:.3f}–{o['p90_us']:.3f}) | "
                       f"{b_med:.3f} ({b['p10_us']:.3f}–{b['p90_us']:.3f}) | {fmt_ratio(ratio(f_med, b_med))} | "
                       f"{f_med - b_med:+.3f} |")
    for (row, k), o in sorted(rows.items()):
        if (row.startswith("step_") and not row.endswith(("_fc", "_bare", "_bare_keep_new"))
                and o.get("median_us") is not None):
            out.append(f"| {row[len('step_'):]} (bare driver calls only) | {k} | "
                       f"{o['median_us']:.3f} | — | — | — |")
    out += builder_goal_lines(rows, tally, missed)
    hc, hb = rows.get(("step_handle_check_fc", 1)), rows.get(("step_handle_check_bare", 1))
    if hc and hb:
        cost = hc["median_us"] - hb["median_us"]
        ok = cost < HANDLE_CHECK_GOAL_US
        verdict = "met" if ok else "MISSED"
        out += ["", f"**Handle check** (C ABI `fc_buffer_size` vs the Rust call it wraps): {1000 * cost:.1f} ns per "
                f"call; goal < {1000 * HANDLE_CHECK_GOAL_US:.0f} ns: {verdict}."]
        if tally is not None:
            tally[verdict] += 1
        if missed is not None and not ok:
            missed.append(f"handle check: {1000 * cost:.1f} ns per call (goal < {1000 * HANDLE_CHECK_GOAL_US:.0f} ns)")
    probe = rows.get(("probe_no_current_context", 0))
    if probe:
        rcs = ", ".join(f"{k[3:]}={v}" for k, v in probe.items() if k.startswith("rc_"))
        out += ["", f"Calls with no context current on the thread (CUresult, 0 = success): {rcs}."]
        if isinstance(probe.get("pdl"), bool):
            out += ["", "Launches on both sides use PDL (cuLaunchKernelEx, sm_90 PTX): "
                    f"{'yes' if probe['pdl'] else 'no'}."]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for impl in IMPLS:
        ap.add_argument(f"--{impl}", metavar="JSONL", help=f"rows of {IMPL_NAMES[impl]}")
    ap.add_argument("--status", action="append", default=[], metavar="IMPL=TEXT",
                    help="outcome of an implementation's run (ok, failed (exit N), ...)")
    ap.add_argument("--log", action="append", default=[], metavar="IMPL=FILE",
                    help="stderr log of an implementation; its tail is shown when it did not succeed")
    ap.add_argument("--machine", default="unknown")
    ap.add_argument("--commit", default="unknown")
    ap.add_argument("--command", default="")
    ap.add_argument("--date", default="")
    ap.add_argument("--out", help="write the markdown here (default: stdout only)")
    ap.add_argument("--steps", metavar="JSONL",
                    help="rows of `fc-bench --steps`: each library step next to the bare driver call, same process")
    ap.add_argument("--isolated", metavar="JSONL", help="rows of `fc-bench --isolated`: isolated vs primary contexts")
    ap.add_argument("--interop", metavar="JSONL", help="rows of bench/interop/interop_bench.c: cuBLAS and NCCL")
    args = ap.parse_args()

    status = {impl: "ok" for impl in IMPLS}
    for s in args.status:
        k, _, v = s.partition("=")
        if k in status:
            status[k] = v or "unknown"
    logs = {}
    for s in args.log:
        k, _, v = s.partition("=")
        logs[k] = v

    data, notes, errors = {}, {}, {}
    for impl in IMPLS:
        rows, n, err = load(getattr(args, impl))
        data[impl], notes[impl], errors[impl] = rows, n, err
        if not rows and status[impl] == "ok":
            status[impl] = "no rows" + (f" ({err})" if err else "")

    keys = set()
    for impl in IMPLS:
        keys.update(rk for rk in data[impl].keys() if rk[0] not in FEATURE_ONLY and not is_mode_row(rk[0]))
    feature_keys = {rk for rk in data["fc"].keys() if rk[0] in FEATURE_ORDER}
    if any(rk[0] in FEATURE_ONLY for rk in feature_keys) or status["fc"] == "ok":
        for row in POOL_GOAL_ROWS:  # goal rows: listed (as missing) even without data
            if not any(rk[0] == row for rk in feature_keys):
                feature_keys.add((row, POOL_KERNELS))

    def sort_key(rk):
        row, k = rk
        idx = ROW_ORDER.index(row) if row in ROW_ORDER else len(ROW_ORDER)
        return (idx, row, k)

    date = args.date or datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    L = []
    L.append("# fc-graph benchmarks (issue #4)")
    L.append("")
    L.append(f"- **Date:** {date}")
    L.append(f"- **Machine:** {args.machine}")
    L.append(f"- **Commit:** {args.commit}")
    if args.command:
        L.append(f"- **Command:** `{args.command}`")
    L.append("- **Workload:** a chain of K tiny element-wise f32 kernels over 4096 elements, "
             "alternating `z = x + y; x = z * y` (fc and raw run the same PTX, `kernels/elementwise.ptx`, or with "
             "programmatic dependent launch `kernels/elementwise_sm90.ptx`; "
             "PyTorch runs its own `torch.add`/`torch.mul` with `out=`), on a non-blocking stream. "
             "Host monotonic clocks; median with p10–p90 in microseconds unless marked /s.")
    L.append("- **Rounds:** every program runs in alternating rounds, each a fresh process pinned to the same cores "
             "(`scripts/gpu-bench.sh`: BENCH_ROUNDS full rounds, then BENCH_HOST_ROUNDS without the multi-GPU rows); "
             "each row shows each implementation's best round (lowest median, highest rate), the same rule for all. "
             "Host-bound rows are bimodal between processes on these VMs (GPU run 34), hence the extra short rounds. "
             "Multi-GPU scaling goals read the median of per-round ratios instead.")
    L.append("- **Implementations:** " + ", ".join(f"{IMPL_NAMES[i]}: **{status[i]}**" for i in IMPLS))
    builds = {str(o.get("build")) for o in data["fc"].values() if "build" in o}
    if "debug" in builds:
        L.append("- **WARNING:** fc-bench was a DEBUG build; its numbers are not representative.")
    for impl in IMPLS:
        skips = [n for n in notes[impl] if "[SKIP]" in n]
        if skips:
            L.append(f"- {IMPL_NAMES[impl]}: " + "; ".join(skips))
    L.append("")

    L.append("| row | K | fc median (p10–p90) | raw median | PyTorch median | fc/raw | fc/PyTorch | goal |")
    L.append("|---|---:|---:|---:|---:|---:|---:|---|")
    tally = {"met": 0, "MISSED": 0, "n/a": 0}
    missed = []
    step_rows, _, step_err = load(args.steps)
    for rk in sorted(keys, key=sort_key):
        row, k = rk
        fc, raw, torch = data["fc"].get(rk), data["raw"].get(rk), data["torch"].get(rk)
        fv, rv, tv = value(fc), value(raw), value(torch)
        goals = goals_for(row, k, fc, raw, torch, data, status, step_rows)
        for text, verdict in goals:
            if "(informational)" in text:
                continue
            head = verdict.split(" ")[0]
            tally[head if head in tally else "n/a"] += 1
            if head == "MISSED":
                missed.append(f"{row} K={k}: {text}: {verdict}")
        goal_txt = "; ".join(f"{t}: {v}" for t, v in goals) if goals else ""
        L.append(
            f"| {row} | {k} | {cell(fc, status['fc'], True, row in EXPECTED['fc'])} "
            f"| {cell(raw, status['raw'], False, row in EXPECTED['raw'])} "
            f"| {cell(torch, status['torch'], False, row in EXPECTED['torch'])} | {fmt_ratio(ratio(fv, rv))} "
            f"| {fmt_ratio(ratio(fv, tv))} | {goal_txt} |"
        )
    if not keys:
        L.append("| (no rows from any implementation) | | | | | | | |")
    for impl in IMPLS:
        if status[impl] != "ok":
            L.append(f"| **{IMPL_NAMES[impl]} {status[impl]}** | | | | | | | |")
    L.append("")

    L.append("## fc-graph features")
    L.append("")
    L.append("| row | K | fc | compared with (fc) | ratio | goal |")
    L.append("|---|---:|---:|---|---:|---|")

    def feature_sort_key(rk):
        return (FEATURE_ORDER.index(rk[0]), rk[1])

    for rk in sorted(feature_keys, key=feature_sort_key):
        row, k = rk
        obj = data["fc"].get(rk)
        partner, r = feature_partner(row, k, data["fc"])
        goals = feature_goals(row, obj, status["fc"])
        for text, verdict in goals:
            head = verdict.split(" ")[0]
            tally[head if head in tally else "n/a"] += 1
            if head == "MISSED":
                missed.append(f"{row}: {text}: {verdict}")
        goal_txt = "; ".join(f"{t}: {v}" for t, v in goals) if goals else ""
        L.append(f"| {row} | {k} | {feature_cell(obj, status['fc'])} | {partner} | {fmt_ratio(r)} | {goal_txt} |")
    if not feature_keys:
        L.append("| (no feature rows) | | | | | |")
    L.append("")

    L.extend(pdl_table(data, status, tally, missed, step_rows))
    L.append("")
    extra = []
    if args.interop:
        extra.extend(interop_tables(args.interop, tally, missed))
    if args.isolated:
        extra.extend(isolated_table(args.isolated, tally, missed))
    steps = steps_table(step_rows, step_err, tally, missed)

    L.append(f"**Goals:** {tally['met']} met, {tally['MISSED']} missed, {tally['n/a']} not measurable.")
    for m in missed:
        L.append(f"- MISSED: {m}")
    L.append("")
    L.append("Goals: fc `graph_launch_sync` ≤1.05x raw; fc `eager_enqueue_per_kernel` ≤1.10x raw; "
             "fc `capture_instantiate` ≤1.10x raw; fc faster than PyTorch on every row PyTorch has; "
             f"fc 2-device captures/s ≥{MULTI_GPU_GOALS['multi_gpu_captures_per_s_2dev']}x one device; "
             f"fc 2-device replays/s ≥{MULTI_GPU_GOALS['multi_gpu_replays_per_s_2dev']}x one device; "
             "pool captures 2 and 3 each add less than max(2 MiB, 10% of capture 1's growth); "
             "the PDL table's goals (above); with `--isolated`, primary + isolated context replays ≥0.9x "
             "two streams of one context. In the main table fc runs its defaults (PDL where the device has "
             "it) and raw plain launches. Ratios are fc/other of the medians "
             "(for per-second rows a ratio above 1 is better). Informational, not counted: fc `recapture_update` "
             "within 1.10x raw in the main table (modes may differ there; the PDL table compares like with like), "
             "2-device update scaling. In the features table the ratio is fc row / its fc partner (the same K).")
    L.append("")
    L.append("Rows:")
    for row in ROW_ORDER + [r for r in FEATURE_ORDER if r not in ROW_ORDER]:
        if any(rk[0] == row for rk in keys | feature_keys):
            L.append(f"- `{row}`: {ROW_DOC[row]}")
    L.append("")

    for impl in IMPLS:
        if status[impl] == "ok":
            continue
        path = logs.get(impl)
        if not path or not os.path.exists(path):
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            tail = f.readlines()[-20:]
        L.append(f"<details><summary>{IMPL_NAMES[impl]}: last lines of {os.path.basename(path)}</summary>")
        L.append("")
        L.append("```")
        L.extend(x.rstrip("\n") for x in tail)
        L.append("```")
        L.append("</details>")
        L.append("")

    L.extend(extra)
    L.extend(steps)
    md = "\n".join(L)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
