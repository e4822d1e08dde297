#!/usr/bin/env bash
# usage: bash bench/cuda_mma_selfcheck.sh     (on a machine with a CUDA GPU and nvcc)
#
# Builds kernels/cuda/{matmul,flash_attention,fused_mlp}.cu, every matmul variant in
# bench/variants/cuda/matmul/ and a few other -D parameter sets of the other two into .so files with the CUDA backend's kernel-build command, builds
# bench/cuda_mma_selfcheck.cu (links cuBLAS), and runs it: one PASS/FAIL line per (kernel, shape,
# dtype), TIME lines for the bf16 benchmark sizes (matmul 4096³ next to cuBLAS, every variant),
# and a SUMMARY line. The log goes to $OUT/cuda_mma_selfcheck.log when OUT is set (else
# bench/results/cuda_mma_selfcheck.log). Exit status: that of the check (1 if any case failed).
#
# Needs <dlpack/dlpack.h>: taken from the system include path, from $DLPACK_INCLUDE, or, failing
# both, from an installed Python package (PyTorch ships it as torch/include/ATen/dlpack.h).
# Target: sm_90a on compute capability 9.0, else sm_<major><minor> of GPU 0 ($VB_CUDA_ARCH wins).
set -uo pipefail
command -v nvcc >/dev/null || export PATH="/usr/local/cuda/bin:$PATH"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
outdir="${OUT:-$here/bench/results}"
mkdir -p "$outdir"
log="$outdir/cuda_mma_selfcheck.log"
bd="$(mktemp -d "${TMPDIR:-/tmp}/vb_selfcheck.XXXXXX")"
mkdir -p "$bd/variants" "$bd/extra" "$bd/inc/dlpack"
exec > >(tee "$log") 2>&1

# dlpack header
inc=()
if [ -n "${DLPACK_INCLUDE:-}" ]; then
  inc=(-I"$DLPACK_INCLUDE")
elif ! echo '#include <dlpack/dlpack.h>' | g++ -x c++ -fsyntax-only - 2>/dev/null; then
  found="$(python3 - <<'EOF' 2>/dev/null
import glob, os, site, sys
roots = site.getsitepackages() + [site.getusersitepackages()]
for r in roots:
    for pat in ("*/include/dlpack/dlpack.h", "*/*/include/dlpack/dlpack.h", "torch/include/ATen/dlpack.h"):
        for f in glob.glob(os.path.join(r, pat)):
            print(f); sys.exit(0)
EOF
)"
  if [ -z "$found" ]; then
    echo "no <dlpack/dlpack.h> found: set DLPACK_INCLUDE to a folder holding dlpack/dlpack.h"
    exit 2
  fi
  cp "$found" "$bd/inc/dlpack/dlpack.h"
  inc=(-I"$bd/inc")
  echo "dlpack.h from $found"
fi

if [ -n "${VB_CUDA_ARCH:-}" ]; then
  arch="$VB_CUDA_ARCH"
else
  cap="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')"
  [ -z "$cap" ] && cap=90
  arch="$cap"
  [ "$cap" = 90 ] && arch=90a
fi
gen="-gencode=arch=compute_${arch},code=sm_${arch}"
nvflags=(-std=c++17 -O3 -I"$here/kernels/include" "${inc[@]}" -Xcompiler -fPIC -shared "$gen")
echo "build: nvcc ${nvflags[*]} (in $bd)"

t0=$(date +%s)
pids=()
build() {  # src out
  nvcc "${nvflags[@]}" -o "$2" "$1" >"$2.log" 2>&1 || { echo "BUILD FAIL $1"; cat "$2.log"; }
}
for k in matmul flash_attention fused_mlp; do
  build "$here/kernels/cuda/$k.cu" "$bd/$k.so" & pids+=($!)
done
# other parameter sets of flash_attention and fused_mlp (tag: -D flags)
build_d() {  # src out flags...
  local src=$1 out=$2; shift 2
  nvcc "${nvflags[@]}" "$@" -o "$out" "$src" >"$out.log" 2>&1 || { echo "BUILD FAIL $src $*"; cat "$out.log"; }
}
build_d "$here/kernels/cuda/flash_attention.cu" "$bd/extra/flash_attention__w8.so" -DFA_WARPS=8 & pids+=($!)
build_d "$here/kernels/cuda/flash_attention.cu" "$bd/extra/flash_attention__kv128.so" -DFA_BLOCK_KV=128 & pids+=($!)
build_d "$here/kernels/cuda/flash_attention.cu" "$bd/extra/flash_attention__kv32_wide16.so" -DFA_BLOCK_KV=32 -DFA_BLOCK_KV_WIDE=16 & pids+=($!)
build_d "$here/kernels/cuda/fused_mlp.cu" "$bd/extra/fused_mlp__k64_s3.so" -DSTAGES=3 -DBLOCK_K=64 & pids+=($!)
build_d "$here/kernels/cuda/fused_mlp.cu" "$bd/extra/fused_mlp__64x64_s2.so" -DBLOCK_M=64 -DBLOCK_N=64 -DWARPS_M=2 -DWARPS_N=2 -DSTAGES=2 & pids+=($!)
for f in "$here"/bench/variants/cuda/matmul/*.cu; do
  build "$f" "$bd/variants/$(basename "${f%.cu}").so" & pids+=($!)
done
cudalib="$(cd "$(dirname "$(command -v nvcc)")/.." && pwd)/lib64"
nvcc -std=c++17 -O2 "${inc[@]}" "$gen" -o "$bd/selfcheck" "$here/bench/cuda_mma_selfcheck.cu" \
  -Xlinker -rpath -Xlinker "$cudalib" -lcublas -ldl -lpthread >"$bd/selfcheck.log" 2>&1 & pids+=($!)
for p in "${pids[@]}"; do wait "$p"; done
if [ ! -x "$bd/selfcheck" ]; then  # retry without cuBLAS (no comparison line then)
  cat "$bd/selfcheck.log"
  echo "building the check without cuBLAS"
  nvcc -std=c++17 -O2 -DVB_NO_CUBLAS "${inc[@]}" "$gen" -o "$bd/selfcheck" \
    "$here/bench/cuda_mma_selfcheck.cu" -ldl -lpthread || { echo "BUILD FAIL bench/cuda_mma_selfcheck.cu"; exit 2; }
fi
echo "built in $(( $(date +%s) - t0 )) s"

timeout 300 "$bd/selfcheck" "$bd"  # a hung kernel must not eat the whole GPU session
rc=$?
[ "$rc" = 124 ] && echo "FAIL selfcheck timed out after 300 s"
echo "total $(( $(date +%s) - t0 )) s, log: $log"
exit "$rc"
