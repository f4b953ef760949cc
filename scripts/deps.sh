#!/usr/bin/env bash
# Installs what building and testing need beyond the Rust toolchain: a C
# compiler, python3 (the CUDA header fetch), libclang for bindgen (the
# header == exports check of capi/build.rs and the cuda-sys audit; the Rust
# library fc-graph itself needs none of it), and pkg-config and cmake (the
# install checks build C programs against an installed libfcgraph with both).
# Idempotent and quiet: a no-op when everything is there.
set -euo pipefail

# libclang as clang-sys (bindgen) looks for it: libclang.so, libclang.so.N or
# libclang-N.so, in $LIBCLANG_PATH or the usual library folders. Not to be
# confused with libclang-cpp.so, which bindgen cannot use.
find_libclang() {
  local d f
  for d in ${LIBCLANG_PATH:-} /usr/lib/llvm-*/lib /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib \
    /usr/local/lib /usr/local/lib64 /usr/lib/aarch64-linux-gnu; do
    [ -d "$d" ] || continue
    for f in "$d"/libclang.so "$d"/libclang.so.* "$d"/libclang-[0-9]*.so "$d"/libclang-[0-9]*.so.*; do
      [ -e "$f" ] && { echo "$f"; return 0; }
    done
  done
  return 1
}

missing=()
find_libclang >/dev/null || missing+=(libclang-dev)
command -v cc >/dev/null || missing+=(gcc)
command -v g++ >/dev/null || missing+=(g++)
command -v python3 >/dev/null || missing+=(python3)
{ command -v python3 >/dev/null && python3 -c 'import pip' 2>/dev/null; } || missing+=(python3-pip)
command -v pkg-config >/dev/null || missing+=(pkg-config)
command -v cmake >/dev/null || missing+=(cmake)
if [ ${#missing[@]} -gt 0 ]; then
  echo "deps: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  log=$(mktemp)
  # apt's chatter goes to a log that is printed only when apt fails.
  if ! { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"; } >"$log" 2>&1; then
    cat "$log" >&2; rm -f "$log"
    echo "deps: apt-get could not install ${missing[*]}" >&2; exit 1
  fi
  rm -f "$log"
  find_libclang >/dev/null || { echo "deps: libclang still not found after installing libclang-dev" >&2; exit 1; }
fi
