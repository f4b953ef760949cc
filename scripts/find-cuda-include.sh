# shellcheck shell=bash
# find-cuda-include.sh - sourced by scripts/gpu-bench.sh (bench/raw/raw_bench.c)
# and scripts/gpu-interop.sh (the raw driver rows of bench/interop/interop_bench.c).
#
# find_cuda_include: prints the folder holding cuda.h (absolute), or nothing:
# $CUDA_HOME/include, $CUDA_PATH/include, /usr/local/cuda/include, nvcc's
# include folders, /usr/include, then the headers shipped in the NVIDIA wheels
# of $PYTHON (default python3): nvidia/<pkg>/include or nvidia/<pkg>/<x>/include.
find_cuda_include() {
    local d nvcc_dir
    local cands=()
    [ -n "${CUDA_HOME:-}" ] && cands+=("$CUDA_HOME/include")
    [ -n "${CUDA_PATH:-}" ] && cands+=("$CUDA_PATH/include")
    cands+=(/usr/local/cuda/include)
    if nvcc_dir=$(dirname "$(command -v nvcc 2> /dev/null)" 2> /dev/null) && [ "$nvcc_dir" != "." ]; then
        cands+=("$nvcc_dir/../include" "$nvcc_dir/../targets/x86_64-linux/include")
    fi
    cands+=(/usr/local/cuda/targets/x86_64-linux/include /usr/include)
    for d in "${cands[@]}"; do
        if [ -f "$d/cuda.h" ]; then
            (cd "$d" && pwd)
            return 0
        fi
    done
    # Last resort: headers shipped in Python wheels (nvidia-*-cu13 / cu12).
    "${PYTHON:-python3}" - << 'PYEOF' 2> /dev/null || true
import glob, os, site, sys
roots = list(site.getsitepackages()) + [site.getusersitepackages()] + sys.path
for r in roots:
    for h in sorted(glob.glob(os.path.join(r, "nvidia", "*", "include", "cuda.h"))) + \
             sorted(glob.glob(os.path.join(r, "nvidia", "*", "*", "include", "cuda.h"))):
        print(os.path.dirname(h))
        sys.exit(0)
PYEOF
}
