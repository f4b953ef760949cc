#!/usr/bin/env bash
# Checks that the crates meant for crates.io (every workspace member without
# `publish = false`: fc-cuda-sys and fc-graph) are what a Rust user gets:
#   - `cargo package` of all of them at once, verification included: each
#     package is unpacked and built on its own, fc-graph against the
#     packaged fc-cuda-sys (cargo puts the packages into a local registry,
#     so an unpublished dependency verifies too), then `cargo publish
#     --dry-run` would upload exactly these files;
#   - fc-graph's package carries its device code (kernels/elementwise.ptx,
#     embedded with include_str!), fc-cuda-sys's leaves out the header audit
#     (tests/audit.rs reads the workspace's .headers/) and both carry the
#     license files;
#   - nothing in fc-graph's build needs libclang: `cargo tree -p fc-graph -e
#     build,normal` holds no bindgen or clang-sys (those stay in capi/'s build
#     script and cuda-sys's audit test);
#   - fc-graph is a plain library (crate type lib: no cdylib or staticlib).
# One PASS or FAIL line per check; exit status 1 when a check fails.
set -euo pipefail
# ROOT, have
. "$(dirname "$0")/lib.sh"
cd "$ROOT"
fails=0
pass() { echo "PASS  $*"; }
fail() { echo "FAIL  $*"; fails=$((fails + 1)); }

# The publishable members, from cargo metadata (publish: null = anywhere).
meta=$(cargo metadata -q --no-deps --format-version 1)
mapfile -t publishable < <(python3 -c 'import json, sys
for p in json.load(sys.stdin)["packages"]:
    if p["publish"] != []:
        print(p["name"])' <<<"$meta")
if [[ ${#publishable[@]} -eq 0 ]]; then
  fail "no publishable workspace member found in cargo metadata"
else
  args=()
  for p in "${publishable[@]}"; do args+=(-p "$p"); done
  # Cargo unpacks the packages of its local registry (target/package/
  # tmp-registry) into $CARGO_HOME/registry/src/-<hash of that path>/ and
  # never unpacks a name and version it finds there again. Built at the same
  # path with the same version, fc-graph would verify against an fc-cuda-sys
  # from an earlier run (CI failed that way). Drop those copies first; the
  # crates.io sources (index.* folders) are left alone.
  src_cache="${CARGO_HOME:-$HOME/.cargo}/registry/src"
  for p in "${publishable[@]}"; do
    for d in "$src_cache"/-*/"$p"-*; do
      [[ -d $d ]] || continue
      rm -rf "$d" && echo "  removed cargo's earlier unpacked copy $d"
    done
  done
  out=$(mktemp)
  echo "cargo package ${args[*]} --allow-dirty (verified: each package built from its .crate)"
  if cargo package "${args[@]}" --allow-dirty >"$out" 2>&1; then
    grep -E '^ *(Packaging|Packaged|Verifying|warning)' "$out" | sed 's/^ */  /'
    for p in "${publishable[@]}"; do
      if grep -qE "^ *Verifying $p v" "$out"; then
        pass "cargo package -p $p: packaged and verified (built from its .crate)"
      else
        fail "cargo package -p $p: no verification in cargo's output"
      fi
    done
  else
    cat "$out"
    for p in "${publishable[@]}"; do fail "cargo package ${args[*]} failed (see above): $p not verified"; done
  fi
  rm -f "$out"
fi

# list_has PACKAGE FILE: whether `cargo package --list -p PACKAGE` names FILE.
declare -A lists
list_has() {
  [[ -n ${lists[$1]+set} ]] || lists[$1]=$(cargo package -q --list -p "$1" --allow-dirty 2>/dev/null || echo "<failed>")
  grep -qx "$2" <<<"${lists[$1]}"
}
if list_has fc-graph kernels/elementwise.ptx && list_has fc-graph kernels/elementwise_sm90.ptx; then
  pass "fc-graph's package carries kernels/elementwise.ptx and elementwise_sm90.ptx"
else
  fail "cargo package --list -p fc-graph does not name kernels/elementwise.ptx and elementwise_sm90.ptx"
fi
if ! list_has fc-cuda-sys tests/audit.rs && list_has fc-cuda-sys tests/loader.rs; then
  pass "fc-cuda-sys's package keeps tests/loader.rs and leaves out the header audit (it needs the workspace's .headers/)"
else
  fail "fc-cuda-sys's package must hold tests/loader.rs and not tests/audit.rs"
fi
for p in "${publishable[@]}"; do
  if list_has "$p" LICENSE-MIT && list_has "$p" LICENSE-APACHE && list_has "$p" README.md; then
    pass "$p's package carries LICENSE-MIT, LICENSE-APACHE and README.md"
  else
    fail "$p's package lacks LICENSE-MIT, LICENSE-APACHE or README.md"
  fi
done

tree=$(cargo tree -q -p fc-graph -e build,normal --prefix none) || { fail "cargo tree -p fc-graph failed"; tree=""; }
if [[ -z $tree ]]; then
  :
elif bad=$(grep -E '^(bindgen|clang-sys) ' <<<"$tree" | sort -u | tr '\n' ' ') && [[ -n $bad ]]; then
  fail "fc-graph's build depends on $bad(cargo tree -p fc-graph -e build,normal)"
else
  pass "fc-graph builds without bindgen or clang-sys ($(sort -u <<<"$tree" | wc -l) crates in cargo tree -e build,normal)"
fi

kinds=$(python3 -c 'import json, sys
m = json.load(sys.stdin)
p = next(p for p in m["packages"] if p["name"] == "fc-graph")
print(",".join(k for t in p["targets"] if "lib" in t["kind"] for k in t["crate_types"]))' <<<"$meta")
if [[ $kinds == lib ]]; then
  pass "fc-graph is a plain library (crate types: $kinds)"
else
  fail "fc-graph's library has crate types '$kinds', want lib"
fi

# The shipped tool links the library crates only, not the benchmark or the C ABI.
cli_tree=$(cargo tree -q -p fcgraph-cli -e normal --prefix none) || cli_tree="<cargo tree failed>"
if grep -qE '^(fc-bench|fcgraph-capi) ' <<<"$cli_tree"; then
  fail "fcgraph-cli depends on $(grep -oE '^(fc-bench|fcgraph-capi)' <<<"$cli_tree" | sort -u | tr '\n' ' ')(cargo tree -p fcgraph-cli)"
elif [[ $cli_tree == "<cargo tree failed>" ]]; then
  fail "cargo tree -p fcgraph-cli failed"
else
  pass "fcgraph (fcgraph-cli) depends on neither fc-bench nor fcgraph-capi"
fi
exit $((fails > 0))
