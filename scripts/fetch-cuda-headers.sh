#!/usr/bin/env bash
# Fetches NVIDIA's driver API headers (cuda.h, cudaTypedefs.h) of CUDA 12 and
# CUDA 13 into .headers/cuda-12/ and .headers/cuda-13/ at the repository root,
# for the cuda-sys audit test (cuda-sys/tests/audit.rs).
#
# The headers come from the PyPI wheels of the CUDA runtime, downloaded with
# `python3 -m pip download --no-deps` into .whl/ (git-ignored). Idempotent: a
# version whose headers are already present is skipped, and a wheel already
# in .whl/ is not downloaded again. Changing a pinned version below makes the
# next run fetch that version.
#
# Usage: scripts/fetch-cuda-headers.sh [--force]
#   --force   re-extract the headers even if they exist.
# Environment: PYTHON (default python3).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
HEADERS_DIR="$ROOT/.headers"
WHEEL_DIR="$ROOT/.whl"
PYTHON="${PYTHON:-python3}"
FILES=(cuda.h cudaTypedefs.h)

FORCE=0
if [[ "${1:-}" == "--force" ]]; then
    FORCE=1
elif [[ $# -gt 0 ]]; then
    echo "usage: $0 [--force]" >&2
    exit 2
fi

# have_headers DEST REQ: true when every header is already in DEST and was
# extracted from the wheel of requirement REQ (recorded in DEST/SOURCE).
have_headers() {
    local dest="$1" req="$2" f
    for f in "${FILES[@]}"; do
        [[ -s "$dest/$f" ]] || return 1
    done
    [[ "$(cat "$dest/SOURCE" 2>/dev/null)" == "$req" ]]
}

# find_wheel DIR DIST VERSION: prints the wheel of DIST==VERSION in DIR, if any.
find_wheel() {
    local dir="$1" dist="${2//-/_}" version="$3"
    find "$dir" -maxdepth 1 -name "${dist}-${version}-*.whl" 2>/dev/null | sort | tail -n 1
}

# fetch LABEL REQUIREMENT INCLUDE_PREFIX: downloads the wheel for
# REQUIREMENT and extracts FILES from INCLUDE_PREFIX into .headers/LABEL.
fetch() {
    local label="$1" req="$2" prefix="$3"
    local dest="$HEADERS_DIR/$label"
    local dist="${req%%==*}" version="${req#*==}"
    local wdir="$WHEEL_DIR/$label"

    if [[ $FORCE -eq 0 ]] && have_headers "$dest" "$req"; then
        echo "$label: headers present in $dest, skipping"
        return 0
    fi

    mkdir -p "$wdir" "$dest"
    local wheel
    wheel="$(find_wheel "$wdir" "$dist" "$version")"
    if [[ -z "$wheel" ]]; then
        echo "$label: downloading $req"
        "$PYTHON" -m pip download --no-deps --only-binary=:all: \
            --platform manylinux2014_x86_64 --python-version 3.11 \
            --dest "$wdir" "$req"
        wheel="$(find_wheel "$wdir" "$dist" "$version")"
    fi
    if [[ -z "$wheel" ]]; then
        echo "$label: no wheel for $req in $wdir after download" >&2
        exit 1
    fi

    echo "$label: extracting ${FILES[*]} from $(basename "$wheel")"
    "$PYTHON" - "$wheel" "$prefix" "$dest" "${FILES[@]}" <<'EOF'
import sys, zipfile, os
wheel, prefix, dest, names = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
with zipfile.ZipFile(wheel) as z:
    for name in names:
        member = prefix.rstrip("/") + "/" + name
        try:
            data = z.read(member)
        except KeyError:
            sys.exit(f"{wheel}: has no {member}")
        tmp = os.path.join(dest, name + ".tmp")
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, os.path.join(dest, name))
EOF
    echo "$req" >"$dest/SOURCE"
}

fetch cuda-12 "nvidia-cuda-runtime-cu12==12.9.79" "nvidia/cuda_runtime/include"
fetch cuda-13 "nvidia-cuda-runtime==13.0.96" "nvidia/cu13/include"
echo "headers ready in $HEADERS_DIR"
