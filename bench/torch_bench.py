#!/usr/bin/env python3
"""PyTorch baseline for the fc-graph benchmark (issue #4).

Same workload as `fc-bench` and `bench/raw/raw_bench.c`: a chain of K tiny
element-wise f32 ops over n = 4096 elements, alternating

    z = x + y    (torch.add(x, y, out=z))
    x = z * y    (torch.mul(z, y, out=x))

on a non-default stream. Rows (one JSON object per line on stdout; human
lines on stderr):

  eager_enqueue_per_kernel   host time of the K enqueues / K (no sync inside)
  eager_enqueue_sync         K enqueues + stream synchronize
  graph_launch_host          host time of CUDAGraph.replay()
  graph_launch_sync          replay() + stream synchronize
  capture_instantiate        g.capture_begin(); K ops; g.capture_end()
                             (capture_end instantiates; the fastest PyTorch path)
  capture_instantiate_ctxmgr `with torch.cuda.graph(g, stream=s): K ops`
                             (the documented API; it also synchronizes the
                             device and empties the allocator cache on entry)

All host times use time.perf_counter_ns (CLOCK_MONOTONIC on Linux).
Percentiles: linear interpolation between closest ranks, as in the other impls.
"""

import argparse
import json
import sys
import time

IMPL = "torch"


def log(msg):
    print(f"[torch] {msg}", file=sys.stderr, flush=True)


def percentile(sorted_v, q):
    n = len(sorted_v)
    if n == 0:
        return 0.0
    pos = q * (n - 1)
    lo = int(pos)
    hi = min(lo + 1, n - 1)
    return sorted_v[lo] + (sorted_v[hi] - sorted_v[lo]) * (pos - lo)


def emit_row(row, kernels, us, **extra):
    v = sorted(us)
    med, p10, p90 = percentile(v, 0.5), percentile(v, 0.1), percentile(v, 0.9)
    obj = {
        "impl": IMPL,
        "row": row,
        "kernels": kernels,
        "median_us": round(med, 3),
        "p10_us": round(p10, 3),
        "p90_us": round(p90, 3),
        "n": len(v),
    }
    obj.update(extra)
    print(json.dumps(obj, separators=(",", ":")), flush=True)
    log(f"{row:<26} K={kernels:<5} median {med:10.3f} us  (p10 {p10:10.3f}, p90 {p90:10.3f}, n={len(v)})")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernels", default="26,260,2600", help="comma-separated chain lengths K")
    ap.add_argument("--n", type=int, default=4096, help="elements per buffer")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--iters", type=int, default=0, help="0: 50 for K <= 260, 20 above")
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="K=26, 5 iterations")
    # Accepted for command-line parity with fc-bench and raw_bench; PyTorch has no multi-GPU rows.
    ap.add_argument("--multi-gpu-secs", type=float, default=1.0, help=argparse.SUPPRESS)
    ap.add_argument("--no-multi-gpu", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()

    ks = [int(k) for k in args.kernels.split(",") if k.strip()]
    warmup, iters = args.warmup, args.iters
    if args.quick:
        ks, warmup, iters = [26], 2, 5

    try:
        import torch
    except Exception as e:  # noqa: BLE001
        log(f"[FAIL] cannot import torch: {e}")
        return 1
    if not torch.cuda.is_available():
        log("[FAIL] torch.cuda.is_available() is False")
        return 1

    dev = torch.device("cuda", args.device)
    torch.cuda.set_device(dev)
    n = args.n
    log(
        f"torch {torch.__version__}, CUDA {torch.version.cuda}, device {args.device}: "
        f"{torch.cuda.get_device_name(dev)}; n={n}, warmup={warmup}"
    )

    s = torch.cuda.Stream(device=dev)
    x = torch.zeros(n, dtype=torch.float32, device=dev)
    y = torch.ones(n, dtype=torch.float32, device=dev)
    z = torch.zeros(n, dtype=torch.float32, device=dev)
    torch.cuda.synchronize(dev)

    add, mul = torch.add, torch.mul

    def chain(k):
        for i in range(k):
            if i & 1 == 0:
                add(x, y, out=z)
            else:
                mul(z, y, out=x)

    def reset():
        with torch.cuda.stream(s):
            x.zero_()
            y.fill_(1.0)
            z.zero_()
        s.synchronize()

    def check(k, what):
        s.synchronize()
        want = float(k // 2)
        bad = (x != want).nonzero()
        if bad.numel() != 0:
            i = int(bad[0])
            log(f"[FAIL] wrong result after {what}, K={k}: x[{i}] = {float(x[i])}, want {want}")
            sys.exit(1)
        log(f"check {what} K={k}: ok (x == {want:g})")

    now = time.perf_counter_ns

    for k in ks:
        it_n = iters if iters > 0 else (50 if k <= 260 else 20)

        # 1. eager
        reset()
        with torch.cuda.stream(s):
            chain(k)
        check(k, "eager")
        a, b = [], []
        with torch.cuda.stream(s):
            for _ in range(warmup):
                chain(k)
                s.synchronize()
            for _ in range(it_n):
                t0 = now()
                chain(k)
                t1 = now()
                s.synchronize()
                t2 = now()
                a.append((t1 - t0) / 1e3 / k)
                b.append((t2 - t0) / 1e3)
        emit_row("eager_enqueue_per_kernel", k, a)
        emit_row("eager_enqueue_sync", k, b)

        # 2. one captured graph, replayed
        g = torch.cuda.CUDAGraph()
        with torch.cuda.stream(s):
            g.capture_begin(capture_error_mode="thread_local")
            chain(k)
            g.capture_end()
        reset()
        with torch.cuda.stream(s):
            g.replay()
        check(k, "graph")
        a, b = [], []
        with torch.cuda.stream(s):
            for _ in range(warmup):
                g.replay()
                s.synchronize()
            for _ in range(it_n):
                t0 = now()
                g.replay()
                t1 = now()
                s.synchronize()
                t2 = now()
                a.append((t1 - t0) / 1e3)
                b.append((t2 - t0) / 1e3)
        emit_row("graph_launch_host", k, a)
        emit_row("graph_launch_sync", k, b)
        del g

        # 3a. capture + instantiate, low-level API (capture_end instantiates)
        a = []
        with torch.cuda.stream(s):
            for it in range(-warmup, it_n):
                g2 = torch.cuda.CUDAGraph()
                t0 = now()
                g2.capture_begin(capture_error_mode="thread_local")
                chain(k)
                g2.capture_end()
                t1 = now()
                g2.reset()
                del g2
                if it >= 0:
                    a.append((t1 - t0) / 1e3)
        emit_row("capture_instantiate", k, a, api="capture_begin/capture_end")

        # 3b. capture + instantiate, documented context manager
        a = []
        for it in range(-warmup, it_n):
            g3 = torch.cuda.CUDAGraph()
            t0 = now()
            with torch.cuda.graph(g3, stream=s, capture_error_mode="thread_local"):
                chain(k)
            t1 = now()
            g3.reset()
            del g3
            if it >= 0:
                a.append((t1 - t0) / 1e3)
        emit_row("capture_instantiate_ctxmgr", k, a, api="with torch.cuda.graph(g)")
        s.synchronize()

    log("multi_gpu rows: not measured for PyTorch (GIL-bound Python threads)")
    log("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
