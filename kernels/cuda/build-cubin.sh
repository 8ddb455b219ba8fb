#!/usr/bin/env bash
# Assembles the committed PTX modules (ptx/*.ptx) into sm_90 cubins for the
# backend to embed (modules.go): on an H100/H200 the kernels then load with
# no JIT at all; any other GPU, or a cubin its driver refuses, JIT-compiles
# the PTX as before. CUDA 11.8's ptxas assembles sm_90. Each cubin is named
# after its PTX's digest, so a stale one is never loaded:
#
#   cubin/<module>.<sha256(PTX)[:16]>.sm_90.cubin
#
#   build-cubin.sh [arch]    default sm_90; without ptxas it says so and
#                            leaves cubin/ empty (the backend JITs the PTX)
set -euo pipefail
cd "$(dirname "$0")"
PTXAS=${PTXAS:-ptxas}
arch=${1:-sm_90}
rm -f cubin/*.cubin
if ! command -v "$PTXAS" >/dev/null; then
	echo "build-cubin: no $PTXAS (scripts/install-cuda.sh): no prebuilt cubins, the backend JIT-compiles the PTX" >&2
	exit 0
fi
# matmul takes most of the time: the modules assemble side by side
pids=()
for m in ptx/*.ptx; do
	name=$(basename "$m" .ptx)
	sum=$(sha256sum "$m" | cut -c1-16)
	"$PTXAS" -arch="$arch" -O3 -o "cubin/$name.$sum.$arch.cubin.tmp" "$m" &
	pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || { rm -f cubin/*.tmp; echo "build-cubin: ptxas failed" >&2; exit 1; }; done
for f in cubin/*.cubin.tmp; do mv "$f" "${f%.tmp}"; done
echo "build-cubin: $(ls cubin/*.cubin | wc -l) cubins ($arch), $(du -cb cubin/*.cubin | tail -n 1 | cut -f1) bytes in kernels/cuda/cubin"
