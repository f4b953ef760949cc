# shellcheck shell=bash
# scripts/lib.sh - the helpers every script of the repository shares. Source
# it (`. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"`); it defines no other
# names and runs nothing.
#
#   ROOT                  the repository root (absolute)
#   log MSG...            "$LOG_PREFIX""MSG" on stdout (LOG_FD=2: stderr), and
#                         appended to $LOG_FILE when that is set
#   die MSG...            "<script>: MSG" on stderr, then exit 2
#   usage                 prints the calling script's header comment (its --help)
#   have CMD              whether CMD is on PATH
#   absolute PATH         PATH made absolute against $PWD (not resolved)
#   workspace_version     the X.Y.Z of [workspace.package] in Cargo.toml
#   run NAME CMD...       one step: "=== NAME: CMD", its output (also into
#                         $LOG_FILE), "=== NAME: exit N"; a failure adds one
#                         to FAILS; returns CMD's status
#
# Settings read: LOG_PREFIX (default none), LOG_FD (1), LOG_FILE (none); set
# them after sourcing this file, which resets them.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
FAILS=${FAILS:-0}
# Each script sets its own: a value from a calling script's environment
# (a step that runs another script) must not write into the caller's log.
LOG_FILE="" LOG_PREFIX="" LOG_FD=1

log() {
    if [[ -n ${LOG_FILE:-} ]]; then
        printf '%s%s\n' "${LOG_PREFIX:-}" "$*" | tee -a "$LOG_FILE" >&"${LOG_FD:-1}"
    else
        printf '%s%s\n' "${LOG_PREFIX:-}" "$*" >&"${LOG_FD:-1}"
    fi
}

die() {
    printf '%s: %s\n' "$(basename "$0")" "$*" >&2
    exit 2
}

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }

have() { command -v "$1" >/dev/null 2>&1; }

absolute() { case $1 in /*) printf '%s' "$1" ;; *) printf '%s/%s' "$PWD" "$1" ;; esac; }

workspace_version() {
    awk '/^\[workspace\.package\]/ { s = 1; next } /^\[/ { s = 0 }
      s && /^version[ \t]*=/ { sub(/^[^"]*"/, ""); sub(/".*/, ""); print; exit }' "$ROOT/Cargo.toml"
}

run() {
    local name=$1 rc
    shift
    LOG_PREFIX="" log "=== $name: $*"
    if [[ -n ${LOG_FILE:-} ]]; then
        local rcfile
        rcfile=$(mktemp)
        # The status travels through a file: safe under set -e and pipefail.
        { rc=0; "$@" || rc=$?; echo "$rc" >"$rcfile"; } 2>&1 | tee -a "$LOG_FILE"
        rc=$(<"$rcfile")
        rm -f "$rcfile"
    else
        rc=0
        "$@" || rc=$?
    fi
    LOG_PREFIX="" log "=== $name: exit $rc"
    [[ $rc -eq 0 ]] || FAILS=$((FAILS + 1))
    return "$rc"
}
