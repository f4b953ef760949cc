# shellcheck shell=bash
# report.sh - sourced by ctest/run.sh and ctest/install-check.sh: logging,
# the PASS/FAIL/SKIP tally, and running one C test program and classifying
# it by its exit status and [PASS]/[FAIL]/[SKIP] lines.
#
# The sourcing script sets TIMEOUT_S (seconds per program), NAME_WIDTH (the
# summary's name column) and SKIP_DETAIL_CHARS (how much of a program's
# first [SKIP] line the summary keeps).

# log, die, usage, have (the repository's scripts/lib.sh)
# shellcheck source=scripts/lib.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/scripts/lib.sh"

PASSED=0
FAILED=0
SKIPPED=0
SUMMARY=()

section() { printf '\n== %s ==\n' "$*"; }
record() { # record STATUS NAME [DETAIL]
    case $1 in
    PASS) PASSED=$((PASSED + 1)) ;;
    FAIL) FAILED=$((FAILED + 1)) ;;
    SKIP) SKIPPED=$((SKIPPED + 1)) ;;
    esac
    SUMMARY+=("$(printf "%-4s  %-${NAME_WIDTH}s %s" "$1" "$2" "${3:-}")")
}
finish() {
    section summary
    local line
    for line in "${SUMMARY[@]+"${SUMMARY[@]}"}"; do log "$line"; done
    log "$PASSED passed, $FAILED failed, $SKIPPED skipped"
    [[ $FAILED -eq 0 ]]
}

# run_prog NAME BIN LOG: runs one program, classifies it, records it.
run_prog() {
    local name=$1 bin=$2 logf=$3 rc np nf ns cases
    log ""
    log "--- $name"
    set +e
    if command -v timeout >/dev/null; then
        timeout "$TIMEOUT_S" "$bin" 2>&1 | tee "$logf"
    else
        "$bin" 2>&1 | tee "$logf"
    fi
    rc=${PIPESTATUS[0]}
    set -e
    np=$(grep -c '^\[PASS\]' "$logf" || true)
    nf=$(grep -c '^\[FAIL\]' "$logf" || true)
    ns=$(grep -c '^\[SKIP\]' "$logf" || true)
    cases="cases: $np passed, $nf failed, $ns skipped"
    if [[ $rc -eq 124 ]]; then
        record FAIL "$name" "timed out after ${TIMEOUT_S}s; $cases"
    elif [[ $rc -ne 0 ]]; then
        record FAIL "$name" "exit $rc; $cases"
    elif [[ $nf -gt 0 ]]; then
        record FAIL "$name" "exit 0 but printed [FAIL]; $cases"
    elif [[ $np -gt 0 ]]; then
        record PASS "$name" "$cases"
    elif [[ $ns -gt 0 ]]; then
        record SKIP "$name" "$(grep -m1 '^\[SKIP\]' "$logf" | cut -c1-"$SKIP_DETAIL_CHARS")"
    else
        record FAIL "$name" "exit 0 without a [PASS] or [SKIP] line"
    fi
}
