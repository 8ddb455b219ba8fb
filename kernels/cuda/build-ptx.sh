#!/usr/bin/env bash
# Compiles kernels/cuda/*.cu to PTX for the Go backend to embed (go:embed ptx/*.ptx).
#
#   build-ptx.sh [outdir] [arch]      defaults: kernels/cuda/ptx, sm_80
#
# The committed PTX is built by CUDA 11.8's nvcc for sm_80: any newer driver
# JIT-compiles it for its GPU (an H200 included). On a machine with a newer
# toolkit, `build-ptx.sh /tmp/ptx sm_90` builds the same sources for Hopper;
# the backend loads such a directory instead of the embedded PTX when asked
# (cuda.Options.PTXDir, or SLUICE_CUDA_PTX_DIR).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/ptx}
arch=${2:-sm_80}
NVCC=${NVCC:-nvcc}
# Debian's gcc 12 is newer than CUDA 11.8 supports: use g++-11 when there is one
# (for -ptx only the host preprocessor runs, so a newer one is safe enough).
NVCC_FLAGS=${NVCC_FLAGS:-}
if "$NVCC" --version | grep -q "release 11\."; then
	if command -v g++-11 >/dev/null; then NVCC_FLAGS="$NVCC_FLAGS -ccbin g++-11"; else NVCC_FLAGS="$NVCC_FLAGS -allow-unsupported-compiler"; fi
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)
# nvcc names file-local symbols (_INTERNAL_<hash>) after the source's path:
# compile from one fixed directory so the PTX is the same wherever the
# repository lies (CI checks the committed PTX against a fresh build).
stage=/tmp/sluice-cuda-ptx-src
# The directory is fixed, so two builds at once (two checkouts, parallel CI
# jobs) would stage over each other: take turns.
exec 9>"$stage.lock"
flock 9
rm -rf "$stage"
mkdir -p "$stage"
cp "$here"/*.cu "$here"/*.cuh "$stage"/
cd "$stage"
for src in *.cu; do
	name=$(basename "$src" .cu)
	"$NVCC" -ptx -arch="$arch" -O3 $NVCC_FLAGS -std=c++17 -I. -o "$out/$name.ptx.tmp" "$src"
	# nvcc writes its version and the source path into the header; drop the
	# path so the committed PTX does not depend on where it was built.
	grep -v '^// Compiler Build ID\|^// Based on\|^//.*\.cu$' "$out/$name.ptx.tmp" >"$out/$name.ptx"
	rm -f "$out/$name.ptx.tmp"
done
echo "PTX ($arch) in $out: $(cd "$out" && ls *.ptx | tr '\n' ' ')"
