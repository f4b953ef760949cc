#!/usr/bin/env bash
# Loom (a model checker for concurrent Rust: it runs a test under every
# interleaving of its threads, and lets each load return any store the
# memory model allows) over the C ABI's handle table and hazard pointers
# and over fc-graph's recording sink and break-state hand-off:
# - the `loom_` tests of capi/src/hazard.rs (protect/retire: no use after
#   retire, every retired object reclaimed) and capi/src/handles.rs
#   (lookup vs free vs reuse: a stale handle never resolves to the slot's
#   next object; racing frees);
# - those of fc-graph/src/segment_loom_tests.rs (launches from two threads
#   into one open segment, launches racing a break and the end, a list
#   handed back while a segment opens: no launch lost or taken twice, the
#   sink's spin lock exclusive and always let go) and
#   fc-graph/src/context/capture_control_loom_tests.rs (a recording's
#   break against another thread's begin and launch, a break that
#   unwinds, replay breaks on two threads: one recording at a time, every
#   break ends and hands over to the next segment, no latch).
# Built with `--cfg loom`, under which capi/src/sync.rs and
# fc-graph/src/sync.rs give the real code loom's atomics, mutexes, cells
# and thread-locals; in its own target dir (target/loom), since the cfg
# applies to every crate of the build.
#
# Prints one line per model (`loom: NAME: N interleavings, 0 failures`, or
# the failing test) and the tally `N passed, N failed, N skipped` over both
# crates; the full output is in target/loom.log. Called by scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p target
log=target/loom.log
echo "loom: capi's handle-table and hazard-pointer models, fc-graph's sink and break hand-off models (RUSTFLAGS=\"--cfg loom\", target/loom)"
start=$SECONDS
rc=0
# One build and one run for both crates: cargo runs the two test binaries
# one after the other (`--no-fail-fast`: the second runs even when the first
# fails), each ending with its own `test result:` line.
RUSTFLAGS="--cfg loom" cargo test -p fcgraph-capi -p fc-graph --release --lib --no-fail-fast --target-dir target/loom \
    loom_ -- --nocapture > "$log" 2>&1 || rc=$?
grep -E '^loom: ' "$log" || true
grep -E '^test .* \.\.\. FAILED$' "$log" | sed -E 's/^test (.*) \.\.\. FAILED$/loom: \1: FAILED/' || true
binaries=2 # capi's and fc-graph's
passed=0 failed=0 skipped=0 results=0
while read -r line; do
    if [[ $line =~ ([0-9]+)\ passed\;\ ([0-9]+)\ failed\;\ ([0-9]+)\ ignored ]]; then
        passed=$((passed + BASH_REMATCH[1])) failed=$((failed + BASH_REMATCH[2]))
        skipped=$((skipped + BASH_REMATCH[3])) results=$((results + 1))
    fi
done < <(grep -E '^test result: ' "$log" || true)
# A binary without its result line did not build, or aborted (loom's report
# of a failed model can end in a double panic).
[[ $results -ge $binaries ]] || failed=$((failed + binaries - results))
if [[ $rc -ne 0 ]]; then
    # cargo's own summary lines stay out: test.sh counts the tally below.
    grep -v -E '^test result: ' "$log" | tail -n 60
    [[ $failed -gt 0 ]] || failed=1
fi
echo "loom: $((SECONDS - start)) s (target/loom.log)"
echo "$passed passed, $failed failed, $skipped skipped"
[[ $rc -eq 0 && $failed -eq 0 ]]
