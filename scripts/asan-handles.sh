#!/usr/bin/env bash
# The C ABI's handle table (capi/src/handles.rs + hazard.rs) under
# AddressSanitizer: its unit tests, including a storm of lookups and frees
# over shared handles, where a use after free or a double destruction is
# an ASan error. Needs a nightly toolchain (-Zsanitizer); without one it
# says so and skips (exit 0). Called by scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! rustup run nightly rustc --version > /dev/null 2>&1; then
    echo "SKIP  handle table under AddressSanitizer: no nightly toolchain (rustup toolchain install nightly)"
    exit 0
fi
host=$(rustc -vV | sed -n 's/^host: //p')
echo "handle table under AddressSanitizer ($(rustup run nightly rustc --version), $host)"
RUSTFLAGS="-Zsanitizer=address" \
    cargo +nightly test -q -p fcgraph-capi --lib --target "$host" --target-dir target/asan -- handles:: hazard::
echo "PASS  handle table under AddressSanitizer"
