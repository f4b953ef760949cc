#!/usr/bin/env python3
"""Coexistence client B (issue 9, item 5): PyTorch and libfcgraph on one GPU,
in one process.

The main thread runs PyTorch on the device in a loop:
  - eager work (sin, mul_, add_, sum over --work-elems floats) and
    torch.cuda.synchronize() (a device-wide sync),
  - every 4th iteration a torch.cuda.graph capture (its entry calls
    torch.cuda.synchronize() and empties the allocator cache; the capture is
    GLOBAL mode), a replay, a sync and a check of the graph's result,
  - every 8th iteration an allocation, its release and
    torch.cuda.empty_cache() (cudaFree: an implicit device sync),
counting every PyTorch call that raised, and wrong results.

Meanwhile a Python thread drives libfcgraph through ctypes: one call of
fc_side_loop (ctypes releases the GIL for its whole duration) in
libfcside.so (ctest/coexist/fc_side.c, linked with the bundle's
libfcgraph.so), for each configuration asked for (default: primary-plain,
primary-retry, isolated; also primary-capture, which needs
FC_RECORDING=capture in the environment before the process starts, and
isolated-cublas). One summary line per configuration (the same format as
client A, written by fc_side_report); exit status 0 when no configuration
FAILed (PASS, SKIP and the control's INFO do not), 1 otherwise, 2 when it
cannot start.

isolated-cublas opens cuBLAS at run time; which one: $FC_CUBLAS_LIBRARY
when set, else the libcublas PyTorch has loaded (after one small matmul;
from /proc/self/maps), else one from NVIDIA's wheels on sys.path (the
CUDA major version of PyTorch's first), else fc_side's default names
(libcublas.so.13, .12, .so: the system's). Without one the configuration
is reported as SKIP.

  python3 torch_coexist.py --fcside PATH/libfcside.so [--fclib PATH/libfcgraph.so]
      [--device D] [--iters N] [--max-tries T] [--max-seconds S] [--config NAME]...
      [--work-elems E]
"""

import argparse
import ctypes
import glob
import os
import re
import site
import sys
import threading

# fc_side.h's FC_SIDE_* numbers.
CONFIGS = {"primary-plain": 0, "primary-retry": 1, "isolated": 2, "primary-capture": 3, "isolated-cublas": 4}
DEFAULT_CONFIGS = ["primary-plain", "primary-retry", "isolated"]
TRIES_SLOTS = 65
MSG = 320
MIN_ITERS = 1000  # FC_SIDE_MIN_ITERS
LL = ctypes.c_longlong


class Counts(ctypes.Structure):
    """Mirror of fc_side_counts (fc_side.h); the size is checked at start."""

    _fields_ = [
        ("iters", LL),
        ("ok", LL),
        ("failed", LL),
        ("failed_invalidated", LL),
        ("failed_other", LL),
        ("invalidated_recordings", LL),
        ("wrong", LL),
        ("retried", LL),
        ("max_tries", LL),
        ("tries_hist", LL * TRIES_SLOTS),
        ("time_capped", LL),
        ("requested", LL),
        ("seconds", ctypes.c_double),
        ("setup_failed", ctypes.c_int),
        ("skipped", ctypes.c_int),
        ("first_code", ctypes.c_int),
        ("recording", ctypes.c_int),
        ("first_error", ctypes.c_char * MSG),
        ("note", ctypes.c_char * MSG),
    ]


class Foreign(ctypes.Structure):
    """Mirror of fc_side_foreign (fc_side.h)."""

    _fields_ = [
        ("iters", LL),
        ("calls", LL),
        ("failed", LL),
        ("sync_failed", LL),
        ("alloc_failed", LL),
        ("capture_failed", LL),
        ("other_failed", LL),
        ("wrong", LL),
        ("first_error", ctypes.c_char * MSG),
    ]


def load_side(fcside, fclib):
    """Loads libfcside.so (after libfcgraph.so when given, so that exactly
    that file is the one used) and declares its functions."""
    if fclib:
        ctypes.CDLL(fclib, mode=ctypes.RTLD_GLOBAL)
    lib = ctypes.CDLL(fcside)
    vp, cfg, pc, pf = ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(Counts), ctypes.POINTER(Foreign)
    lib.fc_side_sizeof_counts.restype = ctypes.c_size_t
    lib.fc_side_sizeof_foreign.restype = ctypes.c_size_t
    lib.fc_side_open.argtypes = [ctypes.c_int, cfg, pc]
    lib.fc_side_open.restype = vp
    lib.fc_side_loop.argtypes = [vp, LL, ctypes.c_int, ctypes.c_double, pc]
    lib.fc_side_loop.restype = ctypes.c_int
    lib.fc_side_close.argtypes = [vp]
    lib.fc_side_close.restype = None
    lib.fc_side_report.argtypes = [ctypes.c_char_p, cfg, pc, pf, ctypes.c_char_p, ctypes.c_size_t]
    lib.fc_side_report.restype = ctypes.c_int
    lib.fc_side_report_errors.argtypes = [ctypes.c_char_p, cfg, pc, pf, ctypes.c_char_p, ctypes.c_size_t]
    lib.fc_side_report_errors.restype = None
    if lib.fc_side_sizeof_counts() != ctypes.sizeof(Counts) or lib.fc_side_sizeof_foreign() != ctypes.sizeof(Foreign):
        raise RuntimeError(
            "ctypes mirrors do not match fc_side.h: counts %d vs %d, foreign %d vs %d"
            % (lib.fc_side_sizeof_counts(), ctypes.sizeof(Counts), lib.fc_side_sizeof_foreign(), ctypes.sizeof(Foreign))
        )
    return lib


