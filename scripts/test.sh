#!/usr/bin/env bash
# Every test: installs dependencies and the CUDA headers for the audit, then
#   - formatting, clippy and the API docs (`cargo doc`, warnings denied);
#   - no raw driver call outside cuda-sys (scripts/check-raw-calls.sh: every
#     call goes through cuda-sys's checked-call layer, cuda_sys::result);
#   - docs/bad-input.md stays true (scripts/check-bad-input-table.sh: every
#     test its table names exists and is run);
#   - the Python tests of the benchmark report (bench/test_*.py, unittest);
#   - the Rust workspace tests (GPU suites skip visibly without a driver);
#   - the C ABI's handle table under AddressSanitizer (scripts/asan-handles.sh;
#     skips visibly without a nightly toolchain);
#   - Miri over the unit tests (scripts/miri.sh) and loom's models of the
#     handle table and hazard pointers, the recording sink and the break
#     hand-off (scripts/loom.sh);
#   - the release build of scripts/build.sh (libfcgraph.so/.a and fcgraph);
#   - the C suite (ctest/run.sh: the engine's seed test, built unmodified,
#     plus our own C tests) against target/release/libfcgraph.so;
#   - the install (ctest/install-check.sh): scripts/install.sh into a
#     temporary prefix, then the seed test built with pkg-config and with
#     CMake (find_package(fcgraph)), shared and static, and run;
#   - two simulated GPUs (scripts/test-double.sh): the driver double
#     (driver-double/) as the driver with 2 devices at driver versions
#     11040, 12000, 12030 and 13000: the engine's seed test 5 times, and
#     once more broken on purpose (it must fail), the C suite, the
#     installed package's programs and the Rust GPU suites;
#   - the fuzz targets (scripts/fuzz.sh, fuzz/: cargo-fuzz, nightly): C ABI
#     call sequences on the driver double, PTX module loading, bucket lists
#     and DOT file names, each for a fixed time from the committed seeds,
#     and every input that once crashed, replayed;
#   - the crates (scripts/check-crate.sh): `cargo package` of fc-cuda-sys
#     and fc-graph, verified; fc-graph builds without bindgen/libclang, its
#     package carries its PTX; fcgraph links neither fc-bench nor the C ABI.
#
# Every section runs, even after a failure; each one's output is shown and
# counted from its runner's own report: cargo's "test result:" lines (ignored
# tests count as skipped), the C suites' "N passed, N failed, N skipped"
# line, unittest's "Ran N tests" / "OK (skipped=N)", the PASS/FAIL/SKIP
# lines of the check scripts; a section with none of these (fmt, clippy,
# docs, the build) is one check. A section that exits non-zero counts at
# least one failure. The last line totals them all:
#   test.sh: N passed, N failed, N skipped
# Exit status 1 when anything failed.
set -euo pipefail
# ROOT, run
. "$(dirname "$0")/lib.sh"
cd "$ROOT"
# Here the header audit, the header == exports check and the install checks
# must run, not skip.
export FC_REQUIRE_AUDIT=1 FC_REQUIRE_HEADER_CHECK=1 FC_REQUIRE_INSTALL_TOOLS=1
scripts/deps.sh
scripts/fetch-cuda-headers.sh

TALLY=$(mktemp -d "${TMPDIR:-/tmp}/fc-test.XXXXXX")
trap 'rm -rf "$TALLY"' EXIT
ROWS=()
TOTAL_P=0 TOTAL_F=0 TOTAL_S=0

# counts LOG RC: "passed failed skipped" of one section's output.
counts() {
  awk -v rc="$2" '
    /^test result: (ok|FAILED)\. [0-9]+ passed; [0-9]+ failed; [0-9]+ ignored/ {
      cargo = 1; cp += $4; cf += $6; cs += $8; next
    }
    /^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$/ { tally = 1; tp += $1; tf += $3; ts += $5; next }
    /^Ran [0-9]+ tests? in / { py = 1; pn += $2; next }
    py && /^(OK|FAILED)( \(.*\))?$/ {
      s = $0; sub(/^[A-Z]+ ?\(?/, "", s); sub(/\)$/, "", s)
      n = split(s, kv, ", ")
      for (i = 1; i <= n; i++) {
        split(kv[i], pair, "=")
        if (pair[1] == "failures" || pair[1] == "errors" || pair[1] == "unexpected successes") pf += pair[2]
        else if (pair[1] == "skipped" || pair[1] == "expected failures") ps += pair[2]
      }
      next
    }
    /^(PASS|FAIL|SKIP)  / { check = 1; k[substr($0, 1, 4)]++ }
    END {
      p = cp + tp; f = cf + tf; s = cs + ts
      if (py) { p += pn - pf - ps; f += pf; s += ps }
      if (!cargo && !tally && !py && check) { p = k["PASS"]; f = k["FAIL"]; s = k["SKIP"] }
      if (!cargo && !tally && !py && !check) { if (rc == 0) p = 1; else f = 1 }
      if (rc != 0 && f == 0) f = 1
      printf "%d %d %d\n", p, f, s
    }' "$1"
}

# section NAME CMD...: runs CMD (lib.sh's run: output shown and kept) and
# adds its counts.
section() {
  local name=$1 out rc=0 p f s
  shift
  out="$TALLY/${#ROWS[@]}.log"
  : >"$out"
  LOG_FILE=$out
  run "$name" "$@" || rc=$?
  LOG_FILE=""
  read -r p f s < <(counts "$out" "$rc")
  TOTAL_P=$((TOTAL_P + p)) TOTAL_F=$((TOTAL_F + f)) TOTAL_S=$((TOTAL_S + s))
  ROWS+=("$(printf '%-16s %5d passed, %3d failed, %3d skipped  (exit %d)' "$name" "$p" "$f" "$s" "$rc")")
}

section fmt sh -c "cargo fmt --all -- --check && cargo fmt --manifest-path fuzz/Cargo.toml -- --check"
section python python3 -m unittest discover -s bench -p 'test_*.py'
section clippy cargo clippy --workspace --all-targets -q -- -D warnings
section docs env RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps -q # the API docs, no broken or private links
section raw-calls scripts/check-raw-calls.sh
section bad-input scripts/check-bad-input-table.sh # every test docs/bad-input.md names exists and is run
section rust cargo test --workspace --release
section asan scripts/asan-handles.sh
section miri scripts/miri.sh # fc-graph and capi unit tests under Miri (installs the component; skips visibly)
section loom scripts/loom.sh # capi's handle-table and hazard-pointer models, fc-graph's sink and break hand-off models, under loom (every interleaving)
section build scripts/build.sh # libfcgraph.so/.a and fcgraph, built as demo.sh and install.sh build them
section ctest bash ctest/run.sh target/release
section install bash ctest/install-check.sh
section fuzz scripts/fuzz.sh # libFuzzer over C ABI call sequences, PTX loading, bucket lists and DOT file names, on the driver double (fixed times; the fixed crashes replayed)
section double scripts/test-double.sh # two simulated GPUs: seed test x5, C suite, installed package, Rust GPU suites at 11040, 12000, 12030, 13000
section crates scripts/check-crate.sh

echo
echo "== test.sh summary"
printf '%s\n' "${ROWS[@]}"
echo "test.sh: $TOTAL_P passed, $TOTAL_F failed, $TOTAL_S skipped"
[[ $TOTAL_F -eq 0 ]]
