#!/usr/bin/env bash
# Installs what building and testing need beyond the Rust toolchain:
# libclang (bindgen: the header check in fc-graph/build.rs and the cuda-sys
# audit) and a C compiler. Idempotent; a no-op when everything is there.
set -euo pipefail
have_libclang() {
  ldconfig -p 2>/dev/null | grep -q 'libclang[-.0-9]*\.so' ||
    ls /usr/lib/llvm-*/lib/libclang*.so* >/dev/null 2>&1
}
missing=()
have_libclang || missing+=(libclang-dev)
command -v cc >/dev/null || missing+=(gcc)
command -v g++ >/dev/null || missing+=(g++)
command -v python3 >/dev/null || missing+=(python3 python3-pip)
if [ ${#missing[@]} -gt 0 ]; then
  echo "deps: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