class TorchClient:
    """PyTorch's side: one iteration per call of step(), counted in a Foreign."""

    def __init__(self, torch, device, work_elems):
        self.torch = torch
        self.dev = torch.device("cuda", device)
        self.x = torch.randn(work_elems, device=self.dev)
        self.small = torch.full((4096,), 1.0, device=self.dev)
        self.pool = torch.cuda.graph_pool_handle()
        self.stats = Foreign()
        self.i = 0

    def call(self, kind, fn):
        """Runs fn, counting it; an exception is counted by kind. Returns
        (ok, value)."""
        self.stats.calls += 1
        try:
            return True, fn()
        except Exception as e:  # any PyTorch failure counts
            self.stats.failed += 1
            setattr(self.stats, kind + "_failed", getattr(self.stats, kind + "_failed") + 1)
            if not self.stats.first_error:
                text = ("%s: %s" % (type(e).__name__, e)).replace("\n", " ")
                self.stats.first_error = text.encode("utf-8", "replace")[: MSG - 1]
            return False, None

    def check(self, t):
        """t == 9 everywhere: (1 * 2 + 1) * 3."""
        ok, good = self.call("other", lambda: bool(self.torch.all(t == 9.0).item()))
        if ok and not good:
            self.stats.wrong += 1

    def eager(self):
        def work():
            y = self.torch.sin(self.x)
            y.mul_(2.0).add_(1.0)
            s = y.sum()
            z = (self.small * 2.0 + 1.0) * 3.0
            return s, z

        ok, out = self.call("other", work)
        self.call("sync", self.torch.cuda.synchronize)
        if ok:
            self.check(out[1])

    def graph(self):
        torch = self.torch
        g = torch.cuda.CUDAGraph()
        holder = {}

        def capture():
            with torch.cuda.graph(g, pool=self.pool):
                holder["out"] = (self.small * 2.0 + 1.0) * 3.0

        ok, _ = self.call("capture", capture)
        if ok:
            ok, _ = self.call("capture", g.replay)
        if ok:
            ok, _ = self.call("sync", torch.cuda.synchronize)
        if ok:
            self.check(holder["out"])
        del g

    def churn(self):
        torch = self.torch

        def alloc_free():
            t = torch.empty(1 << 20, device=self.dev)
            t.fill_(1.0)
            del t
            torch.cuda.empty_cache()

        self.call("alloc", alloc_free)

    def step(self):
        self.eager()
        if self.i % 4 == 3:
            self.graph()
        if self.i % 8 == 7:
            self.churn()
        self.i += 1
        self.stats.iters += 1


CUBLAS_NAME = re.compile(r"^libcublas\.so(\.\d+)*$")


