#!/usr/bin/env bash
# Checks that the Rust library fc-graph is what a Rust user should get:
#   - nothing in its build needs libclang: `cargo tree -p fc-graph -e build,normal`
#     holds no bindgen or clang-sys (those stay in capi/'s build script and
#     cuda-sys's audit test);
#   - it is a plain library (crate type lib: no cdylib or staticlib to build);
#   - its package carries its device code: `cargo package --list` names
#     kernels/elementwise.ptx (embedded with include_str!).
# Exit status 1 when a check fails.
set -euo pipefail
cd "$(dirname "$0")/.."
fails=0
pass() { echo "PASS  $*"; }
fail() { echo "FAIL  $*" >&2; fails=$((fails + 1)); }

tree=$(cargo tree -q -p fc-graph -e build,normal --prefix none) || { fail "cargo tree -p fc-graph failed"; tree=""; }
if [[ -z $tree ]]; then
  :
elif bad=$(grep -E '^(bindgen|clang-sys) ' <<<"$tree" | sort -u | tr '\n' ' ') && [[ -n $bad ]]; then
  fail "fc-graph's build depends on $bad(cargo tree -p fc-graph -e build,normal)"
else
  pass "fc-graph builds without bindgen or clang-sys ($(sort -u <<<"$tree" | wc -l) crates in cargo tree -e build,normal)"
fi

kinds=$(cargo metadata -q --no-deps --format-version 1 |
  python3 -c 'import json, sys
m = json.load(sys.stdin)
p = next(p for p in m["packages"] if p["name"] == "fc-graph")
print(",".join(k for t in p["targets"] if "lib" in t["kind"] for k in t["crate_types"]))')
if [[ $kinds == lib ]]; then
  pass "fc-graph is a plain library (crate types: $kinds)"
else
  fail "fc-graph's library has crate types '$kinds', want lib"
fi

if ! list=$(cargo package -q --list -p fc-graph --allow-dirty); then
  fail "cargo package --list -p fc-graph failed"
elif grep -qx 'kernels/elementwise.ptx' <<<"$list"; then
  pass "cargo package -p fc-graph carries kernels/elementwise.ptx ($(wc -l <<<"$list") files)"
else
  fail "cargo package --list -p fc-graph does not name kernels/elementwise.ptx"
fi
exit $((fails > 0))
