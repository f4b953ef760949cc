#!/usr/bin/env bash
# Loom (a model checker for concurrent Rust: it runs a test under every
# interleaving of its threads, and lets each load return any store the
# memory model allows) over the C ABI's handle table and hazard pointers:
# the `loom_` tests of capi/src/hazard.rs (protect/retire: no use after
# retire, every retired object reclaimed) and capi/src/handles.rs (lookup
# vs free vs reuse: a stale handle never resolves to the slot's next
# object; racing frees). Built with `--cfg loom`, under which
# capi/src/sync.rs gives the real code loom's atomics, mutexes and
# thread-locals; in its own target dir (target/loom), since the cfg applies
# to every crate of the build.
#
# Prints one line per model (`loom: NAME: N interleavings, 0 failures`, or
# the failing test) and the tally `N passed, N failed, N skipped`; the full
# output is in target/loom.log. Called by scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p target
log=target/loom.log
echo "loom: capi's handle-table and hazard-pointer models (RUSTFLAGS=\"--cfg loom\", target/loom)"
start=$SECONDS
rc=0
RUSTFLAGS="--cfg loom" cargo test -p fcgraph-capi --release --lib --target-dir target/loom loom_ -- --nocapture \
    > "$log" 2>&1 || rc=$?
grep -E '^loom: ' "$log" || true
grep -E '^test .* \.\.\. FAILED$' "$log" | sed -E 's/^test (.*) \.\.\. FAILED$/loom: \1: FAILED/' || true
summary=$(grep -E '^test result: ' "$log" | tail -n 1 || true)
if [[ $summary =~ ([0-9]+)\ passed\;\ ([0-9]+)\ failed\;\ ([0-9]+)\ ignored ]]; then
    passed=${BASH_REMATCH[1]} failed=${BASH_REMATCH[2]} skipped=${BASH_REMATCH[3]}
else
    passed=0 failed=1 skipped=0 # no test ran: the build failed
fi
if [[ $rc -ne 0 ]]; then
    # cargo's own summary lines stay out: test.sh counts the tally below.
    grep -v -E '^test result: ' "$log" | tail -n 60
    [[ $failed -gt 0 ]] || failed=1
fi
echo "loom: $((SECONDS - start)) s (target/loom.log)"
echo "$passed passed, $failed failed, $skipped skipped"
[[ $rc -eq 0 && $failed -eq 0 ]]