def loaded_cublas():
    """The path of a libcublas this process has mapped (PyTorch's), or None."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            for line in maps:
                fields = line.split(None, 5)
                if len(fields) == 6:
                    path = fields[5].strip()
                    if CUBLAS_NAME.match(os.path.basename(path)) and os.path.exists(path):
                        return path
    except OSError:
        pass
    return None


def wheel_cublas(cuda_major):
    """A libcublas.so.N from NVIDIA's pip wheels (site-packages/nvidia/...):
    major cuda_major first, then the highest; shortest name first (the
    soname link). None when there is none."""
    roots = list(sys.path)
    try:
        roots += site.getsitepackages()
    except Exception:  # virtualenvs without it
        pass
    hits = set()
    for root in dict.fromkeys(r for r in roots if r and os.path.isdir(os.path.join(r, "nvidia"))):
        hits.update(glob.glob(os.path.join(root, "nvidia", "**", "libcublas.so.*"), recursive=True))
    hits = [h for h in hits if CUBLAS_NAME.match(os.path.basename(h))]

    def key(path):
        m = re.search(r"\.so\.(\d+)", os.path.basename(path))
        major = int(m.group(1)) if m else -1
        return (major == cuda_major, major, -len(os.path.basename(path)))

    return max(hits, key=key) if hits else None


def choose_cublas(torch, device):
    """Sets FC_CUBLAS_LIBRARY for fc_side (see the module's docstring) and
    says which and why."""
    if os.environ.get("FC_CUBLAS_LIBRARY"):
        return "%s (from $FC_CUBLAS_LIBRARY)" % os.environ["FC_CUBLAS_LIBRARY"]
    try:
        a = torch.ones((8, 8), device=torch.device("cuda", device))
        (a @ a).sum().item()  # PyTorch loads and initialises its cuBLAS
    except Exception as e:  # reported; the search goes on
        print("torch_coexist: a PyTorch matmul failed: %s" % e)
    path, how = loaded_cublas(), "the one PyTorch loaded"
    if not path:
        try:
            major = int(str(torch.version.cuda).split(".")[0])
        except ValueError:
            major = -1
        path, how = wheel_cublas(major), "from NVIDIA's wheels"
    if not path:
        return "none found here; fc_side tries libcublas.so.13, .12, .so"
    os.environ["FC_CUBLAS_LIBRARY"] = path  # putenv: fc_side's getenv sees it
    return "%s (%s)" % (path, how)


def run_config(torch, lib, args, config):
    counts = Counts()
    if config == "isolated-cublas":
        print("torch_coexist: cuBLAS for isolated-cublas: %s" % choose_cublas(torch, args.device), flush=True)
    client = TorchClient(torch, args.device, args.work_elems)
    side = lib.fc_side_open(args.device, CONFIGS[config], ctypes.byref(counts))
    if side:
        client.step()  # PyTorch is busy before fc starts
        done = threading.Event()

        def fc_thread():
            try:
                lib.fc_side_loop(side, args.iters, args.max_tries, args.max_seconds, ctypes.byref(counts))
            finally:
                done.set()

        t = threading.Thread(target=fc_thread, name="fc-side")
        t.start()
        while not done.is_set():
            client.step()
        t.join()
    lib.fc_side_close(side)
    try:
        torch.cuda.synchronize()
    except Exception as e:
        print("torch_coexist: final synchronize failed: %s" % e)
    line = ctypes.create_string_buffer(4096)
    ok = lib.fc_side_report(b"torch", CONFIGS[config], ctypes.byref(counts), ctypes.byref(client.stats), line, 4096)
    print(line.value.decode("utf-8", "replace"))
    lib.fc_side_report_errors(b"torch", CONFIGS[config], ctypes.byref(counts), ctypes.byref(client.stats), line, 4096)
    print(line.value.decode("utf-8", "replace"), flush=True)
    return bool(ok)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fcside", required=True, help="libfcside.so (fc_side.c built against libfcgraph)")
    ap.add_argument("--fclib", default=None, help="libfcgraph.so to load first (the bundle's)")
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--iters", type=int, default=10000, help="fc iterations per configuration")
    ap.add_argument("--max-tries", type=int, default=64)
    ap.add_argument("--max-seconds", type=float, default=40.0, help="cap on each configuration's fc loop")
    ap.add_argument(
        "--config",
        action="append",
        choices=sorted(CONFIGS),
        help="repeatable; default: %s (primary-capture needs FC_RECORDING=capture)" % " ".join(DEFAULT_CONFIGS),
    )
    ap.add_argument("--work-elems", type=int, default=1 << 22, help="floats of PyTorch's eager work")
    args = ap.parse_args()
    if args.iters < 1 or args.max_tries < 1 or not args.max_seconds > 0 or args.work_elems < 1:
        ap.error("--iters, --max-tries, --max-seconds and --work-elems must be positive")
    configs = args.config or DEFAULT_CONFIGS

    try:
        import torch
    except ImportError as e:
        print("torch_coexist: cannot import torch: %s" % e)
        return 2
    if not torch.cuda.is_available() or args.device >= torch.cuda.device_count():
        print("torch_coexist: PyTorch sees no CUDA device %d" % args.device)
        return 2
    torch.cuda.set_device(args.device)
    try:
        lib = load_side(args.fcside, args.fclib)
    except (OSError, RuntimeError, AttributeError) as e:
        print("torch_coexist: cannot load the fc side: %s" % e)
        return 2
    print(
        "torch_coexist: torch %s (CUDA %s) on %s; fc iterations %d (at most %.0f s once %d ran), max_tries %d; "
        "eager work %d floats; FC_RECORDING=%s"
        % (
            torch.__version__,
            torch.version.cuda,
            torch.cuda.get_device_name(args.device),
            args.iters,
            args.max_seconds,
            MIN_ITERS,
            args.max_tries,
            args.work_elems,
            os.environ.get("FC_RECORDING", "(unset)"),
        ),
        flush=True,
    )
    # PyTorch warm: its context, kernels and graph pool exist before fc starts.
    warm = TorchClient(torch, args.device, args.work_elems)
    for _ in range(8):
        warm.step()
    if warm.stats.failed or warm.stats.wrong:
        print("torch_coexist: PyTorch warm-up failed alone: %s" % warm.stats.first_error.decode(errors="replace"))
        return 2
    del warm
    failures = sum(0 if run_config(torch, lib, args, c) else 1 for c in configs)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
