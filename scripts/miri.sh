#!/usr/bin/env bash
# Miri (the Rust interpreter that checks for undefined behaviour: data
# races, Stacked Borrows, use after free, leaks, strict provenance) over
# every CPU unit test of fc-graph and capi it can run. Tests it cannot run
# (FFI: loading the CUDA driver, reading /proc) carry
# `#[cfg_attr(miri, ignore = "reason")]`.
#
# Then the hazard pointers' ordering test (capi/src/hazard.rs) under 32
# thread schedules and the handle table's concurrent tests
# (capi/src/handles.rs) under two more (MIRI_HAZARD_SEEDS, MIRI_SEEDS).
#
# Set-up: installs the nightly toolchain's miri and rust-src components
# when they are missing; skips visibly ("[SKIP] miri: ...") only when they
# cannot be had. Any Miri error fails the script. Called by scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

have_miri() { cargo +nightly miri --version > /dev/null 2>&1; }
if ! have_miri; then
    if ! command -v rustup > /dev/null 2>&1; then
        echo "[SKIP] miri: no rustup to install a nightly toolchain with miri"
        exit 0
    fi
    echo "miri: installing nightly with the miri and rust-src components"
    if ! rustup run nightly rustc --version > /dev/null 2>&1; then
        rustup toolchain install nightly --component miri rust-src --profile minimal || true
    else
        rustup component add --toolchain nightly miri rust-src || true
    fi
    if ! have_miri; then
        echo "[SKIP] miri: the nightly toolchain's miri component could not be installed"
        exit 0
    fi
fi
mkdir -p target
cargo +nightly miri setup > /dev/null 2>&1 || cargo +nightly miri setup

# Miri's own target dir (target/miri); strict provenance: no integer is
# ever turned back into a pointer (handles are address-free values). Host
# access (/proc, files) fails with an error, as the code expects it may.
flags="-Zmiri-strict-provenance -Zmiri-isolation-error=warn-nobacktrace"
# Seed 0 is the first run's; more seeds are more thread schedules and
# weak-memory outcomes (Miri runs seeds in parallel).
seeds=${MIRI_SEEDS:-1..3}
seeds_hazard=${MIRI_HAZARD_SEEDS:-0..32}
echo "miri: $(cargo +nightly miri --version) over fc-graph and capi unit tests ($flags)"
start=$SECONDS
MIRIFLAGS="$flags" cargo +nightly miri test -q -p fc-graph -p fcgraph-capi --lib 2>&1 | tee target/miri-unit.log
echo "miri: unit tests took $((SECONDS - start)) s"

start=$SECONDS
echo "miri: the hazard-pointer ordering test under seeds $seeds_hazard, the concurrent handle and recording-sink tests under seeds $seeds"
# seeded RANGE WHAT CARGO-ARGS...: runs the tests under each seed of RANGE
# (FROM..END, END excluded). Miri runs the seeds in parallel, so their
# "test result" lines interleave and cannot be counted: they go to
# target/miri-seeds.log (shown when a seed fails), and one line in
# test.sh's tally form says how many seeded runs passed.
: > target/miri-seeds.log
seeded() {
    local range=$1 what=$2 from end
    shift 2
    from=${range%..*} end=${range#*..}
    if MIRIFLAGS="$flags -Zmiri-many-seeds=$range" cargo +nightly miri test -q "$@" >> target/miri-seeds.log 2>&1; then
        echo "miri: $what under seeds $range: every seed passed"
        echo "$((end - from)) passed, 0 failed, 0 skipped"
    else
        tail -n 60 target/miri-seeds.log
        echo "miri: $what failed under a seed of $range (target/miri-seeds.log)"
        echo "0 passed, 1 failed, 0 skipped"
        return 1
    fi
}
seeded "$seeds_hazard" "hazard pointers (capi hazard::)" -p fcgraph-capi --lib hazard::
seeded "$seeds" "the handle table's concurrent tests" -p fcgraph-capi --lib -- concurrent_insert storm_of racing_frees \
    a_freed_object lookups_while
# The recording sink: launches from several threads into one segment.
seeded "$seeds" "the recording sink (fc-graph segment::)" -p fc-graph --lib segment::
echo "miri: seeded runs took $((SECONDS - start)) s"
echo "PASS  miri: 0 errors"
