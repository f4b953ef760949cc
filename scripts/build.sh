#!/usr/bin/env bash
# The one release build a user needs: the C library (capi/: target/release/
# libfcgraph.so and libfcgraph.a) and the `fcgraph` command (cli/:
# target/release/fcgraph), after installing build dependencies
# (scripts/deps.sh). scripts/demo.sh, scripts/install.sh and scripts/test.sh
# all build through here, with the same profile, packages and environment,
# so none rebuilds what another built. Extra arguments go to cargo.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
# deps.sh installed libclang, so capi/build.rs re-checks the header's
# bindings (and a different value would rerun that build script).
export FC_REQUIRE_HEADER_CHECK="${FC_REQUIRE_HEADER_CHECK:-1}"
exec cargo build --release -p fcgraph-capi -p fcgraph-cli "$@"
