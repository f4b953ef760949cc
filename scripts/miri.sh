#!/usr/bin/env bash
# Miri (the Rust interpreter that checks for undefined behaviour: data
# races, Stacked Borrows, use after free, leaks, strict provenance) over
# every CPU unit test of fc-graph and capi it can run. Tests it cannot run
# (FFI: loading the CUDA driver, reading /proc) carry
# `#[cfg_attr(miri, ignore = "reason")]`.
#
# Then the handle table's concurrent tests (capi/src/handles.rs +
# hazard.rs) again under several more thread schedules (MIRI_SEEDS).
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
seeds=${MIRI_SEEDS:-0..4}
echo "miri: $(cargo +nightly miri --version) over fc-graph and capi unit tests ($flags)"
start=$SECONDS
MIRIFLAGS="$flags" cargo +nightly miri test -q -p fc-graph -p fcgraph-capi --lib 2>&1 | tee target/miri-unit.log
echo "miri: unit tests took $((SECONDS - start)) s"

start=$SECONDS
echo "miri: the handle table's tests under seeds $seeds (thread schedules and weak-memory outcomes)"
MIRIFLAGS="$flags -Zmiri-many-seeds=$seeds" \
    cargo +nightly miri test -q -p fcgraph-capi --lib handles:: 2>&1 | tee target/miri-seeds.log
echo "miri: seeded runs took $((SECONDS - start)) s"
echo "PASS  miri: 0 errors"
