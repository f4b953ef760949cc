#!/usr/bin/env python3
"""Writes the committed seed corpora of the fuzz targets (fuzz/seeds/<target>/).

c_api_calls' seeds are call sequences in the target's encoding (see
fuzz_targets/c_api_calls.rs: an op byte, then each argument's bytes): the
scenarios the C suite runs (record, break, replay, update in place,
capture with retries, caches, lanes, foreign sections, conditionals, user
kernels, faults), from which the fuzzer mutates. The other targets' seeds
are plain inputs (PTX text, bucket lists, file names).

    python3 fuzz/seeds.py          # rewrites fuzz/seeds/
"""
import os
import shutil
import struct

ROOT = os.path.dirname(os.path.abspath(__file__))
SEEDS = os.path.join(ROOT, "seeds")


# ---- c_api_calls' encoding (mirrors the decoder) ---------------------------
def live(i):
    """The i-th live handle of a kind."""
    return [3, i]


def stale(i):
    """The i-th handle of a kind, live or freed."""
    return [12, i]


NULL = [0]
OTHER_KIND = [2]


def size(n):
    if n == 0:
        return [0]
    if n == 2**64 - 1:
        return [1]
    if n < 256:
        return [6, n]
    assert n < 65536
    return [10] + list(struct.pack("<H", n))


GLOBAL, THREAD_LOCAL, RELAXED = [0], [1], [3]


def script(*calls, ret_ok=True):
    body = [1 if ret_ok else 0] + [b for c in calls for b in c]
    assert len(body) < 48, len(body)
    return [len(body)] + body


def on(op):
    """A callback's call on its own context (call_on)."""
    return [0] + op


def other(op):
    """A callback's call of the general kind."""
    return [1] + op


def on_add(a, o, n):
    return on([0] + live(a) + live(o) + size(n))


def on_fill(b, off, n, v):
    return on([1] + live(b) + size(off) + size(n) + [v])


def on_end():
    return on([3])


def on_sync():
    return on([4])


def on_abort():
    return on([5])


def on_begin(mode):
    return on([6] + mode)


def on_alloc(n):
    return on([7] + size(n))


def ctx(dev=0):
    return [0, 4 + dev]


def green(dev=0):
    return [3, 4 + dev, 1]


def private(dev=0):
    return [3, 4 + dev, 2]


def lane(c, n):
    return [4] + live(c) + [n]


def free_ctx(c):
    return [5] + live(c)


def alloc(c, n):
    return [12] + live(c) + size(n)


def free_buf(b, pick=live):
    return [16] + pick(b)


def wrap(c, parent, off, n):
    return [15] + live(c) + [parent, 1] + list(struct.pack("<H", off)) + [1] + list(struct.pack("<H", n - 1))


def upload(b, n):
    return [18] + live(b) + size(n) + [1]


def download(b, n):
    return [19] + live(b) + size(n) + [1]


def fill(c, b, off, n, v):
    return [20] + live(c) + live(b) + size(off) + size(n) + [v]


def add(c, a, b, o, n):
    return [22] + live(c) + live(a) + live(b) + live(o) + size(n)


def mul(c, a, b, o, n):
    return [23] + live(c) + live(a) + live(b) + live(o) + size(n)


def sync(c):
    return [7] + live(c)


def begin(c, mode=None):
    if mode is None:
        return [31] + live(c) + [0]
    return [31] + live(c) + [1] + mode


def end(c):
    return [33] + live(c)


def end_update(c, g):
    return [35] + live(c) + live(g) + [2]


def abort(c):
    return [36] + live(c)


def brk(c, s):
    return [37] + live(c) + s


def capture(c, mode, tries, s):
    return [40] + live(c) + mode + [4, tries] + s + [1]


def foreign_begin(c, mode):
    return [41] + live(c) + [1, 0] + mode


def foreign_end(c):
    return [42] + live(c)


def record_foreign(c, mode, s):
    return [43] + live(c) + mode + [1] + s


def cond_begin(c, kind, b, cases=1):
    return [44] + live(c) + [kind] + live(b) + [2, cases]


def cond_next(c):
    return [45] + live(c) + [0]


def cond_end(c):
    return [45] + live(c) + [1]


def launch(g):
    return [46] + live(g) + [0]


def graph_info(g):
    return [49] + live(g) + size(0)


def free_graph(g, pick=live):
    return [50] + pick(g)


def dot(g):
    return [51] + live(g) + [0, 1]


def cache_new(c):
    return [52] + live(c) + [1, 1]


def cache_run(h, key, s):
    return [53] + live(h) + [key] + s + [1, 0]


def cache_op(h, key, which):
    return [56] + live(h) + [key, which]


def cache_stats(h):
    return [57] + live(h) + [0, 1]


def module_load(c):
    return [24] + live(c) + [1, 1]


def get_kernel(m, name=3):
    return [25] + live(m) + [name, 1]


def launch_kernel(c, k, a, b, o, n):
    return [29] + live(c) + live(k) + live(a) + live(b) + live(o) + size(n) + [3, 1, 5]


def set_mode(c, m):
    return [10] + live(c) + [m]


def set_pdl(c, on_):
    return [9] + live(c) + [4, on_, 4, 0]


def buckets_ladder(n):
    return [59, 0] + size(n)


def buckets_query(h):
    return [60] + live(h) + size(17) + size(300)


def wait_lane(c, o):
    return [11] + live(c) + live(o)


def fault(sym, code, nth):
    return [62, sym, code, nth]


def last_error():
    return [63]


def seq(*ops):
    return bytes(b for op in ops for b in op)


C_API = {
    "record_break_replay": seq(
        ctx(), alloc(0, 1024), alloc(0, 1024), fill(0, 0, 0, 1024, 0x3c), fill(0, 1, 0, 1024, 0x3d),
        begin(0), add(0, 0, 1, 1, 256), brk(0, script(on_fill(0, 0, 64, 7))),
        mul(0, 1, 1, 0, 256), end(0), launch(0), launch(0), sync(0), download(0, 1024), graph_info(0), dot(0),
    ),
    "update_in_place": seq(
        ctx(), alloc(0, 512), alloc(0, 512), begin(0), add(0, 0, 1, 1, 128), end(0),
        begin(0), add(0, 1, 0, 0, 128), end_update(0, 0), launch(0), sync(0), free_graph(0), free_graph(0, stale),
    ),
    "capture_with_retries": seq(
        ctx(), alloc(0, 256), capture(0, THREAD_LOCAL, 3, script(on_fill(0, 0, 64, 1), on_alloc(128))), launch(0),
        capture(0, GLOBAL, 1, script(on_sync(), ret_ok=False)), sync(0),
    ),
    "cache_hits_and_refresh": seq(
        ctx(), alloc(0, 256), cache_new(0), cache_run(0, 1, script(on_add(0, 0, 16))),
        cache_run(0, 1, script()), cache_op(0, 1, 0), cache_run(0, 1, script()), cache_stats(0),
        cache_op(0, 2, 2), cache_op(0, 0, 3),
    ),
    "lanes_fork_join": seq(
        ctx(), alloc(0, 1024), alloc(0, 1024), lane(0, 3), begin(0), wait_lane(1, 0), add(1, 0, 0, 0, 64),
        add(0, 1, 1, 1, 64), wait_lane(0, 1), end(0), launch(0), sync(0),
    ),
    "foreign_sections": seq(
        ctx(), alloc(0, 256), set_mode(0, 1), begin(0), foreign_begin(0, RELAXED), fill(0, 0, 0, 256, 2),
        foreign_end(0), record_foreign(0, THREAD_LOCAL, script(fill(0, 0, 0, 16, 5))), end(0), launch(0),
        sync(0),
    ),
    "conditionals": seq(
        ctx(), alloc(0, 64), alloc(0, 256), fill(0, 0, 0, 4, 0), begin(0), cond_begin(0, 2, 0),
        add(0, 1, 1, 1, 64), cond_end(0), cond_begin(0, 3, 0), fill(0, 1, 0, 16, 1), cond_next(0),
        fill(0, 1, 0, 16, 2), cond_end(0), end(0), launch(0), sync(0),
    ),
    "user_kernels": seq(
        ctx(), alloc(0, 1024), alloc(0, 1024), alloc(0, 1024), module_load(0), get_kernel(0),
        get_kernel(0, 0), launch_kernel(0, 0, 0, 1, 2, 256), begin(0), launch_kernel(0, 1, 2, 1, 0, 256),
        end(0), launch(0), sync(0), set_pdl(0, 1), launch_kernel(0, 0, 0, 1, 2, 256), sync(0),
    ),
    "two_devices_and_isolation": seq(
        ctx(0), ctx(1), green(0), private(1), alloc(0, 256), alloc(1, 256), alloc(2, 256),
        add(1, 0, 0, 0, 64), add(2, 0, 0, 0, 64), add(0, 2, 2, 2, 64), begin(1), add(1, 1, 1, 1, 64),
        brk(1, script(other(free_ctx(3)))), end(1), launch(0), sync(1),
    ),
    "wraps_and_bad_sizes": seq(
        ctx(), alloc(0, 4096), wrap(0, 0, 256, 512), upload(1, 512), download(0, 4096),
        [12] + live(0) + size(2**64 - 1), [12] + live(0) + size(0), fill(0, 0, 4000, 200, 1),
        add(0, 0, 1, 1, 1024), upload(0, 8192), free_buf(1), free_buf(1, stale), download(1, 16),
    ),
    "faults_then_recovery": seq(
        ctx(), alloc(0, 256), fault(14, 5, 1), begin(0), add(0, 0, 0, 0, 64), end(0), fault(0, 1, 1),
        alloc(0, 256), fault(17, 5, 1), begin(0), add(0, 0, 0, 0, 64), end(0), launch(0), sync(0),
    ),
    "misuse_in_breaks": seq(
        ctx(), alloc(0, 256), begin(0),
        brk(0, script(on_begin(THREAD_LOCAL), on_end(), on_abort(), other(free_graph(0, stale)))),
        add(0, 0, 0, 0, 64), end(0), launch(0), launch(0), free_ctx(0), launch(0), last_error(),
    ),
    "buckets": seq(buckets_ladder(2048), buckets_query(0), [59, 1, 3] + size(300) + size(17) + size(5000) + size(2048),
                   buckets_query(1), [61] + live(0), [60] + stale(0) + size(1) + size(1)),
}

PTX = open(os.path.join(ROOT, "..", "kernels", "elementwise.ptx"), "rb").read()
PTX_SEEDS = {
    "elementwise": PTX,
    "elementwise_name": PTX + b"\0fc_mul_f32",
    "conditional": open(os.path.join(ROOT, "..", "kernels", "conditional.ptx"), "rb").read(),
    "header_only": b".version 7.0\n.target sm_35\n.address_size 64\n",
    "broken_entry": b".version 7.0\n.target sm_35\n.address_size 64\n.visible .entry broken(.param .u32 n)\n{\n",
    "empty": b"",
}


def bucket_seed(max_sel, max_bytes, sizes):
    return bytes([max_sel]) + max_bytes + bytes(8 * 2) + bytes([len(sizes)]) + b"".join(sizes)


BUCKET_SEEDS = {
    "ladder_2048": bytes([2]) + struct.pack("<H", 2048) + bytes([6, 17] * 8) + bytes([3, 6, 0, 10]) + struct.pack("<H", 4096) + bytes([6, 17, 6, 0]),
    "ladder_2_24": bytes([1]) + struct.pack("<I", 2**24) + bytes([1] * 8) + bytes([0]),
    "ladder_over": bytes([1]) + struct.pack("<I", 2**24 + 1) + bytes([0] * 8) + bytes([0]),
    "zero_max": bytes([2, 0, 0]) + bytes([0] * 8) + bytes([2, 1, 1]),
    "size_max": bytes([0, 1]) + bytes([1] * 8) + bytes([2, 1, 0]),
}

DOT_SEEDS = {
    "plain": b"\0graph.dot",
    "empty_graph": b"\1empty.dot",
    "long": b"\0" + b"d" * 251 + b".dot",
    "too_long": b"\0" + b"e" * 300,
    "not_utf8": b"\0\xfb\xfe.dot",
    "dots": b"\0..",
    "piece_like": b"\0.fc-piece0-1-0.tmp",
}


def write(target, seeds):
    d = os.path.join(SEEDS, target)
    os.makedirs(d, exist_ok=True)
    for name, data in seeds.items():
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    shutil.rmtree(SEEDS, ignore_errors=True)
    write("c_api_calls", C_API)
    write("ptx_module_load", PTX_SEEDS)
    write("bucket_lists", BUCKET_SEEDS)
    write("dot_names", DOT_SEEDS)
    print("wrote", sum(len(s) for s in (C_API, PTX_SEEDS, BUCKET_SEEDS, DOT_SEEDS)), "seeds under", SEEDS)
